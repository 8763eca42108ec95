import ChangeFeed
import RPCCore
import StoreAPI
import Synchronization

/// Cuts off the open WebSockets whose device's credential changed: revoked, or replaced by
/// a new token. The gateway's ``CredentialTable`` tells it of each change as the store
/// commits it (and, after the store was away, of every change meanwhile), so a revoked
/// device listening quietly is cut off at once, and open sockets cost the store nothing
/// while nothing changes.
final class CredentialWatch: Sendable {
    typealias CutOff = @Sendable (RPCError) async -> Void

    private struct Watched: Sendable {
        let identity: DeviceIdentity
        let cutOff: CutOff
    }

    /// By family, then by socket.
    private let sockets = Mutex<[String: [ObjectIdentifier: Watched]]>([:])

    init(credentials: CredentialTable) {
        credentials.observe { [weak self] changed in self?.changed(changed) }
    }

    func watch(_ socket: ObjectIdentifier, _ identity: DeviceIdentity, cutOff: @escaping CutOff) {
        let watched = Watched(identity: identity, cutOff: cutOff)
        self.sockets.withLock { $0[identity.family, default: [:]][socket] = watched }
    }

    func unwatch(_ socket: ObjectIdentifier, family: String) {
        self.sockets.withLock { sockets in
            sockets[family]?.removeValue(forKey: socket)
            if sockets[family]?.isEmpty == true { sockets.removeValue(forKey: family) }
        }
    }

    /// The devices of a family with a WebSocket open to this gateway now.
    func connected(family: String) -> Set<String> {
        self.sockets.withLock { Set(($0[family] ?? [:]).values.map(\.identity.deviceId)) }
    }

    /// The sockets of devices whose credential is revoked, or no longer the token they
    /// authenticated with, are cut off.
    private func changed(_ credentials: [CredentialEntry]) {
        let cut = self.sockets.withLock { sockets -> [(Watched, RPCError)] in
            var cut: [(Watched, RPCError)] = []
            for credential in credentials {
                guard var family = sockets[credential.family] else { continue }
                for (socket, watched) in family where watched.identity.deviceId == credential.deviceId {
                    if credential.status == .revoked {
                        cut.append((watched, RPCError.deviceRevoked(credential.deviceId)))
                    } else if credential.tokenSHA256 != watched.identity.tokenSHA256 {
                        cut.append((watched, RPCError(.unauthorized, "this device credential is not valid: it was replaced by a new one; use the new credential")))
                    } else {
                        continue
                    }
                    family.removeValue(forKey: socket)
                }
                sockets[credential.family] = family.isEmpty ? nil : family
            }
            return cut
        }
        for (watched, error) in cut {
            // On its own: telling a device that does not read waits for its socket.
            Task { await watched.cutOff(error) }
        }
    }
}
