import Foundation
import WireJSON
import Glibc

/// What a service says of itself in `<runtime-dir>/status/<service>.json`: running (and
/// since when), exited when idle, stopped, or failed, with how many times it started and
/// restarted after a failure. Written when it starts and when it ends, so that the gateway's
/// metrics endpoint, the dashboard and `screentimectl status` know which services run
/// without connecting to the others' sockets (a connection would start an idle service).
/// The runtime directory is a tmpfs: the files go with a reboot.
public struct ServiceRunState: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, Hashable {
        case running
        /// Exited after its idle time (socket activation): systemd starts it on the next
        /// connection. Healthy.
        case idleExited = "idle-exited"
        /// Stopped by its manager (SIGTERM).
        case stopped
        /// Ended with an error, or gone without a word (killed, crashed).
        case failed
    }

    public var service: String
    public var version: String
    public var pid: Int32
    public var state: State
    /// Seconds since 1970.
    public var startedAt: Double
    public var endedAt: Double?
    /// Starts since the server's boot, and those of them that followed a failure.
    public var starts: Int
    public var restarts: Int
    /// Why it failed, when it could say.
    public var error: String?
    /// What it counts of the present beyond its state (the gateway: `devicesConnected`).
    public var details: [String: Int]?

    public init(service: String, version: String, pid: Int32, state: State, startedAt: Double, endedAt: Double? = nil, starts: Int, restarts: Int,
                error: String? = nil, details: [String: Int]? = nil) {
        self.service = service
        self.version = version
        self.pid = pid
        self.state = state
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.starts = starts
        self.restarts = restarts
        self.error = error
        self.details = details
    }

    /// `<runtime-dir>/status`.
    public static func directory(runtimeDirectory: String) -> String {
        (runtimeDirectory as NSString).appendingPathComponent("status")
    }

    public static func path(service: String, runtimeDirectory: String) -> String {
        (directory(runtimeDirectory: runtimeDirectory) as NSString).appendingPathComponent("\(service).json")
    }

    /// The service's file as it reads now; a file that says running for a process that is
    /// gone says failed. Nil: the service has not started since the boot (or writes none).
    public static func read(service: String, runtimeDirectory: String) -> ServiceRunState? {
        guard let data = FileManager.default.contents(atPath: path(service: service, runtimeDirectory: runtimeDirectory)),
              var state = try? RPCJSON.decode(ServiceRunState.self, from: data) else { return nil }
        if state.state == .running, !Self.alive(state.pid) {
            state.state = .failed
            state.error = state.error ?? "the process ended without a word (killed or crashed)"
        }
        return state
    }

    /// Whether a process with that id exists (of any user: EPERM says it does).
    static func alive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }
}

