import AggregatorAPI
import ArgumentParser
import OptionChecks
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import UsageModel

/// A store and an aggregator; children with one device each and a year of usage sessions.
/// Timed: usage records from the first `store.modify` to the aggregator having counted
/// every one and written its summaries back (ingest end to end, beside the store's write
/// rate alone in the same run); a 90-day report of one child; recomputing a child with a
/// year of data.
struct AggregatorBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aggregator",
        abstract: "Benchmarks screentime-aggregatord: usage records ingested per second end to end, 90-day report time, recompute of a year."
    )

    @Option(help: "Children, one device each.")
    var children: Int = 20

    @Option(help: "Usage sessions per child and day.")
    var sessionsPerDay: Int = 14

    @Option(help: "Days of usage per child, ending yesterday.")
    var days: Int = 365

    @Option(help: "Reports timed.")
    var reports: Int = 300

    @OptionGroup var common: CommonOptions

    func validate() throws {
        try checkOption("--children", self.children, in: 1...1000)
        try checkOption("--sessions-per-day", self.sessionsPerDay, in: 1...200)
        try checkOption("--days", self.days, in: 90...1000)
        guard self.reports >= 10 else { throw ValidationError("--reports must be at least 10") }
    }

    static let family = "bench"
    static let timeZone = "Europe/Paris"
    static let batch = 400

    func run() async throws {
        let children = self.common.quick ? 4 : self.children
        let days = self.common.quick ? 120 : self.days
        let perDay = self.common.quick ? 8 : self.sessionsPerDay
        let services = try BenchServices(self.common, benchmark: "aggregator")
        defer { services.stop() }
        let work = services.work
        let store = try services.launch("screentime-stored", ["--wake", "none"])
        // No retention during the run: the year of data must stay in detail.
        let aggregator = try services.launch("screentime-aggregatord", ["--retention-days", "3660", "--push-socket", work + "/no-push.sock"])
        let storeClient = services.client("store")
        let local = services.client("aggregator", callTimeout: .seconds(300))

        let calendar = LocalDays(timeZone: Self.timeZone)!
        let today = calendar.day(containing: Date())
        let first = calendar.day(today, plus: -days)!
        say("\(children) children, \(days) days from \(first), \(perDay) sessions a day: \(children * days * perDay) usage records")
        try await Self.setUp(storeClient, children: children)

        // Every child's sessions, in batches of one zone's consecutive days.
        var batches: [ModifyParams] = []
        for child in 0..<children {
            var saves: [RecordSave] = []
            for offset in 0..<days {
                let day = calendar.day(first, plus: offset)!
                let start = calendar.bounds(of: day)!.start.addingTimeInterval(7 * 3600)
                for index in 0..<perDay {
                    let begin = start.addingTimeInterval(Double(index) * 3600 / Double(max(1, perDay / 12)))
                    let learning = index % 3 != 2
                    saves.append(RecordSave(recordType: RecordTypes.usageRecord, recordName: "u-\(day)-\(index)", fields: [
                        "logicalID": .string(learning ? ["org.khan", "com.duolingo", "org.wikipedia"][index % 3] : "com.roblox"),
                        "category": .string(learning ? "learning" : "reward"), "deviceID": .string(Self.device(child)),
                        "sessionStart": .date(begin), "sessionEnd": .date(begin.addingTimeInterval(Double(300 + (index * 97) % 1200))),
                        "totalSeconds": .int(Int64(300 + (index * 97) % 1200)),
                    ]))
                    if saves.count == Self.batch {
                        batches.append(ModifyParams(family: Self.family, zone: Self.zone(child), saves: saves, savePolicy: .allKeys))
                        saves = []
                    }
                }
            }
            if !saves.isEmpty { batches.append(ModifyParams(family: Self.family, zone: Self.zone(child), saves: saves, savePolicy: .allKeys)) }
        }
        let total = batches.reduce(0) { $0 + ($1.saves?.count ?? 0) }

        // The clients are this process: the saves' encoding and the status polls.
        let cpu = CPUTime(pids: ["store": [store.process.processIdentifier], "aggregator": [aggregator.process.processIdentifier], "clients": [getpid()]])
        let cpuBefore = cpu.sample()
        let machineBefore = MachineCPU.sample()
        let started = ContinuousClock.now
        let (written, ingested) = try await services.phase("usage records written and ingested", [store, aggregator]) {
            try await concurrently(batches, width: 8) { params in
                let result = try await storeClient.call(StoreMethods.modify, params)
                guard result.allSucceeded else { throw BenchError("the store refused usage records: \(result.saved.compactMap(\.error).first.map { "\($0)" } ?? "?")") }
            }
            let written = ContinuousClock.now - started
            say("  store: \(total) written in \(Report.format(written.seconds)) s")
            return (written, try await Self.waitForIngest(of: total, through: local, since: started))
        }
        // Each process's CPU per record over the phase (µs): where the machine's cores went.
        let spent = cpu.since(cpuBefore, per: total).mapValues { $0 * 1000 }
        let busy = MachineCPU.sample().busyPercent(since: machineBefore)
        let ingestRate = Double(total) / ingested.seconds
        let storeRate = Double(total) / written.seconds
        // What the cores allow at these costs: every core busy with nothing but the three.
        let perRecord = ["store", "aggregator", "clients"].reduce(0) { $0 + (spent[$1] ?? .nan) }
        let ceiling = Double(MachineCPU.cores) * 1e6 / perRecord
        say("  aggregator: counted and summaries written after \(Report.format(ingested.seconds)) s; CPU per record: store \(Report.format(spent["store"] ?? .nan)) µs, aggregator \(Report.format(spent["aggregator"] ?? .nan)) µs, clients \(Report.format(spent["clients"] ?? .nan)) µs; the machine \(Report.format(busy))% busy")

        // What SQLite alone does with the store's schema for as many records.
        let floorRate = try StoreSchemaFloor.recordsPerSecond(
            schemaFrom: work + "/state/store.sqlite", path: work + "/schema-floor.sqlite", count: total, batch: Self.batch)
        say("  plain SQLite with the store's schema: \(Int(floorRate)) records/s")

        var figures = [
            Figure(name: "usage records ingested end to end", value: ingestRate, unit: "records/s",
                   comparison: "store.modify alone", comparisonValue: storeRate, ratio: ingestRate / storeRate,
                   target: "≥ 0.95x and ≥ 20000/s", met: ingestRate >= 0.95 * storeRate && ingestRate >= 20_000),
            Figure(name: "plain SQLite, store schema, same records", value: floorRate, unit: "records/s"),
            Figure(name: "  CPU per record end to end, store", value: spent["store"] ?? .nan, unit: "µs"),
            Figure(name: "  CPU per record end to end, aggregator", value: spent["aggregator"] ?? .nan, unit: "µs"),
            Figure(name: "  CPU per record end to end, clients", value: spent["clients"] ?? .nan, unit: "µs"),
            Figure(name: "  the machine's CPU busy, write to ingested", value: busy, unit: "% of \(MachineCPU.cores) cores"),
            Figure(name: "usage records ingested end to end, vs what the cores allow", value: ingestRate, unit: "records/s",
                   comparison: "\(MachineCPU.cores) cores / CPU per record of store, aggregator and clients", comparisonValue: ceiling,
                   ratio: ingestRate / ceiling),
        ]

        // A parent's 90-day report of one child, by day.
        let from = calendar.day(today, plus: -90)!
        let params = ReportParams(family: Self.family, child: Self.child(0), from: from, to: calendar.day(today, plus: -1)!)
        let check = try await local.call(AggregatorMethods.report, params)
        guard check.rows.count == 90, check.learningSeconds > 0 else { throw BenchError("the 90-day report is not what was written: \(check.rows.count) rows") }
        var samples = Samples()
        for _ in 0..<(self.common.quick ? 30 : self.reports) {
            let begin = ContinuousClock.now
            _ = try await local.call(AggregatorMethods.report, params)
            samples.add(ContinuousClock.now - begin)
        }
        figures.append(Figure(name: "90-day report of a child, p50", value: samples.p50 / 1000, unit: "ms", target: "< 5 ms", met: samples.p50 / 1000 < 5))
        figures.append(Figure(name: "90-day report of a child, p99", value: samples.p99 / 1000, unit: "ms"))

        // Recompute one child's whole history.
        var recomputes = Samples()
        for _ in 0..<3 {
            let begin = ContinuousClock.now
            let result = try await local.call(AggregatorMethods.recompute, RecomputeParams(family: Self.family, child: Self.child(0)))
            recomputes.add(ContinuousClock.now - begin)
            guard result.daysChanged.isEmpty else { throw BenchError("recompute changed \(result.daysChanged.count) days") }
        }
        figures.append(Figure(name: "recompute a child, \(days) days (\(days * perDay) records)", value: recomputes.p50 / 1000, unit: "ms"))

        // The aggregator's own pace: a second one, with no data of its own, catching up on
        // records already in the store (the store then only reads and takes summaries).
        aggregator.kill()
        let catchUp = work + "/catch-up"
        try FileManager.default.createDirectory(atPath: catchUp, withIntermediateDirectories: true)
        let second = try LaunchedService("screentime-aggregatord", binDirectory: self.common.binDirectory, work: catchUp, arguments: [
            "--retention-days", "3660", "--store-socket", work + "/store.sock", "--push-socket", work + "/no-push.sock",
        ])
        defer { second.kill() }
        let secondClient = RPCClient(configuration: ClientConfiguration(socketPath: catchUp + "/aggregator.sock", callTimeout: .seconds(300), connectTimeout: .seconds(10)))
        let catchUpCPU = CPUTime(pids: ["store": [store.process.processIdentifier], "aggregator": [second.process.processIdentifier]])
        let catchUpBefore = catchUpCPU.sample()
        let caughtUp = try await Self.waitForIngest(of: total, through: secondClient, since: ContinuousClock.now)
        let catchUpSpent = catchUpCPU.since(catchUpBefore, per: total).mapValues { $0 * 1000 }
        let catchUpRate = Double(total) / caughtUp.seconds
        say("  a second aggregator caught up on \(total) records in \(Report.format(caughtUp.seconds)) s")
        figures.insert(Figure(name: "aggregator alone: catch-up on records in the store", value: catchUpRate, unit: "records/s"), at: 1)
        figures.insert(Figure(name: "  CPU per record catching up, aggregator", value: catchUpSpent["aggregator"] ?? .nan,
                              unit: "µs (store \(Report.format(catchUpSpent["store"] ?? .nan)) µs)"), at: 2)
        await secondClient.close()

        Report.print("screentime-aggregatord (\(children) children × \(days) days × \(perDay) sessions\(self.common.quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
        await storeClient.close()
        await local.close()
    }

    /// Waits until the aggregator has counted `total` sessions and written every summary;
    /// returns the time since `since`.
    private static func waitForIngest(of total: Int, through client: RPCClient, since: ContinuousClock.Instant) async throws -> Duration {
        var status = try await client.call(AggregatorMethods.status, Empty())
        while status.sessions < total || status.pendingSummaries > 0 || status.pendingChildWrites > 0 {
            guard ContinuousClock.now - since < .seconds(900) else { throw BenchError("the aggregator did not catch up in 15 minutes: \(status)") }
            // Not more often: aggregator.status counts the sessions table, which costs the
            // aggregator CPU it would otherwise spend ingesting.
            try await Task.sleep(for: .milliseconds(50))
            status = try await client.call(AggregatorMethods.status, Empty())
        }
        return ContinuousClock.now - since
    }

    static func zone(_ child: Int) -> String { "ChildMonitoring-\(device(child))" }
    static func device(_ child: Int) -> String { "kid\(child)-ipad" }
    static func child(_ child: Int) -> String { "kid\(child)" }

    /// The family in its time zone; each child with a device zone whose MonitoringSession
    /// names it (what pairing would have written).
    private static func setUp(_ store: RPCClient, children: Int) async throws {
        _ = try await store.call(StoreMethods.createFamily, CreateFamilyParams(family: Self.family))
        let familyRef = JSONValue.reference(Self.family, zone: StoreNames.defaultZone)
        var saves = [RecordSave(recordType: RecordTypes.family, recordName: Self.family, fields: ["timeZone": .string(Self.timeZone)])]
        for child in 0..<children {
            saves.append(RecordSave(recordType: RecordTypes.childContext, recordName: "child-\(Self.child(child))", fields: [
                "familyRef": familyRef, "childOpaqueId": .string(Self.child(child)),
            ]))
        }
        let defaults = try await store.call(StoreMethods.modify, ModifyParams(family: Self.family, zone: StoreNames.defaultZone, saves: saves, savePolicy: .allKeys))
        guard defaults.allSucceeded else { throw BenchError("setting up the family failed: \(defaults)") }
        for child in 0..<children {
            _ = try await store.call(StoreMethods.createZone, ZoneParams(family: Self.family, zone: Self.zone(child)))
            let session = try await store.call(StoreMethods.modify, ModifyParams(family: Self.family, zone: Self.zone(child), saves: [
                RecordSave(recordType: RecordTypes.monitoringSession, recordName: "session", fields: [
                    "childRef": .reference("child-\(Self.child(child))", zone: StoreNames.defaultZone), "deviceID": .string(Self.device(child)),
                    "status": "active",
                ]),
            ], savePolicy: .allKeys))
            guard session.allSucceeded else { throw BenchError("setting up a child zone failed: \(session)") }
        }
    }
}
