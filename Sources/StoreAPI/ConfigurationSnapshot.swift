import Foundation
import RPCCore

/// What a child device must apply: the family's app rules and the reward shield as they
/// are now, as one ConfigurationCommand the server (the aggregator) keeps in each of the
/// family's child devices' zones, named ``recordName``, of type ``commandType``, this as its
/// `payloadJSON`. The server writes it again, `pending`, whenever the rules change, when
/// a device is confirmed, and when a device asks (`aggregator.resync`); a device applies it
/// by replacing what it had, then marks the command `executed`. Clients never write it.
public struct ConfigurationSnapshot: Codable, Sendable, Hashable {
    public static let commandType = "applyConfiguration"
    public static let recordName = "configuration"

    /// The family's configuration version: one more at each change of its rules. A device
    /// that executed this snapshot has applied this version.
    public var version: Int64
    /// Every rule of the family, by bundle id, the child's own rules in place of the family's.
    public var rules: [Rule]
    /// The child's reward shield as it is now.
    public var shield: Shield

    public struct Rule: Codable, Sendable, Hashable {
        public var bundleId: String
        /// `learning` or `reward`.
        public var classification: String
        public var pointsPerMinute: Int64?
        public var isEnabled: Bool?
        public var blockingEnabled: Bool?
        public var displayName: String?
        /// The child's own rule (a ChildAppRule), in place of the family's.
        public var childOverride: Bool?

        public init(bundleId: String, classification: String, pointsPerMinute: Int64? = nil, isEnabled: Bool? = nil,
                    blockingEnabled: Bool? = nil, displayName: String? = nil, childOverride: Bool? = nil) {
            self.childOverride = childOverride
            self.bundleId = bundleId
            self.classification = classification
            self.pointsPerMinute = pointsPerMinute
            self.isEnabled = isEnabled
            self.blockingEnabled = blockingEnabled
            self.displayName = displayName
        }
    }

    public struct Shield: Codable, Sendable, Hashable {
        /// Reward apps are shielded now.
        public var shielded: Bool
        /// The apps and categories to shield (during downtime, less the apps it always allows).
        public var rewardApps: [String]
        public var rewardCategories: [String]
        /// Why, when shielded: `balance`, `paused`, `downtime`, `dailyCap`.
        public var reason: String?
        /// During downtime: the apps it always allows, and when it ends.
        public var alwaysAllowed: [String]?
        public var downtimeUntil: Date?

        public init(shielded: Bool, rewardApps: [String], rewardCategories: [String], reason: String? = nil, alwaysAllowed: [String]? = nil,
                    downtimeUntil: Date? = nil) {
            self.shielded = shielded
            self.rewardApps = rewardApps
            self.rewardCategories = rewardCategories
            self.reason = reason
            self.alwaysAllowed = alwaysAllowed
            self.downtimeUntil = downtimeUntil
        }
    }

    public init(version: Int64, rules: [Rule], shield: Shield) {
        self.version = version
        self.rules = rules
        self.shield = shield
    }

    /// The snapshot a command carries, or nil when it is not this kind of command (or its
    /// payload is not a snapshot).
    public init?(commandType: String?, payloadJSON: String?) {
        guard commandType == Self.commandType, let payloadJSON,
              let snapshot = try? RPCJSON.decode(Self.self, from: payloadJSON) else { return nil }
        self = snapshot
    }
}
