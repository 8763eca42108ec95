import Foundation
import Glibc

/// Where a phase's CPU went: the frames with the most samples of their own (perf's
/// "self"), as `perf report` gives them, Swift names demangled.
struct PhaseProfile: Codable {
    struct Frame: Codable {
        var percent: Double
        var process: String
        var symbol: String
    }

    var benchmark: String
    var phase: String
    var samples: Int
    /// The full report (self, then with callees), beside BENCHMARKS.md.
    var file: String
    var top: [Frame]
}

/// Records `perf record -e cpu-clock -g` profiles of the processes a benchmark runs, for
/// its hottest phases only (`--profile DIR`): perf starts disabled, is enabled through its
/// control FIFO just before the phase and stopped right after it, so that the profile
/// holds the phase and nothing else.
final class Profiler {
    let directory: String
    let benchmark: String
    private(set) var profiles: [PhaseProfile] = []

    init(directory: String, benchmark: String) throws {
        self.directory = directory
        self.benchmark = benchmark
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard Tools.path("perf") != nil else {
            throw BenchError("--profile needs perf (Debian: apt install linux-perf)")
        }
    }

    /// Where a benchmark's profiles are listed for `all`.
    static func listing(directory: String, benchmark: String) -> String { directory + "/\(benchmark).profiles.json" }

    /// Runs `body` while perf samples `processes` (name and pid each).
    func phase<T>(_ phase: String, _ processes: [(name: String, pid: Int32)], _ body: () async throws -> T) async throws -> T {
        let slug = phase.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" }.reduce(into: "") { text, c in
            if c != "-" || text.last != "-" { text.append(c) }
        }
        let base = self.directory + "/\(self.benchmark)-\(slug)"
        let control = base + ".ctl", ack = base + ".ack", data = base + ".perf.data"
        for fifo in [control, ack] {
            unlink(fifo)
            guard mkfifo(fifo, 0o600) == 0 else { throw BenchError("cannot make the FIFO \(fifo): \(String(cString: strerror(errno)))") }
        }
        defer { unlink(control); unlink(ack) }
        let perf = Process()
        perf.executableURL = URL(fileURLWithPath: Tools.path("perf")!)
        perf.arguments = ["record", "-q", "-e", "cpu-clock", "-g", "-D", "-1", "--control", "fifo:\(control),\(ack)",
                          "-p", processes.map { String($0.pid) }.joined(separator: ","), "-o", data]
        let errors = Pipe()
        perf.standardError = errors
        try Interruption.run(perf)
        try Self.command(control, ack, "enable", perf: perf, errors: errors)
        say("  profiling \(phase) (\(processes.map(\.name).joined(separator: ", ")))")
        let value = try await body()
        try? Self.command(control, ack, "disable", perf: perf, errors: errors)
        try? Self.command(control, nil, "stop", perf: perf, errors: errors)
        Interruption.wait(perf)
        let report = try self.report(data: data, file: base + ".txt", phase: phase)
        self.profiles.append(report)
        try JSONEncoder().encode(self.profiles).write(to: URL(fileURLWithPath: Self.listing(directory: self.directory, benchmark: self.benchmark)))
        return value
    }

    /// Sends perf one control command and, with `ack`, waits for its acknowledgement.
    private static func command(_ control: String, _ ack: String?, _ command: String, perf: Process, errors: Pipe) throws {
        // perf opens both FIFOs when it starts; until then a non-blocking open for writing fails.
        let deadline = ContinuousClock.now + .seconds(20)
        var fd: Int32 = -1
        while fd < 0 {
            fd = open(control, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { break }
            guard perf.isRunning, ContinuousClock.now < deadline else {
                let said = String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self)
                throw BenchError("perf did not start: \(said.isEmpty ? "no word from it" : said)")
            }
            usleep(10_000)
        }
        defer { close(fd) }
        let line = Array((command + "\n").utf8)
        guard write(fd, line, line.count) == line.count else { throw BenchError("cannot write to perf's control FIFO") }
        guard let ack else { return }
        let reader = open(ack, O_RDONLY)
        guard reader >= 0 else { throw BenchError("cannot open perf's acknowledgement FIFO") }
        defer { close(reader) }
        var buffer = [UInt8](repeating: 0, count: 16)
        _ = read(reader, &buffer, buffer.count)
    }

    /// `perf report`'s top frames by samples of their own, and with their callees.
    private func report(data: String, file: String, phase: String) throws -> PhaseProfile {
        // By binary (the service's program, a library, the kernel) and function.
        let own = try Self.perf(["report", "-i", data, "--stdio", "-q", "--no-children", "--sort", "dso,sym", "-g", "none", "--percent-limit", "0.5"])
        let inclusive = try Self.perf(["report", "-i", data, "--stdio", "-q", "--children", "--sort", "dso,sym", "-g", "none", "--percent-limit", "2"])
        let samples = try Self.perf(["report", "-i", data, "--stdio", "-q", "--no-children", "--sort", "dso", "-g", "none", "--show-nr-samples"])
            .split(separator: "\n").compactMap { line in line.split(separator: " ").dropFirst().first.flatMap { Int($0) } }.reduce(0, +)
        let ownText = Self.demangle(own)
        let text = "# \(self.benchmark): \(phase)\n# perf record -e cpu-clock -g; \(samples) samples\n\n## Self\n\n"
            + ownText + "\n## With callees (children)\n\n" + Self.demangle(inclusive)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return PhaseProfile(benchmark: self.benchmark, phase: phase, samples: samples, file: (file as NSString).lastPathComponent, top: Array(Self.frames(ownText).prefix(12)))
    }

    /// `12.34%  screentime-stor  [.] symbol` lines.
    static func frames(_ report: String) -> [PhaseProfile.Frame] {
        report.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
            guard parts.count == 4, parts[0].hasSuffix("%"), let percent = Double(parts[0].dropLast()) else { return nil }
            return PhaseProfile.Frame(percent: percent, process: String(parts[1]), symbol: String(parts[3]).trimmingCharacters(in: .whitespaces))
        }
    }

    /// Swift's mangled names made readable (`swift-demangle --simplified`), where the tool is.
    static func demangle(_ text: String) -> String {
        guard let tool = Tools.path("swift-demangle"), let demangled = try? Tools.output(tool, ["--simplified"], input: text), demangled.status == 0 else { return text }
        return demangled.text
    }

    /// What `perf` writes to its standard output.
    static func perf(_ arguments: [String]) throws -> String {
        try Tools.output(Tools.path("perf") ?? "/usr/bin/perf", arguments).text
    }
}

extension BenchServices {
    /// Runs `body` as a profiled phase of `services` when the run profiles (`--profile`), else just runs it.
    func phase<T>(_ phase: String, _ services: [LaunchedService], _ body: () async throws -> T) async throws -> T {
        guard let profiler = self.profiler else { return try await body() }
        return try await profiler.phase(phase, services.map { ($0.name, $0.process.processIdentifier) }, body)
    }
}
