import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// Who a request acts for.
enum Principal: Sendable, Hashable {
    /// No `auth`: a process on the server (only root and the `screentime` group reach the socket).
    case local
    case device(DeviceIdentity)

    /// As it appears in `createdBy` / `modifiedBy`.
    var name: String {
        switch self {
        case .local: "local"
        case .device(let device): "device:\(device.deviceId)"
        }
    }

    var device: DeviceIdentity? {
        if case .device(let device) = self { return device }
        return nil
    }
}

struct DeviceIdentity: Sendable, Hashable {
    var family: String
    var deviceId: String
    var role: DeviceRole
    var status: CredentialStatus
}

enum Credentials {
    /// Lowercase hex SHA-256: how tokens are stored and looked up.
    static func hash(token: String) -> String {
        SHA256Hex.of(token)
    }

    static func isValidHash(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The principal for a request's `auth`, checked against the stored credentials on
    /// every request, so a revocation applies to the very next one.
    static func resolve(_ auth: Auth?, in db: Database) throws -> Principal {
        guard let auth else { return .local }
        guard let identity = try db.firstRow(cached: "SELECT family, device_id, role, status FROM credentials WHERE token_sha256 = ?",
                                             texts: [hash(token: auth.token)], { row in
            DeviceIdentity(family: row.text(0), deviceId: row.text(1), role: DeviceRole(rawValue: row.text(2)) ?? .child,
                           status: CredentialStatus(rawValue: row.text(3)) ?? .revoked)
        })
        else {
            throw RPCError(.unauthorized, "the device token is not known to this server; pair the device again")
        }
        if identity.status == .revoked {
            throw RPCError.deviceRevoked(identity.deviceId)
        }
        return .device(identity)
    }
}

