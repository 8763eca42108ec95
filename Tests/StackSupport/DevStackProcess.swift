import Foundation
import Glibc
import RPCClient
import Synchronization
import TestSupport

/// `screentime-dev up` as a process: the stack a newcomer runs.
public final class DevStack: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let pid: pid_t
    public var stack: String { self.directory.file("stack") }
    public var runtime: String { self.stack + "/run" }
    public var logPath: String { self.directory.file("up.log") }

    public init(directory: TemporaryDirectory = TemporaryDirectory(), arguments: [String] = []) throws {
        self.directory = directory
        // The gateway on a free port: tests run side by side.
        self.pid = try Spawn(executable: Binaries.path("screentime-dev"), arguments: ["up", "--dir", self.directory.file("stack"), "--gateway-port", "0"] + arguments,
                             stdout: self.directory.file("up.log"), stderr: self.directory.file("up.log")).start()
    }

    /// A stack in `directory`: a new one, or again on the data a stopped one left there.
    public static func start(in directory: TemporaryDirectory = TemporaryDirectory(), arguments: [String] = []) async throws -> DevStack {
        try? FileManager.default.removeItem(atPath: directory.file("stack/run/dev-status.json"))
        let stack = try DevStack(directory: directory, arguments: arguments)
        try await stack.waitUntil("the stack is up") { FileManager.default.fileExists(atPath: stack.runtime + "/dev-status.json") }
        return stack
    }

    public var log: String { (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? "" }

    public func client(_ service: String) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(socketPath: "\(self.runtime)/\(service).sock", callTimeout: .seconds(30), connectTimeout: .seconds(10)))
    }

    /// Each service's state line and pid, from `<run>/dev-status.json`.
    public func services() throws -> [String: (state: String, pid: Int32?)] {
        let data = try Data(contentsOf: URL(fileURLWithPath: self.runtime + "/dev-status.json"))
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        var result: [String: (String, Int32?)] = [:]
        for entry in object?["services"] as? [[String: Any]] ?? [] {
            result[entry["name"] as? String ?? "?"] = (entry["state"] as? String ?? "", (entry["pid"] as? Int).map(Int32.init))
        }
        return result
    }

    public func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () throws -> Bool) async throws {
        try await TestSupport.waitUntil(what, timeout: timeout, detail: "the log:\n\(self.log)", condition)
    }

    private let exited = Mutex(false)

    /// Ctrl-C; returns the exit status.
    public func interrupt() async throws -> Int32 {
        kill(self.pid, SIGINT)
        let status = try await ChildExit.wait(self.pid, timeout: .seconds(30))
        self.exited.withLock { $0 = true }
        return status
    }

    public func stopNow() {
        guard !self.exited.withLock({ $0 }) else { return }
        kill(self.pid, SIGTERM)
        for _ in 0..<500 {
            if ChildExit.poll(self.pid) != nil { break }
            usleep(20_000)
        }
    }
}


/// `screentimectl` against a dev stack, as a subprocess, with the stack's own profile directory.
extension DevStack {
    public var profiles: String { self.directory.file("profiles") }

    public var ctlEnvironment: [String: String] {
        ["SCREENTIME_RUNTIME_DIR": self.runtime, "SCREENTIME_PROFILES_DIR": self.profiles, "SCREENTIME_PROFILE": ""]
    }

    /// Runs `screentimectl ARGUMENTS` to completion.
    public func ctl(_ arguments: String..., stdin: String? = nil, timeout: Duration = .seconds(60)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await self.ctl(arguments, stdin: stdin, timeout: timeout)
    }

    public func ctl(_ arguments: [String], stdin: String? = nil, timeout: Duration = .seconds(60)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runCommand(Binaries.path("screentimectl"), arguments, environment: self.ctlEnvironment, stdin: stdin, timeout: timeout)
    }

    /// Starts `screentimectl ARGUMENTS` in the background, its output to a file.
    public func ctlInBackground(_ arguments: String..., output: String) throws -> pid_t {
        try Spawn(executable: Binaries.path("screentimectl"), arguments: arguments,
                  environment: ProcessInfo.processInfo.environment.merging(self.ctlEnvironment) { _, new in new },
                  stdout: output, stderr: output).start()
    }
}
