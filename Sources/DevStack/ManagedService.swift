import Foundation
import Glibc
import ProcessSpawn

/// One service of the stack: its socket, held while it sleeps; the process, started on
/// the first connection and restarted when it crashes; its log and `sd_notify` status.
final class ManagedService {
    enum State: Equatable {
        /// Not running; the first connection starts it.
        case waiting
        case starting(pid: pid_t)
        case running(pid: pid_t)
        /// Crashed; started again at this time.
        case restarting(at: ContinuousClock.Instant)
        /// Crashed too often: left alone until a connection comes after this time.
        case failed(until: ContinuousClock.Instant)

        var pid: pid_t? {
            switch self {
            case .starting(let pid), .running(let pid): pid
            default: nil
            }
        }
    }

    let name: String
    let binary: String
    let arguments: [String]
    let socket: ListeningSocket
    let notify: NotifySocket
    private(set) var state = State.waiting
    private(set) var status = ""
    private(set) var starts = 0
    private var crashes: [ContinuousClock.Instant] = []
    private var logFD: Int32 = -1
    private var pending = [UInt8]()

    static let restartDelay = Duration.milliseconds(500)
    static let crashLimit = 5
    static let crashWindow = Duration.seconds(30)

    init(name: String, binary: String, arguments: [String], socket: ListeningSocket, notify: NotifySocket) {
        self.name = name
        self.binary = binary
        self.arguments = arguments
        self.socket = socket
        self.notify = notify
    }

    /// The descriptor that holds news: the listening socket while it sleeps (a connection
    /// waits), the log pipe while it runs.
    func watchedDescriptors(now: ContinuousClock.Instant) -> [Int32] {
        var fds = [self.notify.fd]
        if self.logFD >= 0 { fds.append(self.logFD) }
        switch self.state {
        case .waiting: fds.append(self.socket.fd)
        case .failed(let until) where now >= until: fds.append(self.socket.fd)
        default: break
        }
        return fds
    }

    /// Starts the process with the socket as descriptor 3 (`LISTEN_FDS=1`,
    /// `LISTEN_FDNAMES=<name>`, `LISTEN_PID` its own pid), as systemd does.
    func start() throws {
        let log = try makePipe()
        var environment = ProcessInfo.processInfo.environment
        for key in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM"] { environment[key] = nil }
        environment["LISTEN_FDS"] = "1"
        environment["LISTEN_FDNAMES"] = self.name
        environment["NOTIFY_SOCKET"] = self.notify.path
        // LISTEN_PID must be the service's own pid, known only in the child: a shell sets
        // it and execs the service, which keeps the shell's pid.
        let pid = try Spawn(
            executable: "/bin/sh", arguments: ["-c", "LISTEN_PID=$$; export LISTEN_PID; exec \"$0\" \"$@\"", self.binary] + self.arguments,
            environment: environment, stdout: .descriptor(log.write), stderr: .descriptor(log.write),
            passing: [self.socket.fd], ownProcessGroup: true
        ).start()
        Glibc.close(log.write)
        if self.logFD >= 0 { Glibc.close(self.logFD) }
        self.logFD = log.read
        _ = fcntl(self.logFD, F_SETFL, fcntl(self.logFD, F_GETFL) | O_NONBLOCK)
        self.state = .starting(pid: pid)
        self.status = ""
        self.starts += 1
    }

    /// The complete lines the service wrote since last asked (all that is left, at its end).
    func readLog() -> [String] {
        guard self.logFD >= 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(self.logFD, &buffer, buffer.count)
            if count > 0 {
                self.pending += buffer[0..<count]
                continue
            }
            if count == 0 {  // every writer is gone
                Glibc.close(self.logFD)
                self.logFD = -1
                if !self.pending.isEmpty { self.pending.append(UInt8(ascii: "\n")) }
            }
            break
        }
        guard let last = self.pending.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        let lines = self.pending[...last].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
        self.pending.removeSubrange(...last)
        return lines.map { String(decoding: $0, as: UTF8.self) }
    }

    /// Applies what the service told `sd_notify`; returns whether its state or status changed.
    func readNotifications() -> Bool {
        var changed = false
        for (key, value) in self.notify.receive() {
            switch key {
            case "READY" where value == "1":
                if case .starting(let pid) = self.state { self.state = .running(pid: pid) }
                changed = true
            case "STATUS":
                changed = changed || value != self.status
                self.status = value
            default:
                continue
            }
        }
        return changed
    }

    enum Exit {
        /// Exited cleanly (idle, or asked to stop).
        case clean
        case crashed(status: Int32, restarting: Bool)
    }

    /// Records the process's exit and decides what comes next.
    func exited(status: Int32, now: ContinuousClock.Instant) -> Exit {
        self.status = ""
        guard status != 0 else {
            self.state = .waiting
            return .clean
        }
        self.crashes = self.crashes.filter { now - $0 < Self.crashWindow } + [now]
        if self.crashes.count >= Self.crashLimit {
            self.state = .failed(until: now + Self.crashWindow)
            self.crashes = []
            return .crashed(status: status, restarting: false)
        }
        self.state = .restarting(at: now + Self.restartDelay)
        return .crashed(status: status, restarting: true)
    }

    /// The start is due: a crash's restart time passed, or a connection waits.
    func due(now: ContinuousClock.Instant, connectionWaiting: Bool) -> Bool {
        switch self.state {
        case .waiting: connectionWaiting
        case .restarting(let at): now >= at
        case .failed(let until): connectionWaiting && now >= until
        case .starting, .running: false
        }
    }

    var summary: String {
        switch self.state {
        case .waiting: "waiting for a connection"
        case .starting(let pid): "starting (pid \(pid))"
        case .running(let pid): self.status.isEmpty ? "running (pid \(pid))" : "running (pid \(pid)): \(self.status)"
        case .restarting: "crashed; restarting"
        case .failed: "failed (crashed \(Self.crashLimit) times); waiting"
        }
    }

    func close() {
        if self.logFD >= 0 { Glibc.close(self.logFD) }
        self.logFD = -1
        self.socket.close()
        self.notify.close()
    }
}
