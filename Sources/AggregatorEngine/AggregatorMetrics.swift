import Foundation
import ServiceMetrics

/// The aggregator's own instruments: the changes it applied, how far behind the store's
/// newest change it was when it applied a batch (seconds) and the change-log position it
/// has applied (with the store's `change_log_head`, the lag in changes), and the alerts it
/// sent the parents by kind.
struct AggregatorMetrics: Sendable {
    let changesApplied: Counter
    let ingestLag: Gauge
    let position: Gauge
    let alerts: LabelledInstruments<Counter>

    init(_ metrics: ServiceMetrics) {
        self.changesApplied = metrics.counter("changes_applied_total")
        self.ingestLag = metrics.gauge("ingest_lag_seconds")
        self.position = metrics.gauge("change_log_position")
        self.alerts = LabelledInstruments { kind, outcome in metrics.counter("alerts_total", [("kind", kind), ("outcome", outcome)]) }
        // Every kind and outcome from the start, at zero.
        for kind in Alerts.Kind.allCases { for outcome in ["sent", "dropped"] { _ = self.alerts(kind.rawValue, outcome) } }
    }

    static let none = AggregatorMetrics(ServiceMetrics(service: "aggregator", enabled: false))

    /// A batch of changes applied through `position`, the newest of them made at `newest`.
    func applied(_ count: Int, through position: Int64?, newest: Date?) {
        self.changesApplied.increment(by: count)
        if let position { self.position.record(position) }
        if let newest { self.ingestLag.record(max(0, Date().timeIntervalSince(newest))) }
    }
}
