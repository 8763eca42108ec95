import Foundation
import RPCCore

public enum SharePermission: String, StringEnum {
    case readOnly
    case readWrite
}

public struct ShareParticipant: Codable, Sendable, Hashable {
    public var deviceId: String
    public var permission: SharePermission
    /// Set by the server.
    public var addedAt: Date?

    public init(deviceId: String, permission: SharePermission, addedAt: Date? = nil) {
        self.deviceId = deviceId
        self.permission = permission
        self.addedAt = addedAt
    }
}

/// `store.share`: adds participants to a zone's share, or changes their permission.
public struct ShareParams: Codable, Sendable, Hashable {
    public var family: String
    public var zone: String
    public var participants: [ShareParticipant]

    public init(family: String, zone: String, participants: [ShareParticipant]) {
        self.family = family
        self.zone = zone
        self.participants = participants
    }
}

/// `store.unshare`: removes participants; without `deviceIds`, all of them.
public struct UnshareParams: Codable, Sendable, Hashable {
    public var family: String
    public var zone: String
    public var deviceIds: [String]?

    public init(family: String, zone: String, deviceIds: [String]? = nil) {
        self.family = family
        self.zone = zone
        self.deviceIds = deviceIds
    }
}

public struct ShareInfo: Codable, Sendable, Hashable {
    public var family: String
    public var zone: String
    public var participants: [ShareParticipant]

    public init(family: String, zone: String, participants: [ShareParticipant]) {
        self.family = family
        self.zone = zone
        self.participants = participants
    }
}
