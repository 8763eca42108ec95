import Foundation
import Glibc
import Synchronization

/// The test service (or any executable) running as a real process, its stderr kept in a
/// file for the test to read.
public final class ServiceProcess: @unchecked Sendable {
    public let logPath: String
    public let socketPath: String

    /// Starts `screentime-testd` by hand on `<dir>/test.sock` and waits until it answers.
    public static func startByHand(in directory: TemporaryDirectory, arguments: [String] = [], environment: [String: String] = [:]) async throws -> ServiceProcess {
        try await self.start("screentime-testd", service: "test", in: directory, arguments: arguments, environment: environment)
    }

    /// Starts `screentime-testd` through `systemd-socket-activate` on `<dir>/activated.sock`
    /// (not the service's default path, so a test sees it really used the inherited socket).
    public static func startSocketActivated(in directory: TemporaryDirectory, fdName: String = "test", arguments: [String] = []) async throws -> ServiceProcess {
        try await self.startSocketActivated("screentime-testd", service: "test", in: directory, socketName: "activated", fdName: fdName, arguments: arguments)
    }

    /// Starts any service executable by hand: it binds `<dir>/<service>.sock` itself and keeps
    /// its data in `stateDirectory` (default: the same directory). Waits until it answers.
    /// Its log goes to a file (with no journal stream, `--log-target auto` means stderr).
    public static func start(
        _ executable: String, service: String, in directory: TemporaryDirectory, stateDirectory: String? = nil,
        arguments: [String] = [], environment: [String: String] = [:]
    ) async throws -> ServiceProcess {
        let process = try ServiceProcess(
            executable: Binaries.path(executable),
            arguments: ["--runtime-dir", directory.path, "--state-dir", stateDirectory ?? directory.path, "--log-level", "debug"] + arguments,
            socketPath: directory.file("\(service).sock"),
            logPath: directory.file("\(service)-\(UUID().uuidString.prefix(4)).log"),
            environment: environment
        )
        try await process.waitUntilListening()
        return process
    }

    /// Starts any service executable through `systemd-socket-activate`, which binds
    /// `<dir>/<socketName>.sock` (default: the service's name), waits for the first
    /// connection and execs the service with `LISTEN_FDS`/`LISTEN_FDNAMES`, as systemd does.
    public static func startSocketActivated(
        _ executable: String, service: String, in directory: TemporaryDirectory, stateDirectory: String? = nil,
        socketName: String? = nil, fdName: String? = nil, arguments: [String] = []
    ) async throws -> ServiceProcess {
        let socket = directory.file("\(socketName ?? service).sock")
        let process = try ServiceProcess(
            executable: "/usr/bin/systemd-socket-activate",
            arguments: ["-l", socket, "--fdname=\(fdName ?? service)", Binaries.path(executable),
                        "--runtime-dir", directory.path, "--state-dir", stateDirectory ?? directory.path, "--log-level", "debug"] + arguments,
            socketPath: socket,
            logPath: directory.file("\(service)-activated.log"),
            environment: [:]
        )
        try await process.waitForFile()
        return process
    }

    public init(executable: String, arguments: [String], socketPath: String, logPath: String, environment: [String: String]) throws {
        self.socketPath = socketPath
        self.logPath = logPath
        var env = ProcessInfo.processInfo.environment
        for key in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "JOURNAL_STREAM", "RUNTIME_DIRECTORY", "STATE_DIRECTORY"] {
            env[key] = nil
        }
        env.merge(environment) { _, new in new }
        self.pid = try Spawn(executable: executable, arguments: arguments, environment: env, stdout: logPath, stderr: logPath).start()
    }

    public let pid: pid_t
    private let exit = Mutex<Int32?>(nil)

    /// The exit status once the process has exited (reaping it), else nil.
    public var exitStatus: Int32? {
        self.exit.withLock { status in
            if status == nil { status = ChildExit.poll(self.pid) }
            return status
        }
    }

    public var isRunning: Bool { self.exitStatus == nil }
    public var log: String { (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? "" }

    /// The process's resident memory (VmRSS), in bytes.
    public func residentBytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(self.pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Int($0) })
        else { throw TestFailure("no VmRSS in /proc/\(self.pid)/status") }
        return kib * 1024
    }

    public func waitForFile() async throws {
        try await waitUntil("a socket at \(self.socketPath)", timeout: .seconds(5), detail: self.log) {
            FileManager.default.fileExists(atPath: self.socketPath)
        }
    }

    public func waitUntilListening() async throws {
        try await waitUntil("the service listening on \(self.socketPath)", detail: self.log) {
            if let status = self.exitStatus { throw TestFailure("the service exited (\(status))") }
            guard let connection = try? RawConnection(path: self.socketPath) else { return false }
            connection.close()
            return true
        }
    }

    public func signal(_ signal: Int32) { if self.isRunning { kill(self.pid, signal) } }

    /// Waits for the process to exit; returns its exit status (or fails after `timeout`).
    public func waitForExit(timeout: Duration = .seconds(15)) async throws -> Int32 {
        try await eventually("the process exiting", timeout: timeout, detail: self.log) { _ in self.exitStatus }
    }

    /// Stops it without suspending and without waiting: for `defer` at the end of a test.
    /// SIGTERM now; the reaper's thread (``Reaper``) waits for the exit and sends SIGKILL
    /// after `timeout`, and kills whatever still runs when the test process exits. A test
    /// that needs the process gone before it goes on awaits ``stop()`` instead.
    public func stopNow(timeout: Duration = .seconds(10)) {
        guard self.isRunning else { return }
        self.signal(SIGTERM)
        Reaper.shared.take(self, grace: timeout)
    }

    public func stop() async {
        self.signal(SIGTERM)
        if (try? await self.waitForExit()) == nil {
            self.signal(SIGKILL)
            _ = try? await self.waitForExit(timeout: .seconds(5))
        }
    }

    deinit {
        if self.isRunning {
            kill(self.pid, SIGKILL)
            var status: Int32 = 0
            waitpid(self.pid, &status, 0)
        }
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
