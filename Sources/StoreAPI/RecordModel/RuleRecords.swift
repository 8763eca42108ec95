import Foundation
import RPCCore

// The parents' rules and what a child device is told to apply.

/// A family-wide rule for an app, unique per (familyRef, bundleId).
public struct AppRule: RecordFields {
    public static let recordType = "AppRule"
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .bundleId, .classification]
    public static let uniqueFields: [[CodingKeys]] = [[.familyRef, .bundleId]]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, bundleId, classification, source, pointsPerMinute, isEnabled, blockingEnabled, displayName
    }

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

/// One child's own rule for an app, replacing the family's AppRule for that child's devices
/// (schema v11): `child-rule:<childId>:<bundleId>` in `default`, unique per (childRef, bundleId).
public struct ChildAppRule: RecordFields {
    public static let recordType = "ChildAppRule"
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .childRef, .bundleId]
    public static let uniqueFields: [[CodingKeys]] = [[.childRef, .bundleId]]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, childRef, bundleId, classification, pointsPerMinute, isEnabled, blockingEnabled
    }

    public var familyRef: RecordReference
    /// The child (its ChildContext); the rule goes with it.
    public var childRef: RecordReference
    public var bundleId: String
    /// `learning` or `reward`.
    public var classification: String
    public var pointsPerMinute: Int64?
    public var isEnabled: Bool?
    public var blockingEnabled: Bool?

    public init(familyRef: RecordReference, childRef: RecordReference, bundleId: String, classification: String, pointsPerMinute: Int64? = nil,
                isEnabled: Bool? = nil, blockingEnabled: Bool? = nil) {
        self.familyRef = familyRef
        self.childRef = childRef
        self.bundleId = bundleId
        self.classification = classification
        self.pointsPerMinute = pointsPerMinute
        self.isEnabled = isEnabled
        self.blockingEnabled = blockingEnabled
    }

    /// The record's name: one per child and app (`:` is in no child id, so no two children's
    /// names meet).
    public static func recordName(child childId: String, bundleId: String) -> String { "child-rule:\(childId):\(bundleId)" }
}

/// A per-device app configuration (AppConfiguration).
public struct AppConfiguration: RecordFields {
    public static let recordType = "AppConfiguration"
    public static let indexedFields: Set<CodingKeys> = [.logicalID, .bundleIdentifier, .category, .lastModified, .deviceID]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case logicalID, tokenHash, bundleIdentifier, displayName, sfSymbolName, category, pointsPerMinute, isEnabled, blockingEnabled, dateAdded, lastModified, deviceID
    }

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
    /// Merged element by element on a rebase; the store's `changedKeys` saves replace them
    /// (a removal must be possible without a base copy).
    public static let setFields: Set<CodingKeys> = [.rewardCategories, .rewardApps]
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .childRef]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, childRef, rewardCategories, rewardApps
    }

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
    public static let indexedFields: Set<CodingKeys> = [.targetDeviceID, .commandType, .createdAt, .status]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case commandID, targetDeviceID, commandType, payloadJSON, createdAt, executedAt, status, errorMessage
    }

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
        try RPCJSON.decode(T.self, from: (self.payloadJSON ?? "null"))
    }

    /// The family's whole configuration, when this is the server's `applyConfiguration`
    /// command: apply it in place of what the device had.
    public var configuration: ConfigurationSnapshot? {
        ConfigurationSnapshot(commandType: self.commandType, payloadJSON: self.payloadJSON)
    }
}
