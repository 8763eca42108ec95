import AggregatorAPI
import ArgumentParser
import Foundation
import RPCCore

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Print a child's or a device's learning and reward time as a table; optionally write a chart (SVG) and the CSV.",
        discussion: """
            Examples:
              screentimectl report --family smith --child emma --from 2026-11-01 --to 2026-11-30
              screentimectl report --profile mum --child emma --from 2026-09-01 --to 2026-11-30 --by week --svg emma.svg
              screentimectl report --profile mum --child emma          (the last 7 days)
            As the server's administrator give --family; as a parent's device give --profile (or --token).
            """
    )

    @OptionGroup var device: DeviceOptions
    var connection: ConnectionOptions { self.device.connection }

    @Option(help: "The family (local administration; a parent's profile or --token implies it).") var family: String?
    @Option(help: "The child's id, as paired (all the child's devices).") var child: String?
    @Option(name: .customLong("device"), help: "One device instead of a child.") var deviceId: String?
    @Option(help: "First local day, YYYY-MM-DD (default: 6 days before --to).") var from: String?
    @Option(help: "Last local day, YYYY-MM-DD, included (default: today).") var to: String?
    @Option(help: "day or week.") var by: ReportPeriod = .day
    @Option(help: ArgumentHelp("Also write a chart of learning vs reward time per period.", valueName: "file.svg")) var svg: String?
    @Option(help: ArgumentHelp("Also write the CSV export (one line per device, day and app).", valueName: "file.csv")) var csv: String?
    @Flag(help: "Print the report as JSON instead of a table.") var json = false

    func validate() throws {
        guard (self.child == nil) != (self.deviceId == nil) else { throw ValidationError("give exactly one of --child and --device") }
    }

    func run() async throws {
        let usesProfile = self.device.profileName != nil || ProcessInfo.processInfo.environment["SCREENTIME_PROFILE"].map { !$0.isEmpty } == true
        let client = try await Output.orExit {
            usesProfile ? try self.device.device(.parent).aggregator
                : DeviceLink.open(self.connection, target: nil, token: self.connection.token ?? ProcessInfo.processInfo.environment["SCREENTIME_TOKEN"])
        }
        let to = self.to ?? LocalDay.today()
        let from = try self.from ?? LocalDay.adding(-6, to: to)
        let params = ReportParams(family: self.family, child: self.child, deviceId: self.deviceId, from: from, to: to, by: self.by)
        let report = try await Output.orExit { try await client.call(AggregatorMethods.report, params) }
        if let svg = self.svg { try Self.write(ReportChart.svg(report), to: svg) }
        if let csv = self.csv {
            let export = try await Output.orExit { try await client.call(AggregatorMethods.exportCSV, params) }
            try Self.write(export.csv, to: csv)
        }
        if self.json {
            Output.print(try JSONDecoder().decode(JSONValue.self, from: RPCJSON.makeEncoder().encode(report)), pretty: self.connection.prettyOutput)
        } else {
            print(ReportTable.text(report), terminator: "")
        }
    }

    static func write(_ text: String, to path: String) throws {
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        } catch {
            Output.fail("screentimectl: cannot_write: cannot write \(path): \(error.localizedDescription)", exitCode: 73)
        }
    }
}

extension ReportPeriod: ExpressibleByArgument {}

/// The report as a table for a terminal.
enum ReportTable {
    static func text(_ report: Report) -> String {
        let who = report.child.map { "child \($0)" } ?? "device \(report.deviceId ?? "")"
        var lines = ["\(report.family), \(who): \(report.from) to \(report.to), by \(report.by.rawValue) (\(report.timeZone))", ""]
        let rows = report.rows.map { row in
            [row.period, Self.time(row.learningSeconds), Self.time(row.rewardSeconds), String(row.points),
             row.topApps.first.map { "\($0.app) (\(Self.time($0.seconds)))" } ?? ""]
        }
        let totals = ["Total", Self.time(report.learningSeconds), Self.time(report.rewardSeconds), String(report.points),
                      report.topApps.first.map { "\($0.app) (\(Self.time($0.seconds)))" } ?? ""]
        lines.append(Table.render(["Period", "Learning", "Reward", "Points", "Top app"], rows, rightAligned: [1, 2, 3], totals: totals))
        return lines.joined(separator: "\n")
    }

