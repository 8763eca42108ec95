import PushAPI
import Synchronization

/// Every subscription, in memory by family (the fan-out's index), kept in step with the
/// database by whoever changes it.
final class SubscriptionRegistry: Sendable {
    private struct Family {
        var byKey: [PushDatabase.SubscriptionKey: Subscription] = [:]
        /// `byKey`'s values, made when first asked for after a change: a change to a family
        /// of ten thousand subscriptions hands out this array, not ten thousand copies.
        var list: [Subscription]?
    }

    private let byFamily = Mutex<[String: Family]>([:])

    init(_ subscriptions: [Subscription]) {
        self.byFamily.withLock { map in
            for subscription in subscriptions { map[subscription.family, default: Family()].byKey[subscription.key] = subscription }
        }
    }

    func put(_ subscription: Subscription) {
        self.byFamily.withLock { map in
            map[subscription.family, default: Family()].byKey[subscription.key] = subscription
            map[subscription.family]?.list = nil
        }
    }

    func remove(_ keys: [PushDatabase.SubscriptionKey]) {
        self.byFamily.withLock { map in
            for key in keys {
                map[key.family]?.byKey.removeValue(forKey: key)
                map[key.family]?.list = nil
                if map[key.family]?.byKey.isEmpty == true { map.removeValue(forKey: key.family) }
            }
        }
    }

    /// The family's subscriptions, in no particular order (the fan-out's hot path).
    func family(_ family: String) -> [Subscription] {
        self.byFamily.withLock { map in
            if let list = map[family]?.list { return list }
            guard let subscriptions = map[family]?.byKey.values else { return [] }
            let list = Array(subscriptions)
            map[family]?.list = list
            return list
        }
    }

    /// For listings: oldest first.
    func listing(_ family: String, deviceId: String? = nil) -> [Subscription] {
        self.family(family).filter { deviceId == nil || $0.deviceId == deviceId }
            .sorted { ($0.createdAt, $0.subscriptionId) < ($1.createdAt, $1.subscriptionId) }
    }

    var count: Int { self.byFamily.withLock { $0.values.reduce(0) { $0 + $1.byKey.count } } }
}

extension Subscription {
    var key: PushDatabase.SubscriptionKey { .init(family: self.family, deviceId: self.deviceId, id: self.subscriptionId) }
}
