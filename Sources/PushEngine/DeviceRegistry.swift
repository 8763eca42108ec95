import Synchronization

/// A set of devices kept in memory (those whose webhook takes deliveries, those registered
/// for wakes): consulted for every queued notification, so it must not cost a query.
final class DeviceRegistry: Sendable {
    private let active: Mutex<Set<Hub.DeviceKey>>

    init(_ devices: [(family: String, deviceId: String)]) {
        self.active = Mutex(Set(devices.map { Hub.DeviceKey(family: $0.family, deviceId: $0.deviceId) }))
    }

    func contains(_ key: Hub.DeviceKey) -> Bool { self.active.withLock { $0.contains(key) } }
    func insert(_ key: Hub.DeviceKey) { _ = self.active.withLock { $0.insert(key) } }
    func remove(_ key: Hub.DeviceKey) { _ = self.active.withLock { $0.remove(key) } }
}
