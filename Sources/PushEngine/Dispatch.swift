import Foundation
import MemoryReturn
import PushAPI
import ServiceKit

/// Queues notifications, then sends them on: live to the device's listeners, and to its
/// webhook if it has one and nobody is listening for it.
struct Dispatch: Sendable {
    let database: PushDatabase
    let hub: Hub
    /// Nil when outbound delivery is off.
    let webhooks: Webhooks?
    /// How long a change's "fetch changes" hint is held (see ``Deferred``);
    /// zero: not held.
    let collapseWindow: Duration
    /// Wakes ``Deferred`` when a draft is held.
    let held: Wakeup

    struct Webhooks: Sendable {
        let registry: WebhookRegistry
        let wakeup: Wakeup
    }

    /// Notifications in one batch past which its memory is given back once batches pause.
    static let largeFanOut = 1000

    /// Live listeners get the notifications as soon as they are numbered; the call returns
    /// once they are committed to the devices' queues.
    func queue(_ drafts: [PushDatabase.Draft], removing fired: [PushDatabase.SubscriptionKey] = [], position: Int64? = nil,
               releasing: [Deferred.Key] = []) async throws -> [PushDatabase.Queued] {
        try await self.queue(drafts, deferring: [], removing: fired, position: position, releasing: releasing)
    }

    /// A batch of changes' notifications: "fetch changes" hints (zone and family
    /// subscriptions') are held for the collapse window (in the transaction that moves the
    /// position), the others queued and sent now.
    func queueChanges(_ drafts: [PushDatabase.Draft], removing fired: [PushDatabase.SubscriptionKey], position: Int64?) async throws -> [PushDatabase.Queued] {
        guard self.collapseWindow > .zero else { return try await self.queue(drafts, removing: fired, position: position) }
        let isHint = { (draft: PushDatabase.Draft) in draft.notification.reason == .zoneChanged && draft.notification.collapseKey != nil }
        let held = drafts.filter(isHint)
        let queued = try await self.queue(drafts.filter { !isHint($0) }, deferring: held, removing: fired, position: position, releasing: [])
        if !held.isEmpty { self.held.signal() }
        return queued
    }

    private func queue(_ drafts: [PushDatabase.Draft], deferring: [PushDatabase.Draft], removing fired: [PushDatabase.SubscriptionKey], position: Int64?,
                       releasing: [Deferred.Key]) async throws -> [PushDatabase.Queued] {
        let hub = self.hub
        let batch = hub.newBatch()
        defer { hub.settle(batch) }
        let window = self.collapseWindow.components
        let due = deferring.isEmpty ? Date.distantPast : Date().addingTimeInterval(Double(window.seconds) + Double(window.attoseconds) / 1e18)
        let queued = try await self.database.enqueue(drafts, removing: fired, position: position, deferring: deferring, due: due, releasing: releasing,
                                                     post: self.post) { queued in
            hub.deliver(queued.map { (Hub.DeviceKey(family: $0.family, deviceId: $0.deviceId), $0.outgoing) }, batch: batch)
        }
        if queued.contains(where: \.posted) { self.webhooks?.wakeup.signal() }
        // A change for thousands of devices takes megabytes for a moment (the batch, its
        // queue rows, a write to each listener), which glibc keeps unless it is asked to
        // give them back: it is, once such fan-outs pause.
        if drafts.count >= Self.largeFanOut { MemoryReturn.request() }
        return queued
    }

    /// Whether a notification for this device also goes to its webhook.
    private var post: @Sendable (_ family: String, _ deviceId: String) -> Bool {
        guard let registry = self.webhooks?.registry else { return { _, _ in false } }
        let hub = self.hub
        return { family, deviceId in
            let key = Hub.DeviceKey(family: family, deviceId: deviceId)
            return registry.contains(key) && !hub.isListening(key)
        }
    }
}
