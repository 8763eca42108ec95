import ArgumentParser
import Foundation
import SystemdContainer

/// Every benchmark, repeated, as subprocesses of this executable (each starts and stops
/// its own services); the figures' medians and spreads written to BENCHMARKS.md, the raw
/// runs to benchmarks.json, the main ratios to benchmarks.svg.
struct AllBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "all",
        abstract: "Run every benchmark --repeat times; write BENCHMARKS.md, benchmarks.json and benchmarks.svg.",
        discussion: """
            Benchmarks/run builds in release mode, installs what is missing (redis, postgresql) and runs this. \
            coldstart needs root and systemd-nspawn, redis needs redis-server and redis-benchmark, postgres PostgreSQL 15 and pgbench: \
            without them they are skipped, and the report says why.
            """
    )

    static let names = ["store", "pairing", "push", "gateway", "kit", "aggregator", "wake", "redis", "postgres", "coldstart"]

    @Option(name: .customLong("repeat"), help: "Runs of each benchmark (median and spread over them).")
    var repetitions = 3

    @Option(name: .customLong("out-dir"), help: "Where BENCHMARKS.md, benchmarks.json and benchmarks.svg go.")
    var outDirectory = "."

    @Option(help: ArgumentHelp("Leave a benchmark out (repeatable): \(names.joined(separator: ", ")).", valueName: "name"))
    var skip: [String] = []

    @Flag(help: "Each benchmark briefly, once unless --repeat says otherwise: proves they all work (CI); the figures are rough.")
    var quick = false

    @Option(name: .customLong("bin-dir"), help: "Where the service binaries are (default: beside this executable).")
    var binDirectory: String?

    @Flag(help: "After the runs of each benchmark, one more with --profile (figures not counted): perf profiles of its hottest phases in <out-dir>/profiles, their top frames in BENCHMARKS.md.")
    var profile = false

    @Option(help: ArgumentHelp("An earlier run's benchmarks.json: the benchmarks left out with --skip keep its results (to run one again and keep the rest).", valueName: "file"))
    var reuse: String?

    func validate() throws {
        guard self.repetitions >= 1 else { throw ValidationError("--repeat must be at least 1") }
        for name in self.skip where !Self.names.contains(name) { throw ValidationError("unknown benchmark \(name); they are \(Self.names.joined(separator: ", "))") }
    }

    func run() async throws {
        let scratch = try WorkDirectory(nil)
        defer { scratch.removeUnlessKept() }
        var results: [BenchmarkResult] = []
        let earlier = try self.reuse.map { try Report.decoder.decode(BenchmarkReport.self, from: Data(contentsOf: URL(fileURLWithPath: $0))) }
        for name in Self.names {
            if self.skip.contains(name) {
                if let earlier, var kept = earlier.benchmarks.first(where: { $0.name == name && $0.skipped == nil }) {
                    kept.reusedFrom = kept.reusedFrom ?? earlier.machine.date
                    results.append(kept)
                } else {
                    results.append(BenchmarkResult(name: name, skipped: "left out (--skip)"))
                }
                continue
            }
            if let reason = Self.unavailable(name) {
                say("\n\(name): skipped: \(reason)")
                results.append(BenchmarkResult(name: name, skipped: reason))
                continue
            }
            var result = BenchmarkResult(name: name)
            for run in 1...self.repetitions {
                say("\n=== \(name), run \(run) of \(self.repetitions)")
                let json = scratch.path + "/\(name)-\(run).json"
                var arguments = [name, "--json", json]
                if self.quick { arguments.append("--quick") }
                if let binDirectory = self.binDirectory { arguments += ["--bin-dir", binDirectory] }
                let status = try Self.runSelf(arguments)
                guard status == 0, let data = FileManager.default.contents(atPath: json) else {
                    result.failures.append("run \(run) exited with status \(status)")
                    continue
                }
                result.runs.append(try Report.decoder.decode([Figure].self, from: data))
            }
            if self.profile {
                say("\n=== \(name), profiled (its figures not counted)")
                let directory = self.outDirectory + "/profiles"
                var arguments = [name, "--profile", directory]
                if self.quick { arguments.append("--quick") }
                if let binDirectory = self.binDirectory { arguments += ["--bin-dir", binDirectory] }
                try? FileManager.default.removeItem(atPath: Profiler.listing(directory: directory, benchmark: name))
                let status = try Self.runSelf(arguments)
                if status != 0 { result.failures.append("the profiled run exited with status \(status)") }
                result.profiles = (try? Data(contentsOf: URL(fileURLWithPath: Profiler.listing(directory: directory, benchmark: name))))
                    .flatMap { try? JSONDecoder().decode([PhaseProfile].self, from: $0) }
            }
            results.append(result)
        }

        let machine = Machine.describe()
        let report = BenchmarkReport(machine: machine, repetitions: self.repetitions, quick: self.quick, benchmarks: results)
        try FileManager.default.createDirectory(atPath: self.outDirectory, withIntermediateDirectories: true)
        try Report.encoder.encode(report).write(to: URL(fileURLWithPath: self.outDirectory + "/benchmarks.json"))
        try report.markdown().write(toFile: self.outDirectory + "/BENCHMARKS.md", atomically: true, encoding: .utf8)
        try RatioChart.svg(report.targets()).write(toFile: self.outDirectory + "/benchmarks.svg", atomically: true, encoding: .utf8)
        say("\nWrote \(self.outDirectory)/BENCHMARKS.md, benchmarks.json and benchmarks.svg")
        let failed = results.filter { !$0.failures.isEmpty }
        if !failed.isEmpty {
            throw BenchError("some runs failed: " + failed.map { "\($0.name): \($0.failures.joined(separator: "; "))" }.joined(separator: ", "))
        }
    }

    /// Why a benchmark cannot run on this machine, or nil.
    static func unavailable(_ name: String) -> String? {
        switch name {
        case "coldstart": return Container.unavailable
        case "redis": return Redis.path("redis-server") == nil || Redis.path("redis-benchmark") == nil ? "redis-server or redis-benchmark is not installed" : nil
        case "postgres": return Postgres.missing
        default: return nil
        }
    }

    /// Runs this executable with other arguments, its output going to ours.
    static func runSelf(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Locations.binDirectory + "/screentime-bench")
        process.arguments = arguments
        try Interruption.run(process)
        Interruption.wait(process)
        return process.terminationStatus
    }
}

