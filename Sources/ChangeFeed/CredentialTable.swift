import Foundation
import Logging
import RPCClient
import RPCCore
import ServiceLifecycle
import StoreAPI
import Synchronization

/// The store's device credentials, kept in this process: who a device is, known without
/// asking the store on every call.
///
/// It starts from `store.credentialSnapshot` (every credential and the change-log position
/// they are current at), then follows `store.watch` with `kinds: [credentialChanged]` from
/// that position: the store pushes each change as it commits, so a revocation reaches
/// the table within one delivery, not a polling period. While it does not follow (the
/// store is away, or before the first snapshot) it answers nothing, and its users ask the
/// store (`store.whoami`) as before. Each time it follows again it starts from a new
/// snapshot and tells its observers what changed meanwhile.
public final class CredentialTable: Service, Sendable {
    /// Called with the credentials that changed, as they are now (a credential that is no
    /// longer in the store comes as `revoked`), after the table holds them.
    public typealias Observer = @Sendable ([CredentialEntry]) async -> Void

    private struct Contents {
        /// By the SHA-256 of the token.
        var byToken: [String: CredentialEntry] = [:]
        /// By family, then device.
        var byFamily: [String: [String: CredentialEntry]] = [:]
        var following = false

        /// Puts `entry` in place of the device's previous credential; whether it differs.
        mutating func put(_ entry: CredentialEntry) -> Bool {
            let previous = self.byFamily[entry.family]?[entry.deviceId]
            if let previous, previous.tokenSHA256 != entry.tokenSHA256 { self.byToken.removeValue(forKey: previous.tokenSHA256) }
            self.byToken[entry.tokenSHA256] = entry
            self.byFamily[entry.family, default: [:]][entry.deviceId] = entry
            return previous != entry
        }
    }

    private let store: RPCClient
    private let logger: Logger
    private let contents = Mutex(Contents())
    private let observers = Mutex<[Observer]>([])

    public init(store: RPCClient, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Adds an observer of changes (before ``run()``).
    public func observe(_ observer: @escaping Observer) {
        self.observers.withLock { $0.append(observer) }
    }

    /// Whether the table follows the store now (its answers are current).
    public var isFollowing: Bool { self.contents.withLock { $0.following } }

    /// The credential whose token this is; nil when the table does not know it or does not
    /// follow the store now: ask the store.
    public func entry(token: String) -> CredentialEntry? {
        self.entry(tokenSHA256: SHA256Hex.of(token))
    }

    /// The same by the token's SHA-256 (lowercase hex).
    public func entry(tokenSHA256: String) -> CredentialEntry? {
        self.contents.withLock { $0.following ? $0.byToken[tokenSHA256] : nil }
    }

    /// A family's credentials by device; nil when the table does not follow the store now.
    public func family(_ family: String) -> [String: CredentialEntry]? {
        self.contents.withLock { $0.following ? ($0.byFamily[family] ?? [:]) : nil }
    }

    /// Who the credential in `auth` is, as `store.whoami` says it: from the table while it
    /// follows the store, else asked of the store. `device_revoked` for a revoked device's
    /// credential, `unauthorized` for a token that is no device's.
    public func whoami(_ auth: Auth) async throws -> WhoAmIResult {
        guard let entry = self.entry(token: auth.token) else {
            return try await self.store.call(StoreMethods.whoami, Empty(), actingFor: auth)
        }
        guard entry.status != .revoked else { throw RPCError.deviceRevoked(entry.deviceId) }
        return WhoAmIResult(principal: "device", family: entry.family, deviceId: entry.deviceId, role: entry.role, status: entry.status)
    }

    /// Until cancelled or shut down gracefully: a snapshot, then the store's changes;
    /// again from a new snapshot, with backoff, whenever the store goes away.
    public func run() async throws {
        var backoff = Duration.milliseconds(250)
        let streak = FailureStreak()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await self.follow(then: streak.reset) }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                self.logger.log(level: streak.level(after: error), "following the store's credentials failed; asking the store meanwhile", metadata: [
                    "error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)",
                ])
            }
            // Followed for a while: the store went away, so try again soon.
            if self.contents.withLock({ contents in defer { contents.following = false }; return contents.following }) {
                backoff = .milliseconds(250)
            }
            let wait = backoff
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) } } catch { break }
            backoff = min(backoff * 2, .seconds(30))
        }
        self.contents.withLock { $0.following = false }
    }

    private func follow(then answered: @Sendable () -> Void) async throws {
        let snapshot = try await self.store.call(StoreMethods.credentialSnapshot, Empty())
        answered()
        await self.tell(self.replace(with: snapshot.credentials))
        self.logger.info("following the store's credentials", metadata: ["credentials": "\(snapshot.credentials.count)", "after": "\(snapshot.seq)"])
        let params = WatchParams(after: snapshot.seq, kinds: [.credentialChanged])
        for try await event in self.store.stream(StoreMethods.watch, params) {
            guard case .item(let change) = event, let deviceId = change.recordName else { continue }
            let entry = change.credential ?? self.gone(family: change.family, deviceId: deviceId)
            guard let entry, self.contents.withLock({ $0.put(entry) }) else { continue }
            await self.tell([entry])
        }
    }

    /// Holds `credentials` instead of what it held; the entries that changed (those no
    /// longer in the store as revoked).
    private func replace(with credentials: [CredentialEntry]) -> [CredentialEntry] {
        self.contents.withLock { contents in
            var fresh = Contents()
            var changed: [CredentialEntry] = []
            for entry in credentials {
                _ = fresh.put(entry)
                if contents.byFamily[entry.family]?[entry.deviceId] != entry { changed.append(entry) }
            }
            for (family, devices) in contents.byFamily {
                for (deviceId, old) in devices where fresh.byFamily[family]?[deviceId] == nil {
                    var gone = old
                    gone.status = .revoked
                    changed.append(gone)
                }
            }
            fresh.following = true
            contents = fresh
            return changed
        }
    }

    /// A credential the store no longer has, as revoked (nil when the table never had it).
    private func gone(family: String, deviceId: String) -> CredentialEntry? {
        self.contents.withLock { contents in
            guard var entry = contents.byFamily[family]?[deviceId] else { return nil }
            entry.status = .revoked
            return entry
        }
    }

    private func tell(_ changed: [CredentialEntry]) async {
        guard !changed.isEmpty else { return }
        for observer in self.observers.withLock({ $0 }) { await observer(changed) }
    }
}
