import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator: reports, CSV export, screentimectl report", .serialized)
struct ReportTests {
    /// Three days of usage in the week of Monday 16 November 2026, and one the week after.
    static func week(_ stack: AggregatorStack) async throws {
        try await stack.session("k1", app: "org.khan", from: stack.at("2026-11-16 08:00"), to: stack.at("2026-11-16 09:00"))
        try await stack.session("d1", app: "com.duolingo", from: stack.at("2026-11-16 18:00"), to: stack.at("2026-11-16 18:20"))
        try await stack.session("r1", app: "com.roblox", category: "reward", from: stack.at("2026-11-17 17:00"), to: stack.at("2026-11-17 17:30"))
        try await stack.session("k2", app: "org.khan", from: stack.at("2026-11-19 08:00"), to: stack.at("2026-11-19 08:30"))
        try await stack.session("k3", app: "org.khan", from: stack.at("2026-11-23 08:00"), to: stack.at("2026-11-23 08:10"))
        try await stack.settle(sessions: 5)
    }

    @Test("a child's report by day lists every day of the range, empty ones too, with totals and top apps; by week sums Monday to Sunday")
    func report() async throws {
        try await AggregatorStack.inProcess { stack in
            try await Self.week(stack)
            let byDay = try await stack.local.call(AggregatorMethods.report, ReportParams(family: "smith", child: "emma", from: "2026-11-15", to: "2026-11-19"))
            #expect(byDay.timeZone == "Europe/Paris" && byDay.rows.map(\.period) == ["2026-11-15", "2026-11-16", "2026-11-17", "2026-11-18", "2026-11-19"])
            #expect(byDay.rows.map(\.learningSeconds) == [0, 4800, 0, 0, 1800])
            #expect(byDay.rows.map(\.rewardSeconds) == [0, 0, 1800, 0, 0])
            #expect(byDay.rows[1].topApps.map(\.app) == ["org.khan", "com.duolingo"])
            #expect(byDay.learningSeconds == 6600 && byDay.rewardSeconds == 1800 && byDay.points == 110)
            #expect(byDay.topApps.map(\.app) == ["org.khan", "com.roblox", "com.duolingo"] && byDay.topApps[0].seconds == 5400)

            let byWeek = try await stack.local.call(AggregatorMethods.report, ReportParams(family: "smith", child: "emma", from: "2026-11-16", to: "2026-11-29", by: .week))
            #expect(byWeek.rows.map(\.period) == ["2026-11-16", "2026-11-23"])
            #expect(byWeek.rows.map(\.learningSeconds) == [6600, 600] && byWeek.rows.map(\.points) == [110, 10])

            // One device, asked by a parent with their own credential.
            let parent = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: stack.family.parentCredential.token)))
            let device = try await parent.call(AggregatorMethods.report, ReportParams(deviceId: stack.child.deviceId, from: "2026-11-16", to: "2026-11-16"))
            #expect(device.family == "smith" && device.rows.first?.learningSeconds == 4800)
        }
    }

    @Test("the CSV export has a line per device, day and app")
    func csv() async throws {
        try await AggregatorStack.inProcess { stack in
            try await Self.week(stack)
            let export = try await stack.local.call(AggregatorMethods.exportCSV, ReportParams(family: "smith", child: "emma", from: "2026-11-16", to: "2026-11-17"))
            let device = stack.child.deviceId
            #expect(export.csv == """
                date,device_id,app,category,seconds,points,app_name,device_name
                2026-11-16,\(device),org.khan,learning,3600,60,,emma's device
                2026-11-16,\(device),com.duolingo,learning,1200,20,,emma's device
                2026-11-17,\(device),com.roblox,reward,1800,0,,emma's device

                """)
            #expect(export.lines == 3)
        }
    }

    @Test("who may ask, and bad ranges, get clear errors")
    func refusals() async throws {
        try await AggregatorStack.inProcess { stack in
            try await Self.week(stack)
            let childClient = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: stack.child.token)))
            let parent = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: stack.family.parentCredential.token)))
            let good = ReportParams(child: "emma", from: "2026-11-16", to: "2026-11-17")
            await expectError(.forbidden, containing: "for parents") { _ = try await childClient.call(AggregatorMethods.report, good) }
            await expectError(.forbidden, containing: "own family") {
                _ = try await parent.call(AggregatorMethods.report, ReportParams(family: "jones", child: "emma", from: "2026-11-16", to: "2026-11-17"))
            }
            await expectError(.unauthorized) {
                let stranger = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: "not-a-token")))
                _ = try await stranger.call(AggregatorMethods.report, good)
            }
            let bad: [(ReportParams, ErrorCode, String)] = [
                (ReportParams(child: "emma", from: "2026-11-16", to: "2026-11-17"), .invalidParams, "params.family"),
                (ReportParams(family: "smith", from: "2026-11-16", to: "2026-11-17"), .invalidParams, "exactly one of child and deviceId"),
                (ReportParams(family: "smith", child: "emma", deviceId: "x", from: "2026-11-16", to: "2026-11-17"), .invalidParams, "exactly one"),
                (ReportParams(family: "smith", child: "emma", from: "16/11/2026", to: "2026-11-17"), .invalidParams, "params.from"),
                (ReportParams(family: "smith", child: "emma", from: "2026-11-16", to: "2026-02-30"), .invalidParams, "params.to"),
                (ReportParams(family: "smith", child: "emma", from: "2026-11-17", to: "2026-11-16"), .invalidParams, "before params.from"),
                (ReportParams(family: "smith", child: "emma", from: "2025-01-01", to: "2026-11-16"), .invalidParams, "at most 400 days"),
                (ReportParams(family: "smith", child: "noah", from: "2026-11-16", to: "2026-11-17"), .notFound, "no child noah"),
                (ReportParams(family: "smith", deviceId: "ghost", from: "2026-11-16", to: "2026-11-17"), .notFound, "no device ghost"),
            ]
            for (params, code, text) in bad {
                await expectError(code, containing: text) { _ = try await stack.local.call(AggregatorMethods.report, params) }
            }
            _ = try await stack.local.call(Builtin.ping, Empty())
        }
    }

    @Test("screentimectl report prints a table, writes a chart that renders and the CSV, and exits with the documented codes")
    func cli() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        try await Self.week(stack)
        let dir = stack.harness.directory
        let environment = ["SCREENTIME_RUNTIME_DIR": dir.path]
        let ctl = Binaries.path("screentimectl")
        let run = try await runCommand(ctl, ["report", "--family", "smith", "--child", "emma", "--from", "2026-11-15", "--to", "2026-11-19",
                                             "--svg", dir.file("emma.svg"), "--csv", dir.file("emma.csv")], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "smith, child emma: 2026-11-15 to 2026-11-19, by day (Europe/Paris)")
        #expect(lines.contains { $0.hasPrefix("2026-11-16") && $0.contains("1h 20m") && $0.contains("80") && $0.hasSuffix("org.khan (1h 00m)") })
        #expect(lines.contains { $0.hasPrefix("2026-11-17") && $0.contains("30m") })
        #expect(lines.last?.hasPrefix("Total") == true && lines.last?.contains("1h 50m") == true && lines.last?.contains("110") == true)

        let svg = try String(contentsOfFile: dir.file("emma.svg"), encoding: .utf8)
        #expect(svg.contains("<svg") && svg.contains("2026-11-16: 1h 20m") && svg.contains("2026-11-17: 30m"))
        let png = try await runCommand("/usr/bin/rsvg-convert", ["-o", dir.file("emma.png"), dir.file("emma.svg")])
        #expect(png.status == 0, "the chart is an SVG a renderer accepts: \(png.stderr)")
        #expect(try String(contentsOfFile: dir.file("emma.csv"), encoding: .utf8).hasPrefix("date,device_id,app,category,seconds,points,app_name,device_name\n"))

        let weekly = try await runCommand(ctl, ["report", "--family", "smith", "--child", "emma", "--from", "2026-11-16", "--to", "2026-11-29", "--by", "week", "--json", "--compact"], environment: environment)
        let report = try RPCJSON.makeDecoder().decode(Report.self, from: Data(weekly.stdout.utf8))
        #expect(report.rows.map(\.period) == ["2026-11-16", "2026-11-23"])

        let unknown = try await runCommand(ctl, ["report", "--family", "smith", "--child", "noah", "--from", "2026-11-16", "--to", "2026-11-17"], environment: environment)
        #expect(unknown.status == 1 && unknown.stderr.contains("not_found"))
        let neither = try await runCommand(ctl, ["report", "--family", "smith", "--from", "2026-11-16", "--to", "2026-11-17"], environment: environment)
        #expect(neither.status == 64 && neither.stderr.contains("exactly one of --child and --device"))
    }
}
