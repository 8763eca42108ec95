/// The field names of the store's record types (docs/protocol.md, "Record types"), as
/// services and clients read and write them in `fields`, instead of string literals: a
/// misspelt name is a compile error, and a test checks that each one is a field of the
/// schema `store.schema` reports. A name shared by several types (`childRef`, `deviceID`)
/// is one constant. (Named apart from ScreenTimeKit's `RecordFields`, the protocol of its
/// typed records.) A new constant goes into `all` too: the test checks `all`.
public enum RecordFieldNames {
    public static let acceptedAt = "acceptedAt"
    public static let action = "action"
    public static let actor = "actor"
    public static let actorParentRef = "actorParentRef"
    public static let alertNoDataHours = "alertNoDataHours"
    public static let appVersion = "appVersion"
    public static let alertOnBalanceExhausted = "alertOnBalanceExhausted"
    public static let alertRewardMinutesPerDay = "alertRewardMinutesPerDay"
    public static let amount = "amount"
    public static let appsUsedJSON = "appsUsedJSON"
    public static let balanceSeconds = "balanceSeconds"
    public static let blockingEnabled = "blockingEnabled"
    public static let bundleId = "bundleId"
    public static let clockOffsetSeconds = "clockOffsetSeconds"
    public static let bundleIdentifier = "bundleIdentifier"
    public static let category = "category"
    public static let childName = "childName"
    public static let childOpaqueId = "childOpaqueId"
    public static let childRef = "childRef"
    public static let classification = "classification"
    public static let code = "code"
    public static let commandID = "commandID"
    public static let commandType = "commandType"
    public static let createdAt = "createdAt"
    public static let createdBy = "createdBy"
    public static let date = "date"
    public static let dateAdded = "dateAdded"
    public static let deviceID = "deviceID"
    public static let deviceIds = "deviceIds"
    public static let deviceName = "deviceName"
    public static let deviceType = "deviceType"
    public static let displayName = "displayName"
    public static let earnedPoints = "earnedPoints"
    public static let errorMessage = "errorMessage"
    public static let executedAt = "executedAt"
    public static let expiresAt = "expiresAt"
    public static let failedAttempts = "failedAttempts"
    public static let familyRef = "familyRef"
    public static let idempotencyKey = "idempotencyKey"
    public static let isActive = "isActive"
    public static let isEnabled = "isEnabled"
    public static let kind = "kind"
    public static let lastModified = "lastModified"
    public static let lastSyncDate = "lastSyncDate"
    public static let lastUpdated = "lastUpdated"
    public static let ledgerEntriesPruned = "ledgerEntriesPruned"
    public static let logicalID = "logicalID"
    public static let metadata = "metadata"
    public static let pairedDeviceIds = "pairedDeviceIds"
    public static let parentDeviceID = "parentDeviceID"
    public static let payloadJSON = "payloadJSON"
    public static let pointsAccrued = "pointsAccrued"
    public static let pointsAdjusted = "pointsAdjusted"
    public static let pointsBalance = "pointsBalance"
    public static let pointsPerMinute = "pointsPerMinute"
    public static let pointsRedeemed = "pointsRedeemed"
    public static let reason = "reason"
    public static let recordID = "recordID"
    public static let registrationDate = "registrationDate"
    public static let rewardApps = "rewardApps"
    public static let rewardCategories = "rewardCategories"
    public static let rewardSecondsPerPoint = "rewardSecondsPerPoint"
    public static let rewardSecondsUsed = "rewardSecondsUsed"
    public static let role = "role"
    public static let secretSHA256 = "secretSHA256"
    public static let sessionEnd = "sessionEnd"
    public static let sessionStart = "sessionStart"
    public static let settingsVersion = "settingsVersion"
    public static let sfSymbolName = "sfSymbolName"
    public static let shielded = "shielded"
    public static let source = "source"
    public static let status = "status"
    public static let summaryID = "summaryID"
    public static let target = "target"
    public static let targetDeviceID = "targetDeviceID"
    public static let timestamp = "timestamp"
    public static let timeZone = "timeZone"
    public static let title = "title"
    public static let tokenHash = "tokenHash"
    public static let totalLearningSeconds = "totalLearningSeconds"
    public static let totalPointsEarned = "totalPointsEarned"
    public static let totalRewardSeconds = "totalRewardSeconds"
    public static let totalSeconds = "totalSeconds"
    public static let type = "type"
    public static let updatedAt = "updatedAt"
    public static let usageRecordsPruned = "usageRecordsPruned"
    public static let weekStart = "weekStart"
    public static let zone = "zone"

    /// Every one of them.
    public static let all: Set<String> = [
        acceptedAt, action, actor, actorParentRef, alertNoDataHours, alertOnBalanceExhausted,
        alertRewardMinutesPerDay, amount, appVersion, appsUsedJSON, balanceSeconds, blockingEnabled, bundleId,
        bundleIdentifier, category, childName, clockOffsetSeconds, childOpaqueId, childRef, classification, code, commandID,
        commandType, createdAt, createdBy, date, dateAdded, deviceID, deviceIds, deviceName, deviceType,
        displayName, earnedPoints, errorMessage, executedAt, expiresAt, failedAttempts, familyRef,
        idempotencyKey, isActive, isEnabled, kind, lastModified, lastSyncDate, lastUpdated,
        ledgerEntriesPruned, logicalID, metadata, pairedDeviceIds, parentDeviceID, payloadJSON, pointsAccrued,
        pointsAdjusted, pointsBalance, pointsPerMinute, pointsRedeemed, reason, recordID, registrationDate,
        rewardApps, rewardCategories, rewardSecondsPerPoint, rewardSecondsUsed, role, secretSHA256, sessionEnd,
        sessionStart, settingsVersion, sfSymbolName, shielded, source, status, summaryID, target,
        targetDeviceID, timestamp, timeZone, title, tokenHash, totalLearningSeconds, totalPointsEarned,
        totalRewardSeconds, totalSeconds, type, updatedAt, usageRecordsPruned, weekStart, zone,
    ]
}
