@_exported import CoreMetrics
@preconcurrency import Prometheus
import Synchronization

/// A service's metrics: instruments of swift-metrics made against the service's own
/// Prometheus registry (swift-prometheus), so that each service (and each service of a test
/// running several in one process) counts for itself, without the process-wide
/// `MetricsSystem`. `rpc.metrics` hands the registry's text to whoever scrapes.
///
/// Every name is `screentime_<service>_<name>` (Prometheus conventions: base units,
/// `_total` for counters, `_seconds` for durations). Labels take a bounded set of values
/// (a method, an error code, a status): never a device's or a family's id.
public final class ServiceMetrics: Sendable {
    /// `store`, `push`, …: the middle of every name.
    public let service: String
    /// False: instruments record nothing and the text is empty (`--no-metrics`).
    public let enabled: Bool
    private let registry = PrometheusCollectorRegistry()
    private let factory: Mutex<PrometheusMetricsFactory>
    /// Run before each scrape: gauges of the present (connections, queues, sizes) read then,
    /// not kept up to date on every change.
    private let collectors = Mutex<[@Sendable () async -> Void]>([])

    public init(service: String, enabled: Bool = true) {
        self.service = service
        self.enabled = enabled
        var factory = PrometheusMetricsFactory(registry: self.registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        self.factory = Mutex(factory)
    }

    /// Durations from 100 µs (a point read) to 30 s (a wake that timed out).
    public static let durationBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
    ]

    /// `screentime_<service>_<name>`.
    public func name(_ name: String) -> String { "screentime_\(self.service)_\(name)" }

    private var made: any MetricsFactory {
        self.enabled ? self.factory.withLock { $0 } : NOOPMetricsHandler.instance
    }

    /// A counter (`name` ends in `_total`).
    public func counter(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: self.name(name), dimensions: dimensions, factory: self.made)
    }

    /// A gauge: a value that goes up and down.
    public func gauge(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(label: self.name(name), dimensions: dimensions, factory: self.made)
    }

    /// A histogram of durations, in seconds (`name` ends in `_seconds`).
    public func timer(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Timer {
        CoreMetrics.Timer(label: self.name(name), dimensions: dimensions, factory: self.made)
    }

    /// A histogram of values counted into `buckets` (upper bounds).
    public func histogram(_ name: String, buckets: [Double], _ dimensions: [(String, String)] = []) -> CoreMetrics.Recorder {
        let label = self.name(name)
        guard self.enabled else { return CoreMetrics.Recorder(label: label, dimensions: dimensions, aggregate: true, factory: NOOPMetricsHandler.instance) }
        let factory = self.factory.withLock { factory in
            factory.valueHistogramBuckets[label] = buckets
            return factory
        }
        return CoreMetrics.Recorder(label: label, dimensions: dimensions, aggregate: true, factory: factory)
    }

    /// Runs `collect` before each scrape (to set gauges of the present).
    public func onCollect(_ collect: @escaping @Sendable () async -> Void) {
        guard self.enabled else { return }
        self.collectors.withLock { $0.append(collect) }
    }

    /// The Prometheus text exposition of every instrument, gauges of the present read first.
    public func exposition() async -> String {
        guard self.enabled else { return "" }
        for collect in self.collectors.withLock({ $0 }) { await collect() }
        return self.registry.emitToString()
    }
}

/// Counters and timers told apart by one or two bounded labels (a method and an outcome),
/// made once each and kept: a lookup under a lock per use rather than the factory's.
public final class LabelledInstruments<Instrument: Sendable>: Sendable {
    private let make: @Sendable (_ first: String, _ second: String) -> Instrument
    private let made = Mutex<[String: Instrument]>([:])

    public init(_ make: @escaping @Sendable (_ first: String, _ second: String) -> Instrument) {
        self.make = make
    }

    public func callAsFunction(_ first: String, _ second: String = "") -> Instrument {
        let key = second.isEmpty ? first : first + "\u{1F}" + second
        return self.made.withLock { made in
            if let known = made[key] { return known }
            let instrument = self.make(first, second)
            made[key] = instrument
            return instrument
        }
    }
}

extension CoreMetrics.Timer {
    /// Records a `Duration` (the clocks' own type).
    public func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
