import Foundation
import RPCCore
import StoreAPI

/// A record type of the store's schema, as a typed Codable struct: its stored properties
/// are the fields, named exactly as in the schema (`Sources/RecordStore/Schema`,
/// `store.schema`). Optional properties are optional fields; fields a newer server adds
/// are ignored when reading.
public protocol RecordFields: Codable, Sendable, Hashable {
    /// The schema's record type name (`AppRule`).
    static var recordType: String { get }
    /// Lists that merge by union when two devices change them at once.
    static var setFields: Set<String> { get }
}

extension RecordFields {
    public static var setFields: Set<String> { [] }
}

/// A reference field's value: another record, by name, in this zone unless `zone` says.
public struct RecordReference: Codable, Sendable, Hashable {
    public var recordName: String
    public var zone: String?

    public init(_ recordName: String, zone: String? = nil) {
        self.recordName = recordName
        self.zone = zone
    }
}

/// The family itself: one per family, in `default`, named by the family id.
public struct Family: RecordFields {
    public static let recordType = "Family"
    public var code: String?
    public var settingsVersion: Int64?
    public var displayName: String?
    /// IANA name; local days are counted in it.
    public var timeZone: String?
    public var rewardSecondsPerPoint: Int64?
    public var alertRewardMinutesPerDay: Int64?
    public var alertOnBalanceExhausted: Bool?
    public var alertNoDataHours: Int64?

    public init(code: String? = nil, settingsVersion: Int64? = nil, displayName: String? = nil, timeZone: String? = nil,
                rewardSecondsPerPoint: Int64? = nil, alertRewardMinutesPerDay: Int64? = nil, alertOnBalanceExhausted: Bool? = nil,
                alertNoDataHours: Int64? = nil) {
        self.code = code
        self.settingsVersion = settingsVersion
        self.displayName = displayName
        self.timeZone = timeZone
        self.rewardSecondsPerPoint = rewardSecondsPerPoint
        self.alertRewardMinutesPerDay = alertRewardMinutesPerDay
        self.alertOnBalanceExhausted = alertOnBalanceExhausted
        self.alertNoDataHours = alertNoDataHours
    }
}

/// A parent: `parent-<deviceId>` in `default`.
public struct ParentProfile: RecordFields {
    public static let recordType = "ParentProfile"
    public static let setFields: Set<String> = ["deviceIds"]
    public var familyRef: RecordReference
    /// `admin` or `co_parent`.
    public var role: String
    public var deviceIds: [String]?
    public var displayName: String?

    public init(familyRef: RecordReference, role: String, deviceIds: [String]? = nil, displayName: String? = nil) {
        self.familyRef = familyRef
        self.role = role
        self.deviceIds = deviceIds
        self.displayName = displayName
    }
}

/// A child, by an opaque id: `child-<childId>` in `default`.
public struct ChildContext: RecordFields {
    public static let recordType = "ChildContext"
    public static let setFields: Set<String> = ["pairedDeviceIds"]
    public var familyRef: RecordReference
    public var childOpaqueId: String
    public var displayName: String?
    public var pairedDeviceIds: [String]?

    public init(familyRef: RecordReference, childOpaqueId: String, displayName: String? = nil, pairedDeviceIds: [String]? = nil) {
        self.familyRef = familyRef
        self.childOpaqueId = childOpaqueId
        self.displayName = displayName
        self.pairedDeviceIds = pairedDeviceIds
    }
}

/// The root record of a child device's zone: `session`.
public struct MonitoringSession: RecordFields {
    public static let recordType = "MonitoringSession"
    public var childRef: RecordReference?
    public var deviceID: String?
    public var parentDeviceID: String?
    /// `pending`, `active`, `revoked`.
    public var status: String?
    public var title: String?

    public init(childRef: RecordReference? = nil, deviceID: String? = nil, parentDeviceID: String? = nil, status: String? = nil, title: String? = nil) {
        self.childRef = childRef
        self.deviceID = deviceID
        self.parentDeviceID = parentDeviceID
        self.status = status
        self.title = title
    }
}

/// A device, parent or child: `device-<deviceId>`.
public struct RegisteredDevice: RecordFields {
    public static let recordType = "RegisteredDevice"
    public var deviceID: String
    public var deviceName: String
    /// `parent` or `child`.
    public var deviceType: String
    public var childName: String?
    public var parentDeviceID: String?
    public var childRef: RecordReference?
    public var registrationDate: Date?
    public var lastSyncDate: Date?
    public var isActive: Bool?
    /// The app's version, as the device says (schema v7): shown to the parents.
    public var appVersion: String?

