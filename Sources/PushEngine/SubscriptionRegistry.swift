import PushAPI
import Synchronization

/// Every subscription, in memory by family (the fan-out's index), kept in step with the
/// database by whoever changes it.
final class SubscriptionRegistry: Sendable {
    private let byFamily = Mutex<[String: [PushDatabase.SubscriptionKey: Subscription]]>([:])

    init(_ subscriptions: [Subscription]) {
        self.byFamily.withLock { map in
            for subscription in subscriptions { map[subscription.family, default: [:]][subscription.key] = subscription }
        }
    }

    func put(_ subscription: Subscription) {
        self.byFamily.withLock { $0[subscription.family, default: [:]][subscription.key] = subscription }
    }

    func remove(_ keys: [PushDatabase.SubscriptionKey]) {
        self.byFamily.withLock { map in
            for key in keys { map[key.family]?.removeValue(forKey: key) }
        }
    }

    /// The family's subscriptions, in no particular order (the fan-out's hot path).
    func family(_ family: String) -> [Subscription] {
        self.byFamily.withLock { map in map[family].map { Array($0.values) } ?? [] }
    }

    /// For listings: oldest first.
    func listing(_ family: String, deviceId: String? = nil) -> [Subscription] {
        self.family(family).filter { deviceId == nil || $0.deviceId == deviceId }
            .sorted { ($0.createdAt, $0.subscriptionId) < ($1.createdAt, $1.subscriptionId) }
    }

    var count: Int { self.byFamily.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}

extension Subscription {
    var key: PushDatabase.SubscriptionKey { .init(family: self.family, deviceId: self.deviceId, id: self.subscriptionId) }
}
