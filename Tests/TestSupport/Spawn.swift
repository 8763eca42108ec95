import Foundation
import Glibc

/// Starts child processes for the tests with nothing inherited but what is asked for.
///
/// Tests run in parallel in one process, so a child started by one test would otherwise
/// inherit another test's descriptors (a pipe's write end, a client socket) and keep them
/// open: a pipe then never reaches end-of-file and a closed connection never looks closed
/// to the service. Foundation's `Process` leaves such descriptors open on Linux; here every
/// descriptor from 3 up is closed in the child (`posix_spawn_file_actions_addclosefrom_np`),
/// except those passed on explicitly.
public struct Spawn {
    public var executable: String
    public var arguments: [String]
    public var environment: [String: String] = ProcessInfo.processInfo.environment
    /// Files for stdin, stdout and stderr; nil is `/dev/null`. stdout and stderr may be the same file.
    public var stdin: String?
    public var stdout: String?
    public var stderr: String?
    /// Descriptors of this process to hand over as 3, 4, … (socket activation).
    public var passing: [Int32] = []

    public init(
        executable: String, arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        stdin: String? = nil, stdout: String? = nil, stderr: String? = nil, passing: [Int32] = []
    ) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.passing = passing
    }

    /// Starts the child; returns its pid.
    public func start() throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, self.stdin ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, self.stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let stderr = self.stderr, stderr != self.stdout {
            posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else if self.stderr == nil {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        // Move the passed descriptors out of the way first, so that placing them at 3, 4, …
        // cannot overwrite one not yet placed.
        let parked = self.passing.enumerated().map { Int32(1000 + $0.offset) }
        for (source, park) in zip(self.passing, parked) { posix_spawn_file_actions_adddup2(&actions, source, park) }
        for (index, park) in parked.enumerated() { posix_spawn_file_actions_adddup2(&actions, park, Int32(3 + index)) }
        _ = addCloseFrom(&actions, Int32(3 + self.passing.count))

        let argv = [self.executable] + self.arguments
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        var cEnv = self.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for entry in cEnv { free(entry) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, self.executable, &actions, nil, &cArgs, &cEnv)
        guard result == 0 else { throw TestFailure("cannot start \(self.executable): \(String(cString: strerror(result)))") }
        return pid
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module
/// does not import; looked up once at run time.
private let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32 = {
    guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
        fatalError("glibc 2.34 or later is needed (posix_spawn_file_actions_addclosefrom_np)")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self)
}()

/// A child's exit, reaped without blocking a thread (tests share the cooperative pool).
public enum ChildExit {
    /// The exit status (or 128 + signal), or nil while it still runs.
    public static func poll(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Waits for `pid` to exit; fails after `timeout`, killing it.
    public static func wait(_ pid: pid_t, timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = self.poll(pid) { return status }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(pid, SIGKILL)
        _ = try? await self.wait(pid, timeout: .seconds(5))
        throw TestFailure("process \(pid) did not exit within \(timeout)")
    }
}

/// Runs a command to completion (at most `timeout`); returns its exit status, stdout and
/// stderr. Output goes through files, not pipes, so nothing hangs on a descriptor held elsewhere.
public func runCommand(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String] = [:],
    stdin: String? = nil,
    timeout: Duration = .seconds(30)
) async throws -> (status: Int32, stdout: String, stderr: String) {
    let scratch = TemporaryDirectory()
    let token = UUID().uuidString.prefix(8)
    let outPath = scratch.file("out-\(token)")
    let errPath = scratch.file("err-\(token)")
    var inPath: String?
    if let stdin {
        inPath = scratch.file("in-\(token)")
        try Data(stdin.utf8).write(to: URL(fileURLWithPath: inPath!))
    }
    let pid = try Spawn(
        executable: executable,
        arguments: arguments,
        environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
        stdin: inPath,
        stdout: outPath,
        stderr: errPath
    ).start()
    let status = try await ChildExit.wait(pid, timeout: timeout)
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return (status, out, err)
}
