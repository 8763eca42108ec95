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

/// A device credential as the services that follow the store keep it (`store.credentialSnapshot`,
/// and `credentialChanged` events of `store.watch`): with the SHA-256 of its token, so a
/// service checks a device's token without asking the store. Local services only.
public struct CredentialEntry: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String
    public var role: DeviceRole
    public var status: CredentialStatus
    /// Lowercase hex SHA-256 of the device's current token.
    public var tokenSHA256: String
    public var updatedAt: Date

    public init(family: String, deviceId: String, role: DeviceRole, status: CredentialStatus, tokenSHA256: String, updatedAt: Date) {
        self.family = family
        self.deviceId = deviceId
        self.role = role
        self.status = status
        self.tokenSHA256 = tokenSHA256
        self.updatedAt = updatedAt
    }
}

/// `store.credentialSnapshot`: every family's device credentials, read in one transaction,
/// and the change-log position they are current at: follow `store.watch` with
/// `after: seq` and `kinds: ["credentialChanged"]` to keep them current.
public struct CredentialSnapshotResult: Codable, Sendable, Hashable {
    public var seq: Int64
    public var credentials: [CredentialEntry]

    public init(seq: Int64, credentials: [CredentialEntry]) {
        self.seq = seq
        self.credentials = credentials
    }
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
    public static func of(_ data: Data) -> String { self.hex(SHA256.hash(data: data)) }

    /// The services that keep credentials hash a device's token on each of its calls.
    public static func of(_ text: String) -> String {
        var text = text
        return text.withUTF8 { self.hex(SHA256.hash(data: UnsafeRawBufferPointer($0))) }
    }

    private static func hex(_ digest: SHA256.Digest) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 2 * SHA256.byteCount) { buffer in
            var index = 0
            for byte in digest {
                buffer[index] = digits[Int(byte >> 4)]
                buffer[index + 1] = digits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
    }
}
