import ArgumentParser
import Dispatch
import Foundation
import RPCClient
import RPCCore
import Synchronization

/// A service binary started for a benchmark, killed when the benchmark ends.
final class LaunchedService {
    let process = Process()
    let name: String

    /// Starts `name` from `binDirectory` with its runtime and state directories in `work`.
    init(_ name: String, binDirectory: String?, work: String, arguments: [String] = []) throws {
        self.name = name
        let binary = (binDirectory ?? Locations.binDirectory) + "/" + name
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("\(binary) not found; build with deploy/build-release.sh screentime-bench first, or pass --bin-dir")
        }
        self.process.executableURL = URL(fileURLWithPath: binary)
        self.process.arguments = ["--runtime-dir", work, "--state-dir", work + "/state", "--log-level", ProcessInfo.processInfo.environment["BENCH_LOG_LEVEL"] ?? "warning", "--log-target", "stderr"] + arguments
        try Interruption.run(self.process)
        say("\(name) \(binary), pid \(self.process.processIdentifier)")
    }

    /// Kills the service and reaps it; nothing if it has ended already.
    func kill() {
        guard self.process.isRunning else {
            Interruption.untrack(self.process.processIdentifier)
            return
        }
        Interruption.kill(self.process)
    }
}

/// The services of one benchmark run: launched in one work directory and killed together
/// when the run ends (the last launched first), the directory then removed unless it was given.
final class BenchServices {
    let directory: WorkDirectory
    private let binDirectory: String?
    private var launched: [LaunchedService] = []
    /// Set when the run profiles its hottest phases (`--profile`).
    let profiler: Profiler?

    var work: String { self.directory.path }

    /// `benchmark`: the benchmark's name, for a run that profiles (its profiles are named after it).
    init(_ common: CommonOptions, benchmark: String? = nil) throws {
        self.directory = try WorkDirectory(common.workDirectory)
        self.binDirectory = common.binDirectory
        self.profiler = try common.profile.flatMap { directory in try benchmark.map { try Profiler(directory: directory, benchmark: $0) } }
    }

    /// Starts `name` (`screentime-stored`, …) with its sockets and state in the work directory;
    /// from `binDirectory` when given, else from the run's.
    @discardableResult
    func launch(_ name: String, _ arguments: [String] = [], from binDirectory: String? = nil) throws -> LaunchedService {
        let service = try LaunchedService(name, binDirectory: binDirectory ?? self.binDirectory, work: self.work, arguments: arguments)
        self.launched.append(service)
        return service
    }

    /// The socket of `service` (`store`, `push`, …) in the work directory.
    func socket(_ service: String) -> String { self.work + "/\(service).sock" }

    /// A client of `service`'s socket: local, or a device's with `auth`.
    func client(_ service: String, callTimeout: Duration = .seconds(120), auth: Auth? = nil) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(socketPath: self.socket(service), callTimeout: callTimeout, connectTimeout: .seconds(10), auth: auth))
    }

    func stop() {
        for service in self.launched.reversed() { service.kill() }
        self.directory.removeUnlessKept()
    }
}

/// Ctrl-C or SIGTERM during a benchmark stops the processes it started, which would
/// otherwise outlive it (a `defer` does not run when a signal ends the process): each gets
/// the signal it was registered with (SIGKILL, or SIGQUIT for a PostgreSQL server, whose
/// immediate shutdown also ends its backends and frees its shared memory).
enum Interruption {
    /// The processes started, each with the signal that stops it on an interruption.
    static let launched = Mutex<[Int32: Int32]>([:])
    private static let sources = Mutex<[any DispatchSourceSignal]>([])

    /// Starts `process`; an interruption kills it.
    static func run(_ process: Process) throws {
        self.installOnce()
        try process.run()
        self.track(process.processIdentifier)
    }

    /// Registers a process started otherwise (``ProcessSpawn/Spawn``): an interruption
    /// sends it `signal`.
    static func track(_ pid: Int32, signal: Int32 = SIGKILL) {
        self.installOnce()
        self.launched.withLock { $0[pid] = signal }
    }

    /// Forgets a process that has ended (reaped by its owner).
    static func untrack(_ pid: Int32) {
        _ = self.launched.withLock { $0.removeValue(forKey: pid) }
    }

    /// Waits for a process started with ``run(_:)`` to end by itself.
    static func wait(_ process: Process) {
        process.waitUntilExit()
        self.untrack(process.processIdentifier)
    }

    /// Kills a process started with ``run(_:)`` and reaps it.
    static func kill(_ process: Process) {
        Foundation.kill(process.processIdentifier, SIGKILL)
        self.wait(process)
    }

    private static func installOnce() {
        sources.withLock { sources in
            guard sources.isEmpty else { return }
            for number in [SIGINT, SIGTERM] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler {
                    for (pid, signal) in launched.withLock({ $0 }) { Foundation.kill(pid, signal) }
                    say("interrupted; the services started were stopped")
                    exit(130)
                }
                source.resume()
                sources.append(source)
            }
        }
    }
}

/// A work directory for a benchmark: the one given (kept), or a temporary one (removed).
struct WorkDirectory {
    let path: String
    let keep: Bool

    init(_ given: String?) throws {
        self.path = given ?? FileManager.default.temporaryDirectory.appendingPathComponent("st-bench-\(getpid())").path
        self.keep = given != nil
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    func removeUnlessKept() {
        if !self.keep { try? FileManager.default.removeItem(atPath: self.path) }
    }
}

/// What every benchmark takes.
struct CommonOptions: ParsableArguments {
    @Flag(help: "A short run that only proves the benchmark works (CI); figures are rough.")
    var quick = false

    @Option(help: ArgumentHelp("Also write the figures as JSON to this file.", valueName: "file"))
    var json: String?

    @Option(name: .customLong("work-dir"), help: "Where the databases go (kept afterwards); default a temporary directory, removed. Put it on the disk you will run on.")
    var workDirectory: String?

    @Option(name: .customLong("bin-dir"), help: "Where the service binaries are (default: beside this executable).")
    var binDirectory: String?

    @Option(help: ArgumentHelp("Record a perf profile (cpu-clock, call graph) of the benchmark's hottest phases into this directory, with their top frames.", valueName: "dir"))
    var profile: String?
}