    public init(deviceID: String, deviceName: String, deviceType: String, childName: String? = nil, parentDeviceID: String? = nil,
                childRef: RecordReference? = nil, registrationDate: Date? = nil, lastSyncDate: Date? = nil, isActive: Bool? = nil,
                appVersion: String? = nil) {
        self.appVersion = appVersion
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.deviceType = deviceType
        self.childName = childName
        self.parentDeviceID = parentDeviceID
        self.childRef = childRef
        self.registrationDate = registrationDate
        self.lastSyncDate = lastSyncDate
        self.isActive = isActive
    }
}

/// A family-wide rule for an app, unique per (familyRef, bundleId).
public struct AppRule: RecordFields {
    public static let recordType = "AppRule"
    public var familyRef: RecordReference
    public var bundleId: String
    /// `learning` or `reward`.
    public var classification: String
    /// `default` or `override`.
    public var source: String?
    public var pointsPerMinute: Int64?
    public var isEnabled: Bool?
    public var blockingEnabled: Bool?
    public var displayName: String?

    public init(familyRef: RecordReference, bundleId: String, classification: String, source: String? = nil, pointsPerMinute: Int64? = nil,
                isEnabled: Bool? = nil, blockingEnabled: Bool? = nil, displayName: String? = nil) {
        self.familyRef = familyRef
        self.bundleId = bundleId
        self.classification = classification
        self.source = source
        self.pointsPerMinute = pointsPerMinute
        self.isEnabled = isEnabled
        self.blockingEnabled = blockingEnabled
        self.displayName = displayName
    }
}

/// A per-device app configuration (AppConfiguration).
public struct AppConfiguration: RecordFields {
    public static let recordType = "AppConfiguration"
    public var logicalID: String
    public var tokenHash: String?
    public var bundleIdentifier: String?
    public var displayName: String?
    public var sfSymbolName: String?
    /// `learning` or `reward`.
    public var category: String?
    public var pointsPerMinute: Int64?
    public var isEnabled: Bool?
    public var blockingEnabled: Bool?
    public var dateAdded: Date?
    public var lastModified: Date?
    public var deviceID: String?

    public init(logicalID: String, tokenHash: String? = nil, bundleIdentifier: String? = nil, displayName: String? = nil, sfSymbolName: String? = nil,
                category: String? = nil, pointsPerMinute: Int64? = nil, isEnabled: Bool? = nil, blockingEnabled: Bool? = nil, dateAdded: Date? = nil,
                lastModified: Date? = nil, deviceID: String? = nil) {
        self.logicalID = logicalID
        self.tokenHash = tokenHash
        self.bundleIdentifier = bundleIdentifier
        self.displayName = displayName
        self.sfSymbolName = sfSymbolName
        self.category = category
        self.pointsPerMinute = pointsPerMinute
        self.isEnabled = isEnabled
        self.blockingEnabled = blockingEnabled
        self.dateAdded = dateAdded
        self.lastModified = lastModified
        self.deviceID = deviceID
    }
}

/// Which reward apps and categories get shielded.
public struct ShieldPolicy: RecordFields {
    public static let recordType = "ShieldPolicy"
    public static let setFields: Set<String> = ["rewardCategories", "rewardApps"]
    public var familyRef: RecordReference
    public var childRef: RecordReference?
    public var rewardCategories: [String]?
    public var rewardApps: [String]?

    public init(familyRef: RecordReference, childRef: RecordReference? = nil, rewardCategories: [String]? = nil, rewardApps: [String]? = nil) {
        self.familyRef = familyRef
        self.childRef = childRef
        self.rewardCategories = rewardCategories
        self.rewardApps = rewardApps
    }
}

/// A change for a child device to apply; the child reports its status.
public struct ConfigurationCommand: RecordFields {
    public static let recordType = "ConfigurationCommand"
    public var commandID: String?
    public var targetDeviceID: String
    /// `applyConfiguration` (the server's ``ConfigurationSnapshot``), `shieldRewardApps`,
    /// `unshieldRewardApps`, …
    public var commandType: String
    /// JSON text.
    public var payloadJSON: String?
    public var createdAt: Date?
    public var executedAt: Date?
    /// `pending`, `executed`, `failed`.
    public var status: String
    public var errorMessage: String?

    public init(commandID: String? = nil, targetDeviceID: String, commandType: String, payloadJSON: String? = nil, createdAt: Date? = nil,
                executedAt: Date? = nil, status: String = "pending", errorMessage: String? = nil) {
        self.commandID = commandID
        self.targetDeviceID = targetDeviceID
        self.commandType = commandType
        self.payloadJSON = payloadJSON
        self.createdAt = createdAt
        self.executedAt = executedAt
        self.status = status
        self.errorMessage = errorMessage
    }

    /// The payload decoded as `T`.
    public func payload<T: Decodable>(_ type: T.Type) throws -> T {
        try RPCJSON.makeDecoder().decode(T.self, from: Data((self.payloadJSON ?? "null").utf8))
    }

