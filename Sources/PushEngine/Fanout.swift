import Foundation
import PushAPI
import RPCClient
import RPCCore
import StoreAPI

/// Turns the store's changes into queued notifications: which subscriptions a change
/// fires, for which devices, with what in them.
struct Fanout: Sendable {
    let registry: SubscriptionRegistry
    let access: AccessCache
    let store: StoreReader
    let defaultTTL: Duration

    struct Outcome: Sendable {
        var drafts: [PushDatabase.Draft] = []
        var fired: [PushDatabase.SubscriptionKey] = []
        /// Families whose shares or zones changed: their listeners are checked again.
        var accessChanged: Set<String> = []
    }

    func process(_ events: [ChangeEvent], now: Date = Date()) async throws -> Outcome {
        var outcome = Outcome()
        var firedOnce = Set<PushDatabase.SubscriptionKey>()
        var groups = 0
        for event in events {
            if [.shareChanged, .zoneCreated, .zoneDeleted].contains(event.kind) {
                self.access.invalidate(event.family)
                outcome.accessChanged.insert(event.family)
            }
            let subscriptions = self.registry.family(event.family).filter { !firedOnce.contains($0.key) && Self.mayFire($0, on: event) }
            guard !subscriptions.isEmpty else { continue }
            let access = try await self.access.access(event.family)
            var fields = event.kind == .recordDeleted ? event.deletedFields : event.record?.fields
            let needsFields = subscriptions.contains { $0.kind == .query && (!$0.filters.isEmpty || $0.notification.includeKeys != nil) }
            if event.kind == .recordSaved, fields == nil, needsFields, let name = event.recordName {
                // Superseded before we saw it: match the record as it is now.
                fields = try await self.store.current(family: event.family, zone: event.zone, name: name)?.fields
            }
            // Devices whose subscriptions share an id and a spec get the same notification.
            var shared: [SharedNotification: (notification: PushNotification, group: Int)] = [:]
            for subscription in subscriptions where access.canRead(subscription.deviceId, zone: event.zone) {
                guard let reason = Self.reason(subscription, event, fields: fields) else { continue }
                let key = SharedNotification(subscriptionId: subscription.subscriptionId, kind: subscription.kind, spec: subscription.notification, reason: reason)
                let made = shared[key] ?? {
                    groups += 1
                    return (self.notification(for: subscription, event: event, reason: reason, fields: fields, now: now), groups)
                }()
                shared[key] = made
                outcome.drafts.append(PushDatabase.Draft(
                    family: event.family, deviceId: subscription.deviceId, notification: made.notification, group: made.group))
                if subscription.firesOnce {
                    firedOnce.insert(subscription.key)
                    outcome.fired.append(subscription.key)
                }
            }
        }
        return outcome
    }

    /// What a notification for one change depends on besides the change.
    private struct SharedNotification: Hashable {
        var subscriptionId: String
        var kind: SubscriptionKind
        var spec: NotificationSpec
        var reason: NotificationReason
    }

    /// The cheap test, before any lookup: could this subscription fire on this change?
    static func mayFire(_ subscription: Subscription, on event: ChangeEvent) -> Bool {
        switch subscription.kind {
        case .query:
            return [.recordSaved, .recordDeleted].contains(event.kind) && event.recordType == subscription.recordType
                && (subscription.zone == nil || subscription.zone == event.zone)
        case .zone:
            return event.zone == subscription.zone && [.recordSaved, .recordDeleted, .zoneDeleted].contains(event.kind)
        case .family:
            return true
        }
    }

    /// Why the subscription fires on the change, or nil when it does not.
    static func reason(_ subscription: Subscription, _ event: ChangeEvent, fields: [String: JSONValue]?) -> NotificationReason? {
        guard subscription.kind == .query else { return .zoneChanged }
        let reason: NotificationReason
        let trigger: FireOn
        switch event.kind {
        case .recordSaved:
            (reason, trigger) = event.created == true ? (.recordCreated, .create) : (.recordUpdated, .update)
        case .recordDeleted:
            (reason, trigger) = (.recordDeleted, .delete)
        default:
            return nil
        }
        guard subscription.firesOn.contains(trigger) else { return nil }
        if subscription.filters.isEmpty { return reason }
        guard let fields, FilterMatch.matches(fields, subscription.filters) else { return nil }
        return reason
    }

    private func notification(for subscription: Subscription, event: ChangeEvent, reason: NotificationReason, fields: [String: JSONValue]?, now: Date) -> PushNotification {
        let spec = subscription.notification
        var included: [String: JSONValue]?
        if let keys = spec.includeKeys, let fields {
            included = fields.filter { keys.contains($0.key) }
        }
        let ttl = spec.ttlSeconds.map { Duration.milliseconds(Int64($0 * 1000)) } ?? self.defaultTTL
        return PushNotification(
            seq: 0, family: event.family, reason: reason, subscriptionId: subscription.subscriptionId, zone: event.zone,
            recordType: event.recordType, recordName: event.recordName, changeSeq: event.seq, alert: spec.alert, fields: included,
            // Zone and family subscriptions are "fetch changes" hints: the latest one says it all.
            collapseKey: spec.collapseKey ?? (subscription.kind == .query ? nil : "subscription:\(subscription.subscriptionId)"),
            priority: spec.priority ?? .normal, createdAt: now, expiresAt: now.addingTimeInterval(ttl.seconds))
    }
}

/// What the fan-out reads from the store besides the change feed.
struct StoreReader: Sendable {
    let client: RPCClient

    func current(family: String, zone: String, name: String) async throws -> Record? {
        try await self.client.call(StoreMethods.fetch, FetchParams(family: family, zone: zone, recordNames: [name])).records.first
    }
}
