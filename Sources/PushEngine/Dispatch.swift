import Foundation
import MemoryReturn
import PushAPI
import ServiceKit

/// Queues notifications, then sends them on: live to the device's listeners, to its
/// webhook if it has one and nobody is listening for it, and a wake if it is registered
/// for wakes and nobody is listening (or it does not acknowledge in time).
struct Dispatch: Sendable {
    let database: PushDatabase
    let hub: Hub
    /// Nil when outbound delivery is off.
    let webhooks: Webhooks?
    /// Nil when wakes are off.
    let wakes: Wakes?
    /// How long a change's "fetch changes" hint is held (see ``Deferred``);
    /// zero: not held.
    let collapseWindow: Duration
    /// Wakes ``Deferred`` when a draft is held.
    let held: Wakeup
    var metrics = PushMetrics.none

    struct Webhooks: Sendable {
        let registry: DeviceRegistry
        let wakeup: Wakeup
    }

    struct Wakes: Sendable {
        let registry: DeviceRegistry
        let wakeup: Wakeup
        /// How long a listening device has to acknowledge before it is woken anyway (an
        /// app suspended with its connection still open listens, and reads nothing).
        let ackWait: Duration
    }

    /// Notifications in one batch past which its memory is given back once batches pause.
    static let largeFanOut = 1000

    /// Live listeners get the notifications as soon as they are numbered; the call returns
    /// once they are committed to the devices' queues.
    func queue(_ drafts: [PushDatabase.Draft], removing fired: [PushDatabase.SubscriptionKey] = [], position: Int64? = nil,
               releasing: [Deferred.Key] = [], request: PushDatabase.NotifyRequest? = nil) async throws -> [PushDatabase.Queued] {
        try await self.queue(drafts, deferring: [], removing: fired, position: position, releasing: releasing, request: request)
    }

    /// A batch of changes' notifications: "fetch changes" hints (zone and family
    /// subscriptions') are held for the collapse window (in the transaction that moves the
    /// position), the others queued and sent now.
    func queueChanges(_ drafts: [PushDatabase.Draft], removing fired: [PushDatabase.SubscriptionKey], position: Int64?) async throws -> [PushDatabase.Queued] {
        guard self.collapseWindow > .zero else { return try await self.queue(drafts, removing: fired, position: position) }
        let isHint = { (draft: PushDatabase.Draft) in draft.notification.reason == .zoneChanged && draft.notification.collapseKey != nil }
        let held = drafts.filter(isHint)
        let queued = try await self.queue(drafts.filter { !isHint($0) }, deferring: held, removing: fired, position: position, releasing: [], request: nil)
        if !held.isEmpty { self.held.signal() }
        return queued
    }

    private func queue(_ drafts: [PushDatabase.Draft], deferring: [PushDatabase.Draft], removing fired: [PushDatabase.SubscriptionKey], position: Int64?,
                       releasing: [Deferred.Key], request: PushDatabase.NotifyRequest?) async throws -> [PushDatabase.Queued] {
        let hub = self.hub
        let batch = hub.newBatch()
        defer { hub.settle(batch) }
        let window = self.collapseWindow.components
        let due = deferring.isEmpty ? Date.distantPast : Date().addingTimeInterval(Double(window.seconds) + Double(window.attoseconds) / 1e18)
        let metrics = self.metrics
        let queued = try await self.database.enqueue(drafts, removing: fired, position: position, deferring: deferring, due: due, releasing: releasing,
                                                     request: request, route: self.route) { queued in
            hub.deliver(queued.map { (Hub.DeviceKey(family: $0.family, deviceId: $0.deviceId), $0.outgoing) }, batch: batch)
        }
        for draft in drafts { metrics.queued((draft.notification.priority ?? .normal).rawValue).increment() }
        if queued.contains(where: \.posted) { self.webhooks?.wakeup.signal() }
        if queued.contains(where: { $0.wake != nil }) { self.wakes?.wakeup.signal() }
        // A change for thousands of devices takes megabytes for a moment (the batch, its
        // queue rows, a write to each listener), which glibc keeps unless it is asked to
        // give them back: it is, once such fan-outs pause.
        if drafts.count >= Self.largeFanOut { MemoryReturn.request() }
        return queued
    }

    /// Where a notification for this device goes besides its listeners.
    private var route: @Sendable (_ family: String, _ deviceId: String) -> PushDatabase.Route {
        let webhooks = self.webhooks?.registry
        let wakes = self.wakes
        guard webhooks != nil || wakes != nil else { return { _, _ in PushDatabase.Route() } }
        let hub = self.hub
        return { family, deviceId in
            let key = Hub.DeviceKey(family: family, deviceId: deviceId)
            let listening = hub.isListening(key)
            var route = PushDatabase.Route()
            route.post = webhooks?.contains(key) == true && !listening
            if let wakes, wakes.registry.contains(key) { route.wakeAfter = listening ? wakes.ackWait : .zero }
            return route
        }
    }
}
