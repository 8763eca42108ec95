import Foundation
import Glibc

/// Starts a child process with nothing inherited but what is asked for.
///
/// Foundation's `Process` leaves the parent's descriptors open in the child on Linux: a
/// pipe's write end or a client socket held by a child keeps a pipe from reaching
/// end-of-file and a closed connection from looking closed. Here every descriptor from 3 up
/// is closed in the child (`posix_spawn_file_actions_addclosefrom_np`), except those passed
/// on explicitly (socket activation: as 3, 4, …).
public struct Spawn {
    /// Where a standard stream goes.
    public enum Stream {
        case null
        /// A file, created if missing, appended to.
        case file(String)
        /// A descriptor of this process (a pipe's end).
        case descriptor(Int32)
    }

    public var executable: String
    public var arguments: [String]
    public var environment: [String: String]
    public var stdin: Stream
    public var stdout: Stream
    public var stderr: Stream
    /// Descriptors of this process to hand over as 3, 4, … (socket activation).
    public var passing: [Int32]
    /// Starts the child in a process group of its own, so a terminal's Ctrl-C reaches only
    /// the parent, which stops its children itself.
    public var ownProcessGroup: Bool

    public init(
        executable: String, arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .null, passing: [Int32] = [], ownProcessGroup: Bool = false
    ) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.passing = passing
        self.ownProcessGroup = ownProcessGroup
    }

    /// Files for stdin, stdout and stderr (nil: `/dev/null`); stdout and stderr may be the same file.
    public init(
        executable: String, arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        stdin: String? = nil, stdout: String? = nil, stderr: String? = nil, passing: [Int32] = []
    ) {
        self.init(executable: executable, arguments: arguments, environment: environment,
                  stdin: stdin.map(Stream.file) ?? .null, stdout: stdout.map(Stream.file) ?? .null,
                  stderr: stderr.map { $0 == stdout ? .descriptor(1) : .file($0) } ?? .null, passing: passing)
    }

    /// Starts the child; returns its pid.
    public func start() throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        Self.place(self.stdin, at: 0, readOnly: true, &actions)
        Self.place(self.stdout, at: 1, readOnly: false, &actions)
        Self.place(self.stderr, at: 2, readOnly: false, &actions)
        // Move the passed descriptors out of the way first, so that placing them at 3, 4, …
        // cannot overwrite one not yet placed.
        let parked = self.passing.enumerated().map { Int32(1000 + $0.offset) }
        for (source, park) in zip(self.passing, parked) { posix_spawn_file_actions_adddup2(&actions, source, park) }
        for (index, park) in parked.enumerated() { posix_spawn_file_actions_adddup2(&actions, park, Int32(3 + index)) }
        guard let addCloseFrom else { throw SpawnError("glibc 2.34 or later is needed (posix_spawn_file_actions_addclosefrom_np)") }
        _ = addCloseFrom(&actions, Int32(3 + self.passing.count))

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Signals the parent ignores or blocks are not the child's business.
        var signals = sigset_t()
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        var flags = Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        if self.ownProcessGroup {
            flags |= Int16(POSIX_SPAWN_SETPGROUP)
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, flags)

        let argv = [self.executable] + self.arguments
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        var cEnv = self.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for entry in cEnv { free(entry) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, self.executable, &actions, &attributes, &cArgs, &cEnv)
        guard result == 0 else { throw SpawnError("cannot start \(self.executable): \(String(cString: strerror(result)))") }
        return pid
    }

    private static func place(_ stream: Stream, at target: Int32, readOnly: Bool, _ actions: inout posix_spawn_file_actions_t) {
        switch stream {
        case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", readOnly ? O_RDONLY : O_WRONLY, 0)
        case .file(let path): posix_spawn_file_actions_addopen(&actions, target, path, readOnly ? O_RDONLY : O_WRONLY | O_CREAT | O_APPEND, 0o644)
        case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
        }
    }
}

public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module
/// does not import; looked up once at run time.
private let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32)? =
    dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self)
    }

/// A child's exit status, reaped without blocking.
public enum ChildExit {
    /// The exit status (or 128 + signal), or nil while it still runs.
    public static func poll(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        return Self.decode(status)
    }

    /// Blocks the calling thread until `pid` exits; its exit status (or 128 + signal).
    /// For synchronous callers only: an async one uses ``wait(_:timeout:)``.
    public static func block(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { return -1 }
        }
        return Self.decode(status)
    }

    /// A `waitpid` status as an exit status, 128 + the signal for a killed process.
    public static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