/// One benchmark's runs.
struct BenchmarkResult: Codable {
    var name: String
    var skipped: String?
    var runs: [[Figure]] = []
    var failures: [String] = []
    /// When the runs come from an earlier report (`--reuse`): that run's date.
    var reusedFrom: String?
    /// The hottest phases' profiles (`--profile`).
    var profiles: [PhaseProfile]?

    init(name: String, skipped: String? = nil) {
        self.name = name
        self.skipped = skipped
    }

    /// Each figure (by name, in the first run's order) over the runs: the run with the
    /// median value gives the comparison, ratio and verdict, so they belong together.
    func summary() -> [SummaryFigure] {
        guard let first = self.runs.first else { return [] }
        return first.map { figure in
            let all = self.runs.compactMap { run in run.first { $0.name == figure.name } }.filter { $0.value.isFinite }
            let sorted = all.sorted { $0.value < $1.value }
            let median = sorted.isEmpty ? figure : sorted[(sorted.count - 1) / 2]
            return SummaryFigure(figure: median, minimum: sorted.first?.value ?? .nan, maximum: sorted.last?.value ?? .nan, runs: sorted.count)
        }
    }
}

struct SummaryFigure: Codable {
    var figure: Figure
    var minimum: Double
    var maximum: Double
    var runs: Int

    /// `min–max (±x%)` around the median.
    var spread: String {
        guard self.runs > 1 else { return "" }
        let percent = self.figure.value == 0 ? 0 : (self.maximum - self.minimum) / 2 / abs(self.figure.value) * 100
        return "\(Report.format(self.minimum))–\(Report.format(self.maximum)) (±\(String(format: "%.0f", percent))%)"
    }
}

struct Machine: Codable {
    var host: String
    var system: String
    var cpu: String
    var cores: Int
    var memoryGiB: Double
    var date: String
    /// The commit measured (`abc1234`, `abc1234 with local changes`), when run from a git checkout.
    var source: String?

