import Foundation
import GRDB
import PushAPI
import ServiceMetrics

/// The push service's own instruments: notifications queued by priority and handed to
/// listeners, acknowledgements, the outcomes of webhook posts and wakes (Sygnal's model:
/// outcomes by status, the time a wake's request takes), the latency from a change in the
/// store to its notifications being written to the listeners, and at each scrape its
/// listeners and the notifications waiting in the devices' queues.
struct PushMetrics: Sendable {
    let queued: LabelledInstruments<Counter>
    let delivered: Counter
    let acks: Counter
    let webhooks: LabelledInstruments<Counter>
    let wakes: LabelledInstruments<Counter>
    let wakeDuration: CoreMetrics.Timer
    let changeToListener: CoreMetrics.Timer

    init(_ metrics: ServiceMetrics) {
        self.queued = LabelledInstruments { priority, _ in metrics.counter("notifications_queued_total", [("priority", priority)]) }
        self.delivered = metrics.counter("notifications_delivered_total")
        self.acks = metrics.counter("acks_total")
        self.webhooks = LabelledInstruments { outcome, _ in metrics.counter("webhook_posts_total", [("outcome", outcome)]) }
        self.wakes = LabelledInstruments { outcome, _ in metrics.counter("wakes_total", [("outcome", outcome)]) }
        self.wakeDuration = metrics.timer("wake_request_duration_seconds")
        self.changeToListener = metrics.timer("change_to_listener_seconds")
        // Every outcome from the start, at zero (a series that appears late loses its first
        // increase to rate()).
        for priority in PushPriority.allCases { _ = self.queued(priority.rawValue) }
        for outcome in ["delivered", "gone", "refused", "failed"] { _ = self.webhooks(outcome) }
        for outcome in ["sent", "held", "gone", "refused", "failed"] { _ = self.wakes(outcome) }
    }

    static let none = PushMetrics(ServiceMetrics(service: "push", enabled: false))

    /// The gauges read at each scrape.
    static func collect(hub: Hub, database: PushDatabase, into metrics: ServiceMetrics) {
        let listeners = metrics.gauge("listeners")
        let pending = metrics.gauge("queued_notifications")
        metrics.onCollect {
            listeners.record(hub.listenerCount)
            if let count = try? await database.pendingCount() { pending.record(count) }
        }
    }
}
