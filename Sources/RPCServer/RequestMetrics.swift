import Foundation
import Glibc
import RPCCore
import ServiceMetrics

/// What every service counts of its requests and connections, whatever its methods:
/// `screentime_<service>_requests_total{method,code}` (code `ok` or the error's code),
/// `_request_duration_seconds{method}`, `_connections` and `_connections_refused_total`,
/// and of its process, `_resident_memory_bytes` and `_start_time_seconds`.
struct RequestMetrics: Sendable {
    /// Per method of the table, made once when the server starts: a request finds its
    /// instruments in a dictionary that never changes, without a lock.
    let methods: [String: MethodInstruments]
    /// Methods not in the table (`unknown`, `unreadable`).
    let others: LabelledInstruments<MethodInstruments>
    let refused: CoreMetrics.Counter

    /// `method` labels beyond the table's names: a request that named no method this
    /// service has, and one that could not be read.
    static let unknownMethod = "unknown", unreadable = "unreadable"

    init(_ metrics: ServiceMetrics, methods names: [String], state: ServerState) {
        self.methods = Dictionary(uniqueKeysWithValues: names.map { ($0, MethodInstruments(metrics, method: $0)) })
        self.others = LabelledInstruments { method, _ in MethodInstruments(metrics, method: method) }
        self.refused = metrics.counter("connections_refused_total")
        let connections = metrics.gauge("connections")
        let memory = metrics.gauge("resident_memory_bytes")
        let started = metrics.gauge("start_time_seconds")
        let startedAt = Date().timeIntervalSince1970
        metrics.onCollect {
            connections.record(state.summary.connections)
            memory.record(ProcessMemory.residentBytes)
            started.record(startedAt)
        }
    }

    private func of(_ method: String) -> MethodInstruments { self.methods[method] ?? self.others(method) }

    func served(_ method: String, failure: RPCError?, duration: Duration) {
        self.of(method).served(failure: failure?.code, duration: duration)
    }

    /// Answered without running: unreadable, an unknown method, too many in flight.
    func refused(_ method: String, _ code: ErrorCode) {
        self.of(method).failed(code)
    }
}

/// One method's instruments: its successes and durations, made when it is first called (a
/// service starts without registering a histogram for each of its thirty methods, and a
/// scrape lists only the methods called), and its failures by code.
final class MethodInstruments: Sendable {
    private let made: Lazy<(ok: CoreMetrics.Counter, duration: CoreMetrics.Timer)>
    private let failures: LabelledInstruments<CoreMetrics.Counter>

    init(_ metrics: ServiceMetrics, method: String) {
        self.made = Lazy { (metrics.counter("requests_total", [("method", method), ("code", "ok")]), metrics.timer("request_duration_seconds", [("method", method)])) }
        self.failures = LabelledInstruments { code, _ in metrics.counter("requests_total", [("method", method), ("code", code)]) }
    }

    func served(failure: ErrorCode?, duration: Duration) {
        let made = self.made.value
        if let failure { self.failures(failure.rawValue).increment() } else { made.ok.increment() }
        made.duration.record(duration)
    }

    func failed(_ code: ErrorCode) { self.failures(code.rawValue).increment() }
}

/// The process's size, for the gauge every service has.
enum ProcessMemory {
    /// Resident memory (`/proc/self/statm`'s second field, in pages).
    static var residentBytes: Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