    static func time(_ seconds: Int64) -> String { Table.time(seconds) }
}

/// Learning vs reward time per period, as grouped bars, in SVG.
enum ReportChart {
    static func svg(_ report: Report) -> String {
        let rows = report.rows
        let left = 56.0, top = 40.0, bottom = 64.0, right = 16.0
        let slot = max(14.0, min(48.0, 900.0 / Double(max(rows.count, 1))))
        let plotWidth = slot * Double(rows.count), plotHeight = 240.0
        let width = left + plotWidth + right, height = top + plotHeight + bottom
        let most = max(rows.map { max($0.learningSeconds, $0.rewardSeconds) }.max() ?? 0, 60)
        let step = Self.niceStep(Double(most) / 60 / 4)  // minutes per gridline
        let scaleTop = step * ceil(Double(most) / 60 / step)
        let y = { (seconds: Int64) in top + plotHeight - Double(seconds) / 60 / scaleTop * plotHeight }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="11">
            <title>\(Self.escape("Learning and reward time, \(report.from) to \(report.to)"))</title>
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="18" font-size="13" font-weight="bold">\(Self.escape("\(report.child.map { "Child \($0)" } ?? "Device \(report.deviceId ?? "")"): learning vs reward, by \(report.by.rawValue)"))</text>
            <rect x="\(Int(width) - 170)" y="8" width="10" height="10" fill="#2e7d32"/><text x="\(Int(width) - 156)" y="17">learning</text>
            <rect x="\(Int(width) - 96)" y="8" width="10" height="10" fill="#ef6c00"/><text x="\(Int(width) - 82)" y="17">reward</text>

            """
        var mark = 0.0
        while mark <= scaleTop + 0.001 {
            let lineY = y(Int64(mark * 60))
            svg += "<line x1=\"\(left)\" y1=\"\(Self.f(lineY))\" x2=\"\(Self.f(left + plotWidth))\" y2=\"\(Self.f(lineY))\" stroke=\"#ddd\"/>"
            svg += "<text x=\"\(Self.f(left - 6))\" y=\"\(Self.f(lineY + 4))\" text-anchor=\"end\">\(Self.minutesLabel(mark))</text>\n"
            mark += step
        }
        let labelEvery = max(1, Int(ceil(Double(rows.count) / 16)))
        for (index, row) in rows.enumerated() {
            let x = left + Double(index) * slot
            let bar = slot * 0.36
            for (offset, seconds, color) in [(slot * 0.12, row.learningSeconds, "#2e7d32"), (slot * 0.52, row.rewardSeconds, "#ef6c00")] where seconds > 0 {
                svg += "<rect x=\"\(Self.f(x + offset))\" y=\"\(Self.f(y(seconds)))\" width=\"\(Self.f(bar))\" height=\"\(Self.f(top + plotHeight - y(seconds)))\" fill=\"\(color)\"><title>\(row.period): \(ReportTable.time(seconds))</title></rect>"
            }
            if index % labelEvery == 0 {
                let labelX = x + slot / 2, labelY = top + plotHeight + 12
                svg += "<text x=\"\(Self.f(labelX))\" y=\"\(Self.f(labelY))\" text-anchor=\"end\" transform=\"rotate(-45 \(Self.f(labelX)) \(Self.f(labelY)))\">\(row.period)</text>"
            }
            svg += "\n"
        }
        svg += "<line x1=\"\(left)\" y1=\"\(Self.f(top + plotHeight))\" x2=\"\(Self.f(left + plotWidth))\" y2=\"\(Self.f(top + plotHeight))\" stroke=\"#333\"/>\n</svg>\n"
        return svg
    }

    /// 1, 2 or 5 times a power of ten, at least `raw`.
    static func niceStep(_ raw: Double) -> Double {
        let power = pow(10, floor(log10(max(raw, 1))))
        return [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= raw } ?? 10 * power
    }

    static func minutesLabel(_ minutes: Double) -> String {
        minutes >= 60 && minutes.truncatingRemainder(dividingBy: 60) == 0 ? "\(Int(minutes / 60))h" : "\(Int(minutes))m"
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
