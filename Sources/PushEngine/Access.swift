import ChangeFeed
import Foundation
import RPCClient
import StoreAPI
import Synchronization

/// Who in a family may read what, as the store decides it: credentials and shares.
struct FamilyAccess: Sendable {
    /// What the fan-out needs of a device's credential.
    struct Standing: Sendable, Hashable {
        var role: DeviceRole
        var status: CredentialStatus
    }

    var credentials: [String: Standing]
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
        self.credentials.filter { $0.value.role.isParent && $0.value.status == .active }.map(\.key).sorted()
    }
}

/// Caches each family's access; a share or zone change in the store's log drops the
/// family's entry, so the next change is checked against the new shares, and a credential
/// change from the ``CredentialTable`` is put in place. While the table does not follow
/// the store, an entry is trusted for `lifetime`, then read again.
/// Callers arriving while a family is being loaded wait for that load rather than start
/// their own (a thousand devices listening at once read the family's credentials once).
final class AccessCache: Sendable {
    private enum Entry {
        case loaded(FamilyAccess, at: ContinuousClock.Instant)
        case loading(Task<FamilyAccess, any Error>, generation: Int)
    }

    private let store: RPCClient
    private let credentials: CredentialTable
    private let lifetime: Duration
    private let state = Mutex<(entries: [String: Entry], generation: Int)>(([:], 0))

    init(store: RPCClient, credentials: CredentialTable, lifetime: Duration) {
        self.store = store
        self.credentials = credentials
        self.lifetime = lifetime
    }

    func access(_ family: String) async throws -> FamilyAccess {
        let now = ContinuousClock.now
        // While the table follows the store, each credential change is put in place.
        let current = self.credentials.isFollowing
        let lifetime = self.lifetime
        let (cached, task, generation) = self.state.withLock { state -> (FamilyAccess?, Task<FamilyAccess, any Error>?, Int) in
            switch state.entries[family] {
            case .loaded(let access, let loaded)? where current || now - loaded < lifetime:
                return (access, nil, 0)
            case .loading(let task, let generation)?:
                return (nil, task, generation)
            default:
                state.generation += 1
                let task = Task { try await self.load(family) }
                state.entries[family] = .loading(task, generation: state.generation)
                return (nil, task, state.generation)
            }
        }
        if let cached { return cached }
        do {
            let access = try await task!.value
            self.settle(family, generation) { .loaded(access, at: now) }
            return access
        } catch {
            self.settle(family, generation) { nil }
            throw error
        }
    }

    /// Replaces the entry if it is still the load `generation` (not invalidated meanwhile).
    private func settle(_ family: String, _ generation: Int, _ entry: () -> Entry?) {
        self.state.withLock { state in
            guard case .loading(_, let current)? = state.entries[family], current == generation else { return }
            state.entries[family] = entry()
        }
    }

    func invalidate(_ family: String) {
        _ = self.state.withLock { $0.entries.removeValue(forKey: family) }
    }

    /// The families loaded longer ago than the lifetime while the credential table does not
    /// follow the store (their credentials may have changed).
    func stale() -> [String] {
        guard !self.credentials.isFollowing else { return [] }
        let now = ContinuousClock.now
        return self.state.withLock { state in
            state.entries.compactMap { family, entry in
                guard case .loaded(_, let loaded) = entry, now - loaded >= self.lifetime else { return nil }
                return family
            }
        }
    }

    /// Whether `device` may read `zone` now, asked of the store (the zones, and the zone's
    /// share for a child) without reloading the family's credentials: a subscription is
    /// checked against the shares as they are, and ten thousand devices subscribing do not
    /// each read ten thousand credentials.
    func freshZoneAccess(_ device: Push.Device, zone: String) async throws -> (readable: Bool, exists: Bool) {
        let zones = try await self.store.call(StoreMethods.listZones, FamilyParams(family: device.family)).zones
        var shares: [String: Set<String>] = [:]
        if device.role == .child, let info = zones.first(where: { $0.name == zone }), info.participants > 0 {
            let share = try await self.store.call(StoreMethods.shareInfo, ZoneParams(family: device.family, zone: zone))
            shares[zone] = Set(share.participants.map(\.deviceId))
        }
        // The same rule as the fan-out's, over just this device and this zone.
        let access = FamilyAccess(credentials: [device.deviceId: device.standing], zones: Set(zones.map(\.name)), shares: shares)
        return (access.canRead(device.deviceId, zone: zone), access.zones.contains(zone))
    }

    /// Puts a device's current credential into its family's loaded entry, if any: the
    /// fan-out then knows a new device, or a revoked one, without reloading the family.
    /// A load under way may have read the credentials before: it is dropped, not kept.
    func learn(family: String, deviceId: String, _ standing: FamilyAccess.Standing) {
        self.state.withLock { state in
            switch state.entries[family] {
            case .loaded(var access, let at)?:
                access.credentials[deviceId] = standing
                state.entries[family] = .loaded(access, at: at)
            case .loading?:
                state.entries.removeValue(forKey: family)
            case nil:
                break
            }
        }
    }

    private func load(_ family: String) async throws -> FamilyAccess {
        let credentials: [String: FamilyAccess.Standing]
        if let kept = self.credentials.family(family) {
            credentials = kept.mapValues { FamilyAccess.Standing(role: $0.role, status: $0.status) }
        } else {
            let listed = try await self.store.call(StoreMethods.listCredentials, ListCredentialsParams(family: family)).credentials
            credentials = Dictionary(listed.map { ($0.deviceId, FamilyAccess.Standing(role: $0.role, status: $0.status)) }) { _, new in new }
        }
        let zones = try await self.store.call(StoreMethods.listZones, FamilyParams(family: family)).zones
        var shares: [String: Set<String>] = [:]
        for zone in zones where zone.participants > 0 {
            let share = try await self.store.call(StoreMethods.shareInfo, ZoneParams(family: family, zone: zone.name))
            shares[zone.name] = Set(share.participants.map(\.deviceId))
        }
        return FamilyAccess(credentials: credentials, zones: Set(zones.map(\.name)), shares: shares)
    }
}
