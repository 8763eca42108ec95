import Foundation
import RPCCore

/// Latency samples and their percentiles.
struct Samples {
    private(set) var values: [Double] = []

    mutating func add(_ duration: Duration) {
        self.values.append(duration.seconds * 1e6)
    }

    mutating func merge(_ other: Samples) { self.values += other.values }

    func percentile(_ p: Double) -> Double {
        guard !self.values.isEmpty else { return .nan }
        let sorted = self.values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p / 100))]
    }

    var p50: Double { self.percentile(50) }
    var p99: Double { self.percentile(99) }
}

/// One line of the report: a figure, and what it is compared with.
struct Figure: Codable {
    var name: String
    var value: Double
    var unit: String
    var comparison: String?
    var comparisonValue: Double?
    /// value / comparison, oriented so that bigger is better for the service.
    var ratio: Double?
    var target: String?
    var met: Bool?
}

enum Report {
    static func print(_ title: String, _ figures: [Figure]) {
        say("\n\(title)")
        say(String(repeating: "=", count: title.count))
        for figure in figures {
            var line = "\(figure.name.padding(toLength: 44, withPad: " ", startingAt: 0)) \(format(figure.value)) \(figure.unit)"
            if let comparison = figure.comparison, let value = figure.comparisonValue {
                line = line.padding(toLength: 70, withPad: " ", startingAt: 0) + "  vs \(comparison): \(format(value))"
            }
            if let ratio = figure.ratio { line += String(format: "  (%.2fx)", ratio) }
            if let target = figure.target, let met = figure.met { line += "  target \(target): \(met ? "met" : "NOT met")" }
            say(line)
        }
    }

    static func writeJSON(_ figures: [Figure], to path: String) throws {
        try self.encoder.encode(figures).write(to: URL(fileURLWithPath: path))
    }

    /// JSON of figures; a figure that could not be measured is "nan".
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return decoder
    }

    static func format(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value)
    }
}

/// Where the package's files and built binaries are.
enum Locations {
    static var binDirectory: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
    }

    /// This executable (the floor servers it can also be).
    static var thisExecutable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }

    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }
}

/// Prints a line at once, unbuffered, so progress shows also when the output is a pipe.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Runs `body` on every item, at most `width` at a time.
func concurrently<T: Sendable>(_ items: [T], width: Int, _ body: @escaping @Sendable (T) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (index, item) in items.enumerated() {
            if index >= width { try await group.next() }
            group.addTask { try await body(item) }
        }
        try await group.waitForAll()
    }
}

/// User and system CPU time of some processes (each name's summed), from /proc/PID/stat.
struct CPUTime {
    let pids: [String: [Int32]]

    func sample() -> [String: Double] {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return self.pids.compactMapValues { pids in
            let seconds = pids.compactMap { pid -> Double? in
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                // After the name: state is field 3, utime 14 and stime 15 (1-based, of the whole line).
                guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
                return (user + system) / ticks
            }
            return seconds.isEmpty ? nil : seconds.reduce(0, +)
        }
    }

    /// Milliseconds of CPU each process spent since `before`, divided by `per`.
    func since(_ before: [String: Double], per count: Int) -> [String: Double] {
        let now = self.sample()
        return now.reduce(into: [:]) { result, entry in
            result[entry.key] = (entry.value - (before[entry.key] ?? entry.value)) * 1000 / Double(max(1, count))
        }
    }
}

/// The whole machine's CPU time, busy and in all, from /proc/stat: how much of the cores a
/// phase left unused (a phase near 100% busy goes faster only with less CPU per unit).
struct MachineCPU {
    let busy: Double
    let all: Double

    static var cores: Int { ProcessInfo.processInfo.activeProcessorCount }

    static func sample() -> MachineCPU {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return MachineCPU(busy: .nan, all: .nan) }
        // user nice system idle iowait irq softirq steal (guest time is counted in user).
        let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { Double($0) }
        guard ticks.count == 8 else { return MachineCPU(busy: .nan, all: .nan) }
        let idle = ticks[3] + ticks[4]
        return MachineCPU(busy: ticks.reduce(0, +) - idle, all: ticks.reduce(0, +))
    }

    /// The share of the machine's CPU time busy since `before`, in percent.
    func busyPercent(since before: MachineCPU) -> Double {
        (self.busy - before.busy) * 100 / max(1, self.all - before.all)
    }
}