    static func describe() -> Machine {
        let cpu = ((try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? "").split(separator: "\n")
            .first { $0.hasPrefix("model name") }.map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? "?"
        var name = utsname()
        uname(&name)
        func text<T>(_ field: T) -> String { withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) } }
        return Machine(host: ProcessInfo.processInfo.hostName, system: "\(text(name.sysname)) \(text(name.release)) \(text(name.machine))", cpu: cpu,
                       cores: ProcessInfo.processInfo.activeProcessorCount, memoryGiB: Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824,
                       date: Date().formatted(.iso8601), source: Self.sourceRevision())
    }

    private static func sourceRevision() -> String? {
        func git(_ arguments: [String]) -> String? {
            guard let git = Tools.path("git"), let run = try? Tools.output(git, ["-C", Locations.packageRoot] + arguments), run.status == 0 else { return nil }
            return run.text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let commit = git(["rev-parse", "--short", "HEAD"]), !commit.isEmpty else { return nil }
        let changed = !(git(["status", "--porcelain", "--untracked-files=no"]) ?? "").isEmpty
        return changed ? "\(commit) with local changes" : commit
    }
}

struct BenchmarkReport: Codable {
    var machine: Machine
    var repetitions: Int
    var quick: Bool
    var benchmarks: [BenchmarkResult]

    /// The figures that have a target, each with its verdict.
    func targets() -> [(benchmark: String, summary: SummaryFigure)] {
        self.benchmarks.flatMap { result in result.summary().filter { $0.figure.target != nil }.map { (result.name, $0) } }
    }

    func markdown() -> String {
        var lines = [
            "# Benchmarks",
            "",
            "Measured with `Benchmarks/run\(self.quick ? " --quick" : "")` on \(self.machine.date)\(self.machine.source.map { " (commit \($0))" } ?? ""): \(self.machine.cpu), \(self.machine.cores) cores, "
                + String(format: "%.0f GiB", self.machine.memoryGiB) + ", \(self.machine.system). Each figure is the median of \(self.repetitions) run\(self.repetitions == 1 ? "" : "s")"
                + (self.repetitions > 1 ? ", with the spread (lowest–highest)" : "") + "; every comparison was measured in the same run on the same machine.",
            self.quick ? "\n**Quick mode**: each benchmark ran briefly to prove it works; these figures are rough." : "",
            "",
            "## Targets",
            "",
            "| Benchmark | Figure | Median | Comparison | Ratio | Target | |",
            "| --- | --- | ---: | --- | ---: | --- | --- |",
        ]
        for (benchmark, summary) in self.targets() {
            let figure = summary.figure
            lines.append("| \(benchmark) | \(figure.name.trimmingCharacters(in: .whitespaces)) | \(Report.format(figure.value)) \(figure.unit) | "
                + "\(figure.comparison.map { "\($0): \(figure.comparisonValue.map(Report.format) ?? "")" } ?? "") | \(figure.ratio.map { String(format: "%.2fx", $0) } ?? "") | "
                + "\(figure.target ?? "") | \(figure.met == true ? "met" : "**not met**") |")
        }
        lines += ["", "![The main ratios](benchmarks.svg)", ""]
        for result in self.benchmarks {
            lines += ["## \(result.name)", ""]
            if let skipped = result.skipped {
                lines += ["Skipped: \(skipped).", ""]
                continue
            }
            if let date = result.reusedFrom { lines += ["From the run of \(date), on the same machine (`--reuse`).", ""] }
            for failure in result.failures { lines.append("- failed: \(failure)") }
            lines += ["| Figure | Median | Spread | Comparison | Ratio | Target |", "| --- | ---: | --- | --- | ---: | --- |"]
            for summary in result.summary() {
                let figure = summary.figure
                lines.append("| \(figure.name.trimmingCharacters(in: .whitespaces)) | \(Report.format(figure.value)) \(figure.unit) | \(summary.spread) | "
                    + "\(figure.comparison.map { "\($0): \(figure.comparisonValue.map(Report.format) ?? "")" } ?? "") | \(figure.ratio.map { String(format: "%.2fx", $0) } ?? "") | "
                    + "\(figure.target.map { "\($0): \(figure.met == true ? "met" : "not met")" } ?? "") |")
            }
            lines.append("")
            for profile in result.profiles ?? [] {
                guard profile.samples > 0 else {
                    lines += ["Where the time goes: \(profile.phase): perf took no samples in its run (a phase shorter than perf took to start sampling); run it again with `--profile`.", ""]
                    continue
                }
                lines += ["Where the time goes: \(profile.phase) (`perf record -e cpu-clock -g`, \(profile.samples) samples, a run of its own; "
                    + "the functions with the most samples of their own; all of it, with callees, in profiles/\(profile.file)):", "",
                    "| Self | Process | Function |", "| ---: | --- | --- |"]
                for frame in profile.top {
                    let symbol = frame.symbol.count > 150 ? String(frame.symbol.prefix(150)) + "…" : frame.symbol
                    lines.append("| \(String(format: "%.1f%%", frame.percent)) | \(frame.process) | `\(symbol.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "`", with: "'"))` |")
                }
                lines.append("")
            }
        }
        lines += ["How each benchmark works and what its comparison is: docs/operations.md, \"Benchmarks\".", ""]
        // Figures measured by other means (the fuzzer's runs) and the history of changes, kept
        // as written in Benchmarks/notes/, in name order: a new run keeps them.
        let notes = URL(fileURLWithPath: "Benchmarks/notes")
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: notes.path)) ?? []).filter({ $0.hasSuffix(".md") }).sorted() {
            if let text = try? String(contentsOf: notes.appendingPathComponent(name), encoding: .utf8) { lines += [text] }
        }
        return lines.joined(separator: "\n")
    }
}

