import Foundation
import Logging
import MemoryReturn
import RPCClient
import RPCCore
import StoreAPI
import Synchronization

/// Checks the credentials of the open WebSockets again every `--credential-recheck`, a
/// family at a time: one `store.listCredentials` per family with sockets open, instead of
/// a `store.whoami` per socket (ten thousand open sockets made two thousand calls a
/// second). A socket whose device's credential is revoked or gone, or has changed since
/// it was last checked (a rotated token: its `updatedAt` is later than the check), is
/// checked on its own, and cut off if its credential is no longer valid.
final class CredentialWatch: Sendable {
    typealias CutOff = @Sendable (RPCError) async -> Void

    private struct Watched: Sendable {
        let identity: DeviceIdentity
        let cutOff: CutOff
        /// When the credential was last found valid for this socket (its authentication,
        /// then each check of its own): a credential updated since may have a new token.
        var checkedAt: Date
    }

    private let authenticator: DeviceAuthenticator
    private let store: RPCClient
    private let period: Duration
    private let logger: Logger
    /// By family, then by socket.
    private let sockets = Mutex<[String: [ObjectIdentifier: Watched]]>([:])

    init(authenticator: DeviceAuthenticator, store: RPCClient, period: Duration, logger: Logger) {
        self.authenticator = authenticator
        self.store = store
        self.period = period
        self.logger = logger
    }

    func watch(_ socket: ObjectIdentifier, _ identity: DeviceIdentity, cutOff: @escaping CutOff) {
        // The identity may come from the authenticator's cache, up to a period old: a
        // credential updated since then is checked again at the next round.
        let checked = Date().addingTimeInterval(-self.period.seconds)
        self.sockets.withLock { $0[identity.family, default: [:]][socket] = Watched(identity: identity, cutOff: cutOff, checkedAt: checked) }
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

    /// Until cancelled: a round every period.
    /// One round: every family with sockets open (run every `--credential-recheck` by the
    /// gateway's service group).
    func checkAll() async {
        for family in self.sockets.withLock({ Array($0.keys) }) { await self.check(family) }
    }

    private func check(_ family: String) async {
        let credentials: [String: CredentialInfo]
        do {
            // Decoded from the reply's bytes, not through a tree of JSON values: a family of
            // ten thousand devices would make one of many megabytes every period.
            let reply = try await self.store.relay(StoreMethods.listCredentials.name, params: .object(["family": .string(family)]), auth: nil)
            let listed = try RPCJSON.makeDecoder().decode(ListCredentialsResult.self, from: Data(reply.bytes)).credentials
            credentials = Dictionary(listed.map { ($0.deviceId, $0) }) { _, new in new }
            // Megabytes read every period for a big family: given back, not kept by the allocator.
            if reply.bytes.count >= MemoryReturn.worthwhile { MemoryReturn.request() }
        } catch {
            // The store is unavailable: not the devices' fault; the next round tries again.
            self.logger.debug("cannot list a family's credentials", metadata: ["family": "\(family)", "error": "\(error)"])
            return
        }
        let suspect = self.sockets.withLock { sockets -> [(ObjectIdentifier, Watched)] in
            (sockets[family] ?? [:]).compactMap { socket, watched in
                guard let credential = credentials[watched.identity.deviceId], credential.status != .revoked,
                      credential.updatedAt <= watched.checkedAt else { return (socket, watched) }
                return nil
            }
        }
        for (socket, watched) in suspect {
            let checked = Date()
            do {
                _ = try await self.authenticator.identify(watched.identity.token, fresh: true)
                self.sockets.withLock { $0[family]?[socket]?.checkedAt = checked }
            } catch where error.code == .unauthorized || error.code == .deviceRevoked {
                self.unwatch(socket, family: family)
                // On its own: telling a device that does not read waits for its socket,
                // and the round goes on meanwhile.
                Task { await watched.cutOff(error) }
            } catch {
                // The store is unavailable: the next round checks this socket again.
            }
        }
    }
}
