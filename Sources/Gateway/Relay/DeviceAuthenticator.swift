import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Synchronization

/// A device as the store knows it, from its credential.
public struct DeviceIdentity: Sendable, Hashable {
    public var token: String
    public var deviceId: String
    public var family: String
    /// `.parent` (admin or co-parent) or `.child`.
    public var caller: Caller
}

/// Finds who a credential belongs to (`store.whoami` with it), and keeps the answer for a
/// short while so a busy device costs the store one lookup per period, not one per
/// request. A revoked credential is refused by the store at once; here it stops working
/// within ``ttl`` at the latest.
public final class DeviceAuthenticator: Sendable {
    let store: RPCClient
    let ttl: Duration
    private let cache = Mutex<Cache>(Cache())

    private struct Cache {
        var entries: [String: (identity: DeviceIdentity, checked: ContinuousClock.Instant)] = [:]
        var lastSweep = ContinuousClock.now
    }

    public init(store: RPCClient, ttl: Duration) {
        self.store = store
        self.ttl = ttl
    }

    /// The credential's device if it was checked within ``ttl``, without asking the store.
    public func cached(_ token: String) -> DeviceIdentity? {
        guard let cached = self.cache.withLock({ $0.entries[token] }), ContinuousClock.now - cached.checked < self.ttl else { return nil }
        return cached.identity
    }

    /// The credential's device, or `unauthorized` (unknown), `device_revoked` (the device
    /// was removed from its family) / `unavailable`.
    /// `fresh` skips the cache (the periodic check of an open WebSocket).
    public func identify(_ token: String, fresh: Bool = false) async throws(RPCError) -> DeviceIdentity {
        if !fresh, let identity = self.cached(token) { return identity }
        let who: WhoAmIResult
        do {
            who = try await self.store.call(StoreMethods.whoami, Empty(), actingFor: Auth(token: token))
        } catch {
            self.cache.withLock { _ = $0.entries.removeValue(forKey: token) }
            if error.code == .deviceRevoked { throw error }
            if error.code == .unauthorized || error.code == .forbidden {
                throw RPCError(.unauthorized, "this device credential is not valid: it is unknown or was revoked; pair the device again")
            }
            throw error
        }
        guard who.principal == "device", let deviceId = who.deviceId, let family = who.family, let role = who.role else {
            throw RPCError(.unauthorized, "this device credential is not valid: it is unknown or was revoked; pair the device again")
        }
        let identity = DeviceIdentity(token: token, deviceId: deviceId, family: family, caller: role.isParent ? .parent : .child)
        let now = ContinuousClock.now
        self.cache.withLock { cache in
            // Bounded: expired entries go when the cache has grown, at most once a period
            // (ten thousand open sockets each recheck every period: sweeping on each
            // insert would walk them all two thousand times a second).
            if cache.entries.count > 4096, now - cache.lastSweep >= self.ttl {
                cache.entries = cache.entries.filter { now - $0.value.checked < self.ttl }
                cache.lastSweep = now
            }
            cache.entries[token] = (identity, now)
        }
        return identity
    }
}
