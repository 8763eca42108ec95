import ChangeFeed
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Synchronization

/// A device as the store knows it, from its credential.
public struct DeviceIdentity: Sendable, Hashable {
    public var token: String
    /// The token's SHA-256, as the store and the ``CredentialTable`` key it: hashed once for
    /// a socket, not for each of its requests.
    public var tokenSHA256: String
    public var deviceId: String
    public var family: String
    /// `.parent` (admin or co-parent) or `.child`.
    public var caller: Caller
}

/// Finds who a credential belongs to: in the ``CredentialTable`` the gateway keeps from the
/// store's change feed, or, while that does not follow the store, by `store.whoami` with
/// the token, whose answer is kept for ``ttl`` so a busy device costs the store one lookup
/// per period, not one per request.
public final class DeviceAuthenticator: Sendable {
    let store: RPCClient
    let credentials: CredentialTable
    let ttl: Duration
    private let cache = Mutex<Cache>(Cache())

    private struct Cache {
        var entries: [String: (identity: DeviceIdentity, checked: ContinuousClock.Instant)] = [:]
        var lastSweep = ContinuousClock.now
    }

    public init(store: RPCClient, credentials: CredentialTable, ttl: Duration) {
        self.store = store
        self.credentials = credentials
        self.ttl = ttl
    }

    /// A socket's known device as it is now, without waiting: from the table (nil once
    /// revoked), or the store's answer if it was asked within ``ttl`` (the token was
    /// hashed when the socket authenticated).
    public func cached(_ known: DeviceIdentity) -> DeviceIdentity? {
        if let entry = self.credentials.entry(tokenSHA256: known.tokenSHA256) {
            return entry.status == .revoked ? nil : Self.identity(entry, token: known.token)
        }
        return self.kept(known.token)
    }

    /// The store's answer for `token`, if it was asked within ``ttl``.
    private func kept(_ token: String) -> DeviceIdentity? {
        guard let kept = self.cache.withLock({ $0.entries[token] }), ContinuousClock.now - kept.checked < self.ttl else { return nil }
        return kept.identity
    }

    static func identity(_ entry: CredentialEntry, token: String) -> DeviceIdentity {
        DeviceIdentity(token: token, tokenSHA256: entry.tokenSHA256, deviceId: entry.deviceId, family: entry.family, caller: entry.role.isParent ? .parent : .child)
    }

    /// The credential's device, or `unauthorized` (unknown), `device_revoked` (the device
    /// was removed from its family) / `unavailable`.
    /// `fresh` skips the answers kept from the store (a session's page request).
    public func identify(_ token: String, fresh: Bool = false) async throws(RPCError) -> DeviceIdentity {
        let tokenSHA256 = SHA256Hex.of(token)
        if let entry = self.credentials.entry(tokenSHA256: tokenSHA256) {
            guard entry.status != .revoked else { throw RPCError.deviceRevoked(entry.deviceId) }
            return Self.identity(entry, token: token)
        }
        if !fresh, let kept = self.kept(token) { return kept }
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
        let identity = DeviceIdentity(token: token, tokenSHA256: tokenSHA256, deviceId: deviceId, family: family, caller: role.isParent ? .parent : .child)
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