    /// The family's whole configuration, when this is the server's `applyConfiguration`
    /// command: apply it in place of what the device had.
    public var configuration: ConfigurationSnapshot? {
        ConfigurationSnapshot(commandType: self.commandType, payloadJSON: self.payloadJSON)
    }
}

/// One session of one app on one child device.
public struct UsageRecord: RecordFields {
    public static let recordType = "UsageRecord"
    public var recordID: String?
    public var logicalID: String
    public var bundleId: String?
    public var displayName: String?
    public var sessionStart: Date
    public var sessionEnd: Date
    public var totalSeconds: Int64
    public var earnedPoints: Int64?
    /// `learning` or `reward`.
    public var category: String?
    public var deviceID: String
    /// Written by the server: how far this device's clock was ahead of the server's when it
    /// sent the session (seconds, negative behind; nil when right). The session counts at
    /// its times less this.
    public var clockOffsetSeconds: Int64?

    public init(recordID: String? = nil, logicalID: String, bundleId: String? = nil, displayName: String? = nil, sessionStart: Date, sessionEnd: Date,
                totalSeconds: Int64, earnedPoints: Int64? = nil, category: String? = nil, deviceID: String) {
        self.recordID = recordID
        self.logicalID = logicalID
        self.bundleId = bundleId
        self.displayName = displayName
        self.sessionStart = sessionStart
        self.sessionEnd = sessionEnd
        self.totalSeconds = totalSeconds
        self.earnedPoints = earnedPoints
        self.category = category
        self.deviceID = deviceID
    }
}

/// A device's day, written by the aggregator: `<deviceID>_<YYYY-MM-DD>` in its zone.
public struct DailySummary: RecordFields {
    public static let recordType = "DailySummary"
    public var summaryID: String?
    public var date: Date
    public var deviceID: String
    public var childRef: RecordReference?
    public var totalLearningSeconds: Int64?
    public var totalRewardSeconds: Int64?
    public var totalPointsEarned: Int64?
    /// JSON text: `[{app, category, seconds, points}]`.
    public var appsUsedJSON: String?
    public var lastUpdated: Date?

    public struct AppUsage: Codable, Sendable, Hashable {
        public var app: String
        public var category: String?
        public var seconds: Int64
        public var points: Int64
    }

    /// `appsUsedJSON` decoded.
    public var appsUsed: [AppUsage] {
        guard let text = self.appsUsedJSON else { return [] }
        return (try? RPCJSON.makeDecoder().decode([AppUsage].self, from: Data(text.utf8))) ?? []
    }
}

/// Points earned, redeemed or adjusted, in `default`.
public struct PointsLedgerEntry: RecordFields {
    public static let recordType = "PointsLedgerEntry"
    public var familyRef: RecordReference
    public var childRef: RecordReference
    /// `accrual`, `redemption`, `adjustment`, `reversal` (points counted, then taken back:
    /// the day's usage came to less). Entries are never changed once written.
    public var type: String
    public var amount: Int64
    public var timestamp: Date
    public var reason: String?
    public var actorParentRef: RecordReference?
    public var idempotencyKey: String?

    public init(familyRef: RecordReference, childRef: RecordReference, type: String, amount: Int64, timestamp: Date, reason: String? = nil,
                actorParentRef: RecordReference? = nil, idempotencyKey: String? = nil) {
        self.familyRef = familyRef
        self.childRef = childRef
        self.type = type
        self.amount = amount
        self.timestamp = timestamp
        self.reason = reason
        self.actorParentRef = actorParentRef
        self.idempotencyKey = idempotencyKey
    }
}

/// A child's earned reward time: `balance-child-<childId>` in `default`, one per child.
public struct EarnedTimeBalance: RecordFields {
    public static let recordType = "EarnedTimeBalance"
    public var childRef: RecordReference
    public var balanceSeconds: Int64
    public var updatedAt: Date?
    public var pointsBalance: Int64?
    public var rewardSecondsUsed: Int64?
    public var shielded: Bool?
}

/// What a parent (or the server) did, for the family's audit log.
public struct AuditEntry: RecordFields {
    public static let recordType = "AuditEntry"
    public var familyRef: RecordReference
    public var actorParentRef: RecordReference
    public var action: String
    public var target: String?
    public var timestamp: Date
    public var metadata: String?
    public var actor: String?
}

/// A child's week rolled up by retention: `week-<childRecordName>-<Monday>` in `default`.
public struct WeeklySummary: RecordFields {
    public static let recordType = "WeeklySummary"
    public var childRef: RecordReference
    public var weekStart: Date
    public var totalLearningSeconds: Int64?
    public var totalRewardSeconds: Int64?
    public var pointsAccrued: Int64?
    public var pointsRedeemed: Int64?
    public var pointsAdjusted: Int64?
    public var usageRecordsPruned: Int64?
    public var ledgerEntriesPruned: Int64?
    public var appsUsedJSON: String?
    public var lastUpdated: Date?
}
