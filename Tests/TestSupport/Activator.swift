import Foundation
import Glibc

/// Plays systemd's part in socket activation for tests that need more than one activation
/// (idle exit): owns the listening socket for its whole life, and starts the service with
/// the socket as fd 3 and `LISTEN_PID`/`LISTEN_FDS`/`LISTEN_FDNAMES` set.
public final class Activator: @unchecked Sendable {
    public let path: String
    public let listenFD: Int32

    public init(path: String) throws {
        self.path = path
        self.listenFD = try listeningSocket(at: path)
    }

    /// Whether a connection is waiting to be accepted (what makes systemd start the service).
    public func hasPendingConnection(timeout: Duration) -> Bool {
        var poller = pollfd(fd: self.listenFD, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)) > 0
    }

    /// Starts the service with the listening socket as fd 3. Returns its pid.
    public func spawn(_ executable: String, _ arguments: [String], log: String) throws -> pid_t {
        // LISTEN_PID must be the service's own pid, known only once it runs: a shell sets
        // it to its own pid ($$) and then execs the service, which keeps that pid.
        let script = "LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=test exec \"$0\" \"$@\""
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LISTEN_") && $0.key != "NOTIFY_SOCKET" }
        return try Spawn(
            executable: "/bin/sh",
            arguments: ["-c", script, executable] + arguments,
            environment: environment,
            stdout: log,
            stderr: log,
            passing: [self.listenFD]
        ).start()
    }

    /// Waits for `pid` to exit; returns its exit status.
    public func waitForExit(_ pid: pid_t, timeout: Duration) async throws -> Int32 {
        try await ChildExit.wait(pid, timeout: timeout)
    }

    deinit {
        Glibc.close(self.listenFD)
        unlink(self.path)
    }
}

/// Leaves a socket file at `path` that nobody listens on, as a crashed service would.
public func makeStaleSocket(at path: String) throws {
    Glibc.close(try listeningSocket(at: path))
}

/// A listening stream socket bound at `path`.
private func listeningSocket(at path: String) throws -> Int32 {
    let fd = makeUnixSocket(SOCK_STREAM)
    guard withUnixAddress(path, { bind(fd, $0, $1) }) == 0, listen(fd, 64) == 0 else {
        let reason = String(cString: strerror(errno))
        Glibc.close(fd)
        throw TestFailure("cannot listen on \(path): \(reason)")
    }
    return fd
}

/// A `$NOTIFY_SOCKET` for a test: collects what the service tells the service manager.
public final class NotifyListener: @unchecked Sendable {
    public let path: String
    public let fd: Int32

    public init(path: String) throws {
        self.path = path
        self.fd = makeUnixSocket(SOCK_DGRAM)
        let bound = withUnixAddress(path) { bind(self.fd, $0, $1) }
        guard bound == 0 else { throw TestFailure("cannot bind \(path)") }
    }

    /// Waits for a message containing `assignment` (e.g. `READY=1`); returns every
    /// message received until then.
    public func waitFor(_ assignment: String, timeout: Duration = .seconds(10)) throws -> [String] {
        var seen: [String] = []
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let got = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            guard got > 0 else { continue }
            let message = String(decoding: buffer[0..<got], as: UTF8.self)
            seen.append(message)
            if message.split(separator: "\n").contains(where: { $0 == assignment }) { return seen }
        }
        throw TestFailure("no \(assignment) within \(timeout); got \(seen)")
    }

    deinit {
        Glibc.close(self.fd)
        unlink(self.path)
    }
}
