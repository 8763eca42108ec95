import Crypto
import Foundation
import RPCCore

public enum DeviceRole: String, StringEnum {
    case admin
    case coParent = "co_parent"
    case child

    public var isParent: Bool { self != .child }
}

public enum CredentialStatus: String, StringEnum {
    /// Issued, waiting for a parent's confirmation: may read, not write.
    case pending
    case active
    /// Refused on every request.
    case revoked
}

/// `store.putCredential` (local services only): records a device credential. The store
/// keeps only the SHA-256 of the token and checks `auth.token` against it on every request.
public struct PutCredentialParams: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String
    public var role: DeviceRole
    /// Lowercase hex SHA-256 of the device's token (64 characters).
    public var tokenSHA256: String
    /// Default `active`.
    public var status: CredentialStatus?

    public init(family: String, deviceId: String, role: DeviceRole, tokenSHA256: String, status: CredentialStatus? = nil) {
        self.family = family
        self.deviceId = deviceId
        self.role = role
        self.tokenSHA256 = tokenSHA256
        self.status = status
    }
}

/// `store.updateCredential` (local services only): confirm (`active`) or revoke a device.
public struct UpdateCredentialParams: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String
    public var status: CredentialStatus
    /// Change it only from this status (`conflict` otherwise): confirming must not revive a
    /// credential revoked meanwhile.
    public var ifStatus: CredentialStatus?

    public init(family: String, deviceId: String, status: CredentialStatus, ifStatus: CredentialStatus? = nil) {
        self.family = family
        self.deviceId = deviceId
        self.status = status
        self.ifStatus = ifStatus
    }
}

public struct CredentialInfo: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String
    public var role: DeviceRole
    public var status: CredentialStatus
    public var createdAt: Date
    public var updatedAt: Date
    /// The device's last request to the store since the store started (absent: none yet).
    public var lastSeenAt: Date?

    public init(family: String, deviceId: String, role: DeviceRole, status: CredentialStatus, createdAt: Date, updatedAt: Date, lastSeenAt: Date? = nil) {
        self.family = family
        self.deviceId = deviceId
        self.role = role
        self.status = status
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastSeenAt = lastSeenAt
    }
}

/// `store.listCredentials`: a family's credentials, or one device's.
public struct ListCredentialsParams: Codable, Sendable, Hashable {
    public var family: String
    /// Only this device's credential (an empty list when it has none).
    public var deviceId: String?
    public init(family: String, deviceId: String? = nil) {
        self.family = family
        self.deviceId = deviceId
    }
}

public struct ListCredentialsResult: Codable, Sendable, Hashable {
    public var credentials: [CredentialInfo]
    public init(credentials: [CredentialInfo]) { self.credentials = credentials }
}

/// `store.whoami`: who the store takes the caller for.
public struct WhoAmIResult: Codable, Sendable, Hashable {
    /// `local` (no `auth`: a service on the server) or `device`.
    public var principal: String
    public var family: String?
    public var deviceId: String?
    public var role: DeviceRole?
    public var status: CredentialStatus?

    public init(principal: String, family: String? = nil, deviceId: String? = nil, role: DeviceRole? = nil, status: CredentialStatus? = nil) {
        self.principal = principal
        self.family = family
        self.deviceId = deviceId
        self.role = role
        self.status = status
    }
}

/// Lowercase hex SHA-256: the form in which the store keys device tokens
/// (`PutCredentialParams.tokenSHA256`), so whoever issues a token hashes it the same way.
public enum SHA256Hex {
    public static func of(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    public static func of(_ text: String) -> String { self.of(Data(text.utf8)) }
}
