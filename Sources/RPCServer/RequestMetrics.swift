import Foundation
import Glibc
import RPCCore
import ServiceMetrics

/// What every service counts of its requests and connections, whatever its methods:
/// `screentime_<service>_requests_total{method,code}` (code `ok` or the error's code),
/// `_request_duration_seconds{method}`, `_connections` and `_connections_refused_total`,
/// and of its process, `_resident_memory_bytes` and `_start_time_seconds`.
struct RequestMetrics: Sendable {
    let requests: LabelledInstruments<CoreMetrics.Counter>
    let durations: LabelledInstruments<CoreMetrics.Timer>
    let refused: CoreMetrics.Counter

    /// `method` labels beyond the table's names: a request that named no method this
    /// service has, and one that could not be read.
    static let unknownMethod = "unknown", unreadable = "unreadable"

    init(_ metrics: ServiceMetrics, state: ServerState) {
        self.requests = LabelledInstruments { method, code in metrics.counter("requests_total", [("method", method), ("code", code)]) }
        self.durations = LabelledInstruments { method, _ in metrics.timer("request_duration_seconds", [("method", method)]) }
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

    func served(_ method: String, failure: RPCError?, duration: Duration) {
        self.requests(method, failure?.code.rawValue ?? "ok").increment()
        self.durations(method).record(duration)
    }

    /// Answered without running: unreadable, an unknown method, too many in flight.
    func refused(_ method: String, _ code: ErrorCode) {
        self.requests(method, code.rawValue).increment()
    }
}

/// The process's size, for the gauge every service has.
public enum ProcessMemory {
    /// Resident memory (`/proc/self/statm`'s second field, in pages).
    public static var residentBytes: Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