/// The ratios of the figures with a ratio target, as horizontal bars on a log scale,
/// each with its target marked: green where met, red where not.
enum RatioChart {
    static func svg(_ targets: [(benchmark: String, summary: SummaryFigure)]) -> String {
        let rows = targets.compactMap { item -> (label: String, ratio: Double, target: Double, met: Bool)? in
            let figure = item.summary.figure
            guard let ratio = figure.ratio, ratio.isFinite, ratio > 0, let target = figure.target, target.hasSuffix("x"),
                  let threshold = Double(target.filter { $0.isNumber || $0 == "." }) else { return nil }
            return ("\(item.benchmark): \(figure.name.trimmingCharacters(in: .whitespaces))", ratio, threshold, figure.met == true)
        }
        let width = 900.0, labelWidth = 420.0, rowHeight = 26.0, top = 40.0
        let height = top + Double(max(rows.count, 1)) * rowHeight + 40
        // log10 scale from 0.01x to 100x.
        let x = { (ratio: Double) -> Double in labelWidth + (log10(min(max(ratio, 0.01), 100)) + 2) / 4 * (width - labelWidth - 20) }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="20" font-size="14" font-weight="bold">Ratios to the comparison measured in the same run (log scale); the tick is the target</text>

            """
        for tick in [0.01, 0.1, 1.0, 10.0, 100.0] {
            svg += "<line x1=\"\(x(tick))\" y1=\"\(top - 5)\" x2=\"\(x(tick))\" y2=\"\(height - 30)\" stroke=\"#ddd\"/>"
            svg += "<text x=\"\(x(tick))\" y=\"\(height - 15)\" text-anchor=\"middle\" fill=\"#666\">\(tick < 1 ? String(tick) : String(Int(tick)))x</text>\n"
        }
        for (index, row) in rows.enumerated() {
            let y = top + Double(index) * rowHeight
            svg += "<text x=\"\(labelWidth - 8)\" y=\"\(y + 16)\" text-anchor=\"end\">\(Self.escape(row.label))</text>"
            svg += "<rect x=\"\(x(0.01))\" y=\"\(y + 5)\" width=\"\(max(1, x(row.ratio) - x(0.01)))\" height=\"14\" fill=\"\(row.met ? "#3a9a4a" : "#c94040")\"/>"
            svg += "<line x1=\"\(x(row.target))\" y1=\"\(y + 2)\" x2=\"\(x(row.target))\" y2=\"\(y + 22)\" stroke=\"black\" stroke-width=\"2\"/>"
            svg += "<text x=\"\(x(row.ratio) + 4)\" y=\"\(y + 16)\">\(String(format: "%.2fx", row.ratio))</text>\n"
        }
        return svg + "</svg>\n"
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
