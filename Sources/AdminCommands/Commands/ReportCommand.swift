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
