import Foundation
import RPCClient
import StoreAPI
import Synchronization

/// Who in a family may read what, as the store decides it: credentials and shares.
struct FamilyAccess: Sendable {
    var credentials: [String: CredentialInfo]
    /// The family's zones now.
    var zones: Set<String>
    /// Zone → the devices it is shared with.
    var shares: [String: Set<String>]

    /// The store's rule: parents read every zone but the services' internal ones; a child
    /// reads the zones shared with it; a revoked device reads nothing.
    func canRead(_ deviceId: String, zone: String) -> Bool {
        guard !StoreNames.isInternalZone(zone), let credential = self.credentials[deviceId], credential.status != .revoked else { return false }
        return credential.role.isParent || (self.shares[zone]?.contains(deviceId) ?? false)
    }

    func isRevoked(_ deviceId: String) -> Bool {
        self.credentials[deviceId].map { $0.status == .revoked } ?? true
    }

    var activeParents: [String] {
        self.credentials.values.filter { $0.role.isParent && $0.status == .active }.map(\.deviceId).sorted()
    }
}

/// Caches each family's access for a while; a share or zone change in the store's log
/// drops the family's entry, so the next change is checked against the new shares.
final class AccessCache: Sendable {
    private let store: RPCClient
    private let lifetime: Duration
    private let entries = Mutex<[String: (access: FamilyAccess, loaded: ContinuousClock.Instant)]>([:])

    init(store: RPCClient, lifetime: Duration) {
        self.store = store
        self.lifetime = lifetime
    }

    func access(_ family: String) async throws -> FamilyAccess {
        let now = ContinuousClock.now
        if let entry = self.entries.withLock({ $0[family] }), now - entry.loaded < self.lifetime { return entry.access }
        let access = try await self.load(family)
        self.entries.withLock { $0[family] = (access, now) }
        return access
    }

    func invalidate(_ family: String) {
        _ = self.entries.withLock { $0.removeValue(forKey: family) }
    }

    /// The families loaded longer ago than the lifetime (their credentials may have changed).
    func stale() -> [String] {
        let now = ContinuousClock.now
        return self.entries.withLock { entries in entries.filter { now - $0.value.loaded >= self.lifetime }.map(\.key) }
    }

    private func load(_ family: String) async throws -> FamilyAccess {
        let credentials = try await self.store.call(StoreMethods.listCredentials, ListCredentialsParams(family: family)).credentials
        let zones = try await self.store.call(StoreMethods.listZones, FamilyParams(family: family)).zones
        var shares: [String: Set<String>] = [:]
        for zone in zones where zone.participants > 0 {
            let share = try await self.store.call(StoreMethods.shareInfo, ZoneParams(family: family, zone: zone.name))
            shares[zone.name] = Set(share.participants.map(\.deviceId))
        }
        return FamilyAccess(credentials: Dictionary(credentials.map { ($0.deviceId, $0) }) { _, new in new },
                            zones: Set(zones.map(\.name)), shares: shares)
    }
}
