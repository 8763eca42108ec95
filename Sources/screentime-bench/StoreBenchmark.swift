import ArgumentParser
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Synchronization

/// Durable saves from 1/8/32 clients, fetch and indexed-query latency over a large zone,
/// zoneChanges throughput; beside plain SQLite with one fsync per insert and the C floor.
struct StoreBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Benchmarks screentime-stored against plain SQLite and the C request/reply floor."
    )

    @Option(help: "Records in the zone that fetches and queries run over.")
    var records: Int = 1_000_000

    @Option(help: "Seconds of each write run.")
    var seconds: Double = 5

    @Option(help: "Fetches and queries timed for the latency figures.")
    var iterations: Int = 3000

    @Flag(name: .customLong("metrics-cost-only"), help: "Measure only what counting costs (the store with and without --no-metrics).")
    var metricsCostOnly = false

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let records = self.common.quick ? 20_000 : self.records
        let seconds = self.common.quick ? 1 : self.seconds
        let iterations = self.common.quick ? 300 : self.iterations
        let services = try BenchServices(self.common, benchmark: "store")
        defer { services.stop() }
        let work = services.work
        if self.metricsCostOnly {
            let c = try CFloor(workDirectory: work)
            try CFloor.writeRequests((1...1000).map { ["id": .int($0), "method": "rpc.ping"] }, to: work + "/ping.requests")
            Report.print("screentime-stored: what counting costs", try await Self.instrumentationCost(services: services, c: c, seconds: seconds, iterations: iterations))
            return
        }
        let store = try services.launch("screentime-stored")
        let socket = services.socket("store")
        let admin = try await Self.benchFamily(services.client("store"))
        say("work directory \(work)")

        var figures: [Figure] = []

        // Writes: plain SQLite's one-fsync-per-insert rate first, then the store's.
        let payload = String(decoding: try RPCJSON.makeEncoder().encode(Self.usage(0).fields), as: UTF8.self)
        let floorRate = try SQLiteFloor.insertsPerSecond(path: work + "/floor.sqlite", payload: payload, seconds: seconds)
        figures.append(Figure(name: "plain SQLite, 1 fsync per insert", value: floorRate, unit: "inserts/s"))
        for clients in [1, 8, 32, 50] {
            let before = try await admin.call(StoreMethods.stats, Empty())
            let (rate, latency) = clients == 32
                ? try await services.phase("durable saves, 32 clients", [store]) { try await Self.durableSaves(socket: socket, clients: clients, seconds: seconds) }
                : try await Self.durableSaves(socket: socket, clients: clients, seconds: seconds)
            let after = try await admin.call(StoreMethods.stats, Empty())
            let ratio = rate / floorRate
            let sharing = Double(after.writes - before.writes) / Double(max(1, after.commits - before.commits))
            figures.append(Figure(
                name: "durable saves, \(clients) client\(clients == 1 ? "" : "s")", value: rate, unit: "saves/s (p50 \(Report.format(latency.p50)) µs)",
                comparison: "SQLite 1 fsync/save", comparisonValue: floorRate, ratio: ratio,
                target: clients == 32 ? "≥ 10x" : nil, met: clients == 32 ? ratio >= 10 : nil))
            figures.append(Figure(name: "  saves per fsync (group commit), \(clients) client\(clients == 1 ? "" : "s")", value: sharing, unit: "saves/commit"))
            say("  durable saves with \(clients) clients: \(Report.format(rate))/s, \(Report.format(sharing)) per commit")
        }

        let saved = try await admin.call(StoreMethods.stats, Empty()).writes
        figures += try await Self.walPages(WALFile(database: work + "/state/store.sqlite"), socket: socket,
                                           floorPath: work + "/schema-floor.sqlite", preload: Int(saved))

        // A large zone for reads.
        let loaded = ContinuousClock.now
        try await Self.load(socket: socket, records: records)
        let loadTime = ContinuousClock.now - loaded
        let loadRate = Double(records) / loadTime.seconds
        figures.append(Figure(name: "bulk load (400-record batches, 8 clients)", value: loadRate, unit: "records/s"))

        // Latency: one record by name; an indexed query.
        let reader = RPCClient(configuration: ClientConfiguration(socketPath: socket))
        var fetches = Samples()
        var requestBytes = 0
        var replyBytes = 0
        for i in 0..<iterations {
            let params = FetchParams(family: "bench", zone: "data", recordNames: ["r\(Int.random(in: 0..<records))"])
            let started = ContinuousClock.now
            let result = try await reader.call(StoreMethods.fetch, params)
            if i >= iterations / 10 { fetches.add(ContinuousClock.now - started) }  // the first tenth warms up
            if i == 0 {
                requestBytes = try RPCJSON.makeEncoder().encode(["id": JSONValue.int(1), "method": "store.fetch", "params": try JSONValue(encoding: params)]).count
                replyBytes = try RPCJSON.makeEncoder().encode(["id": JSONValue.int(1), "result": try JSONValue(encoding: result)]).count
            }
        }
        var pings = Samples()
        for i in 0..<iterations {
            let started = ContinuousClock.now
            _ = try await reader.call("rpc.ping")
            if i >= iterations / 10 { pings.add(ContinuousClock.now - started) }
        }
        // One filter, read from its index entries: sessions from a time on, in order.
        var queries = Samples()
        for i in 0..<iterations {
            let from = Date(timeIntervalSince1970: 1_790_000_000 + Double(Int.random(in: 0..<records)))
            let params = QueryParams(family: "bench", zone: "data", recordType: RecordTypes.usageRecord,
                                     filters: [QueryFilter("sessionStart", .greaterOrEqual, .date(from))], sort: QuerySort("sessionStart"), limit: 10)
            let started = ContinuousClock.now
            _ = try await reader.call(StoreMethods.query, params)
            if i >= iterations / 10 { queries.add(ContinuousClock.now - started) }
        }
        // One filter on a field read from the records (one app's sessions, each app's a
        // ten-thousandth of the zone): the records are read in order, at most 10,000 a page,
        // so ten of them take about 110,000 records read, in pages followed as a client does
        // until ten records have come.
        var scanned = Samples()
        var scannedPages = 0
        for i in 0..<max(5, iterations / 100) {
            var params = QueryParams(family: "bench", zone: "data", recordType: RecordTypes.usageRecord,
                                     filters: [QueryFilter("logicalID", .equal, .string("app-\(Int.random(in: 0..<Self.apps))"))], limit: 10)
            let started = ContinuousClock.now
            var found = 0
            repeat {
                let page = try await reader.call(StoreMethods.query, params)
                found += page.records.count
                params.cursor = page.cursor
                if i > 0 { scannedPages += 1 }
            } while found < 10 && params.cursor != nil
            if i > 0 { scanned.add(ContinuousClock.now - started) }
        }
        // The documented usage query: one device's sessions of the last hour, newest first.
        var recent = Samples()
        let lastHour = Date(timeIntervalSince1970: 1_790_000_000 + Double(max(0, records - 3600)))
        for i in 0..<max(10, iterations / 10) {
            let params = QueryParams(family: "bench", zone: "data", recordType: RecordTypes.usageRecord,
                                     filters: [QueryFilter("deviceID", .equal, "bench-device"), QueryFilter("sessionStart", .greaterOrEqual, .date(lastHour))],
                                     sort: QuerySort("sessionStart", descending: true), limit: 50)
            let started = ContinuousClock.now
            _ = try await reader.call(StoreMethods.query, params)
            if i >= iterations / 100 { recent.add(ContinuousClock.now - started) }
        }
        // Every usage record of the zone, page after page, as the aggregator's recompute
        // reads them: ten pages of 400.
        var listed = Samples()
        var listCursor: String?
        for _ in 0..<10 {
            let started = ContinuousClock.now
            let page = try await reader.call(StoreMethods.query, QueryParams(
                family: "bench", zone: "data", recordType: RecordTypes.usageRecord, limit: 400, cursor: listCursor))
            listed.add(ContinuousClock.now - started)
            listCursor = page.cursor
        }
        // The same requests from the C client: the service's own cost, beside the C floor.
        let c = try CFloor(workDirectory: work)
        let floor = try c.roundTrip(socket: work + "/floor.sock", requestBytes: requestBytes, replyBytes: replyBytes, count: iterations)
        try CFloor.writeRequests((1...1000).map { id in
            ["id": .int(id), "method": "store.fetch",
             "params": ["family": "bench", "zone": "data", "recordNames": [.string("r\(Int.random(in: 0..<records))")]]]
        }, to: work + "/fetch.requests")
        try CFloor.writeRequests((1...1000).map { ["id": .int($0), "method": "rpc.ping"] }, to: work + "/ping.requests")
        _ = try c.replay(socket: socket, requestFile: work + "/fetch.requests", count: iterations)  // warm-up
        let rawFetch = try c.replay(socket: socket, requestFile: work + "/fetch.requests", count: iterations)
        let rawPing = try c.replay(socket: socket, requestFile: work + "/ping.requests", count: iterations)
        // What SwiftNIO alone costs for the same round trip: the ping's share that is the
        // framework's, not ours.
        let nio = try c.nioRoundTrip(socket: work + "/nio-floor.sock", requestBytes: requestBytes, replyBytes: replyBytes, count: iterations)
        figures.append(Figure(name: "bare SwiftNIO request/reply (C client), p50", value: nio.p50, unit: "µs", comparison: "C floor p50",
                              comparisonValue: floor.p50, ratio: nio.p50 / floor.p50))
        figures.append(Figure(name: "rpc.ping round trip (C client), p50", value: rawPing.p50, unit: "µs", comparison: "C floor p50", comparisonValue: floor.p50,
                              ratio: rawPing.p50 / floor.p50, target: "≤ 1.5x", met: rawPing.p50 / floor.p50 <= 1.5))
        figures.append(Figure(name: "rpc.ping round trip (C client), p99", value: rawPing.p99, unit: "µs", comparison: "C floor p99", comparisonValue: floor.p99,
                              ratio: rawPing.p99 / floor.p99))
        // One connection: requests per second one at a time, and pipelined (32 in flight).
        let pipelinedCount = iterations * 10
        let floorPipelined = try c.pipelined(socket: work + "/floor.sock", requestBytes: requestBytes, replyBytes: replyBytes, count: pipelinedCount, depth: 32)
        let fetchPipelined = try await services.phase("store.fetch, 32 in flight", [store]) {
            try c.replayPipelined(socket: socket, requestFile: work + "/fetch.requests", count: pipelinedCount, depth: 32)
        }
        let pingPipelined = try await services.phase("rpc.ping, 32 in flight", [store]) {
            try c.replayPipelined(socket: socket, requestFile: work + "/ping.requests", count: pipelinedCount, depth: 32)
        }
        figures.append(Figure(name: "store.fetch, one at a time on 1 connection (C client)", value: 1e6 / rawFetch.p50, unit: "requests/s",
                              comparison: "C floor", comparisonValue: 1e6 / floor.p50, ratio: floor.p50 / rawFetch.p50))
        figures.append(Figure(name: "store.fetch, 32 in flight on 1 connection (C client)", value: fetchPipelined, unit: "requests/s",
                              comparison: "C floor, 32 in flight", comparisonValue: floorPipelined, ratio: fetchPipelined / floorPipelined,
                              target: "≥ 0.25x", met: fetchPipelined / floorPipelined >= 0.25))
        figures.append(Figure(name: "rpc.ping, 32 in flight on 1 connection (C client)", value: pingPipelined, unit: "requests/s",
                              comparison: "C floor, 32 in flight", comparisonValue: floorPipelined, ratio: pingPipelined / floorPipelined,
                              target: "≥ 0.5x", met: pingPipelined / floorPipelined >= 0.5))
        figures.append(Figure(
            name: "store.fetch of 1 record (C client), p50", value: rawFetch.p50, unit: "µs", comparison: "C floor p50 (\(requestBytes)/\(replyBytes) bytes)",
            comparisonValue: floor.p50, ratio: rawFetch.p50 / floor.p50, target: "≤ 2.5x", met: rawFetch.p50 / floor.p50 <= 2.5))
        figures.append(Figure(name: "store.fetch of 1 record (C client), p99", value: rawFetch.p99, unit: "µs", comparison: "C floor p99", comparisonValue: floor.p99,
                              ratio: rawFetch.p99 / floor.p99))
        figures.append(Figure(name: "rpc.ping round trip (Swift client), p50", value: pings.p50, unit: "µs", comparison: "C floor p50", comparisonValue: floor.p50,
                              ratio: pings.p50 / floor.p50))
        figures.append(Figure(name: "store.fetch of 1 record (Swift client), p50", value: fetches.p50, unit: "µs", comparison: "C floor p50", comparisonValue: floor.p50,
                              ratio: fetches.p50 / floor.p50))
        figures.append(Figure(name: "store.fetch of 1 record (Swift client), p99", value: fetches.p99, unit: "µs", comparison: "C floor p99", comparisonValue: floor.p99,
                              ratio: fetches.p99 / floor.p99))
        figures.append(Figure(name: "store.query, a filter with index entries (limit 10), p50", value: queries.p50, unit: "µs over \(records) records"))
        figures.append(Figure(name: "store.query, a filter with index entries (limit 10), p99", value: queries.p99, unit: "µs"))
        figures.append(Figure(name: "store.query, a filter read from the records, one app in 10,000, pages until 10 records, p50", value: scanned.p50,
                              unit: "µs over \(records) records"))
        figures.append(Figure(name: "  pages for those 10 records", value: Double(scannedPages) / Double(max(1, scanned.values.count)), unit: "pages"))
        figures.append(Figure(name: "a device's sessions since an hour ago, newest first (limit 50), p50", value: recent.p50, unit: "µs over \(records) records"))
        figures.append(Figure(name: "a zone's usage records without filters, a page of 400, p50", value: listed.p50, unit: "µs over \(records) records"))

        // zoneChanges: the whole zone, page by page.
        let paged = ContinuousClock.now
        var params = ZoneChangesParams(family: "bench", zone: "data", limit: 400)
        var seen = 0
        while true {
            let page = try await reader.call(StoreMethods.zoneChanges, params)
            seen += page.records.count
            params.since = page.token
            if !page.moreComing { break }
        }
        let pageTime = ContinuousClock.now - paged
        figures.append(Figure(name: "store.zoneChanges, whole zone", value: Double(seen) / pageTime.seconds,
                              unit: "records/s"))

        figures += try await Self.instrumentationCost(services: services, c: c, seconds: seconds, iterations: iterations)
        figures += try await StackMemory.figures(services: services, c: c)

        Report.print("screentime-stored (\(records) records, \(Report.format(seconds)) s write runs\(self.common.quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
        await reader.close()
        await admin.close()
    }

    static let apps = 10_000

    /// What counting costs: two new stores, one with `--no-metrics`, measured in turns
    /// (nine short rounds, the first in alternate order, medians) so that the machine's drift
    /// falls on both alike. Throughput and latency move by more than 3% from one run to the
    /// next on a small machine; the stores' own CPU time per request tells what counting
    /// costs far more steadily.
    static func instrumentationCost(services: BenchServices, c: CFloor, seconds: Double, iterations: Int) async throws -> [Figure] {
        let work = services.work
        let sockets = ["on": work + "/store-metrics.sock", "off": work + "/store-no-metrics.sock"]
        var pids: [String: Int32] = [:]
        pids["on"] = try services.launch("screentime-stored", ["--socket", sockets["on"]!, "--state-dir", work + "/state-metrics"]).process.processIdentifier
        pids["off"] = try services.launch("screentime-stored", ["--no-metrics", "--socket", sockets["off"]!, "--state-dir", work + "/state-no-metrics"]).process.processIdentifier
        var admins: [RPCClient] = []
        for label in ["on", "off"] {
            admins.append(try await Self.benchFamily(RPCClient(configuration: ClientConfiguration(socketPath: sockets[label]!, callTimeout: .seconds(120), connectTimeout: .seconds(10)))))
        }
        var saves: [String: [Double]] = [:], pings: [String: [Double]] = [:]
        var saveCPU: [String: [Double]] = [:], pingCPU: [String: [Double]] = [:]
        let pingCount = iterations * 10
        let (rounds, runSeconds) = (9, seconds / 2)
        for round in 0..<rounds {
            // Which goes first changes each round: a run's checkpoint must not fall on one side.
            for label in round % 2 == 0 ? ["on", "off"] : ["off", "on"] {
                let (socket, pid) = (sockets[label]!, pids[label]!)
                var cpu = ProcessCPU.nanoseconds(pid)
                let (rate, _) = try await Self.durableSaves(socket: socket, clients: 32, seconds: runSeconds, run: "m\(round)-")
                let saved = rate * runSeconds
                saves[label, default: []].append(rate)
                saveCPU[label, default: []].append(Double(ProcessCPU.nanoseconds(pid) - cpu) / 1000 / max(1, saved))
                cpu = ProcessCPU.nanoseconds(pid)
                pings[label, default: []].append(try c.replay(socket: socket, requestFile: work + "/ping.requests", count: pingCount).p50)
                pingCPU[label, default: []].append(Double(ProcessCPU.nanoseconds(pid) - cpu) / 1000 / Double(pingCount))
            }
        }
        for admin in admins { await admin.close() }
        let median = { (values: [Double]?) in values.map { $0.sorted()[$0.count / 2] } ?? .nan }
        say("  metrics on/off: 32-client saves \(saves["on"]!.map(Report.format))/\(saves["off"]!.map(Report.format)) per s, rpc.ping p50 \(pings["on"]!.map(Report.format))/\(pings["off"]!.map(Report.format)) µs")
        say("  CPU per save \(saveCPU["on"]!.map(Report.format))/\(saveCPU["off"]!.map(Report.format)) µs, per ping \(pingCPU["on"]!.map(Report.format))/\(pingCPU["off"]!.map(Report.format)) µs")
        func figure(_ name: String, _ values: [String: [Double]], unit: String, higherIsBetter: Bool) -> Figure {
            let (on, off) = (median(values["on"]), median(values["off"]))
            let ratio = on / off
            return Figure(name: name + ", with metrics (median of \(rounds))", value: on, unit: unit, comparison: "the same with --no-metrics", comparisonValue: off,
                          ratio: ratio, target: higherIsBetter ? "≥ 0.97x" : "≤ 1.03x", met: higherIsBetter ? ratio >= 0.97 : ratio <= 1.03)
        }
        return [
            figure("durable saves, 32 clients", saves, unit: "saves/s", higherIsBetter: true),
            figure("  the store's CPU per save, 32 clients", saveCPU, unit: "µs", higherIsBetter: false),
            figure("rpc.ping (C client) p50", pings, unit: "µs", higherIsBetter: false),
            figure("  the store's CPU per rpc.ping", pingCPU, unit: "µs", higherIsBetter: false),
        ]
    }

    /// The family `bench` with its zones `writes` (saves) and `data` (reads), made through
    /// `admin`, a local client of the store, which it returns.
    static func benchFamily(_ admin: RPCClient) async throws -> RPCClient {
        _ = try await admin.call(StoreMethods.createFamily, CreateFamilyParams(family: "bench"))
        for zone in ["writes", "data"] { _ = try await admin.call(StoreMethods.createZone, ZoneParams(family: "bench", zone: zone)) }
        return admin
    }

    static func usage(_ i: Int) -> RecordSave {
        let start = Date(timeIntervalSince1970: 1_790_000_000 + Double(i))
        return RecordSave(recordType: RecordTypes.usageRecord, recordName: "r\(i)", fields: [
            "logicalID": .string("app-\(i % apps)"), "deviceID": "bench-device", "category": "learning",
            "sessionStart": .date(start), "sessionEnd": .date(start.addingTimeInterval(60)), "totalSeconds": 60,
        ])
    }

    /// What a usage-record save writes to the WAL: pages per save from one client (each save
    /// its own commit) and from 32 at once (saves sharing commits share their hot pages),
    /// and which tables and indexes the one-client saves' pages belong to, per save (over
    /// 200 saves: one save alone may split a B-tree page and write its parents), beside
    /// what plain SQLite writes for the same rows in the same tables and indexes, into as
    /// many records as the store holds (``StoreSchemaFloor``). A run during which the log
    /// restarted (a checkpoint) is run again.
    static func walPages(_ wal: WALFile, socket: String, floorPath: String, preload: Int) async throws -> [Figure] {
        func measure(clients: Int, savesEach: Int, run: String) async throws -> [UInt32] {
            for attempt in 0..<5 {
                let appended = try await wal.appended {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for client in 0..<clients {
                            group.addTask {
                                let connection = RPCClient(configuration: ClientConfiguration(socketPath: socket))
                                for index in 0..<savesEach {
                                    var save = Self.usage(index)
                                    save.recordName = "wal-\(run)-\(attempt)-\(client)-\(index)"
                                    let result = try await connection.call(StoreMethods.modify, ModifyParams(family: "bench", zone: "writes", saves: [save]))
                                    guard result.allSucceeded else { throw BenchError("save failed: \(result.saved)") }
                                }
                                await connection.close()
                            }
                        }
                        try await group.waitForAll()
                    }
                }
                if let appended { return appended }
            }
            throw BenchError("the WAL restarted during each of five runs of \(clients * savesEach) saves")
        }
        let frameBytes = Double(try wal.frames().pageSize + 24)
        let floor = try await StoreSchemaFloor.walPages(schemaFrom: wal.database, path: floorPath, preload: preload, count: 200)
        let floorPages = Double(floor.pages.count) / 200
        var figures: [Figure] = []
        var loneSaves: [UInt32] = []
        for (clients, savesEach) in [(1, 200), (32, 10)] {
            let written = try await measure(clients: clients, savesEach: savesEach, run: "\(clients)")
            if clients == 1 { loneSaves = written }
            let pages = Double(written.count) / Double(clients * savesEach)
            figures.append(clients == 1
                ? Figure(name: "  WAL pages per save, 1 client", value: pages, unit: "pages (\(Report.format(pages * frameBytes / 1024)) KiB)",
                         comparison: "SQLite, same rows", comparisonValue: floorPages, ratio: pages / floorPages, target: "≤ 6", met: pages <= 6)
                : Figure(name: "  WAL pages per save, \(clients) clients", value: pages, unit: "pages (\(Report.format(pages * frameBytes / 1024)) KiB)"))
        }
        let floorOwners = try floor.wal.owners(of: floor.pages).sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        say("  plain SQLite, the same rows: \(Report.format(floorPages)) pages per record: "
            + floorOwners.map { "\($0.key) \(Report.format(Double($0.value) / 200))" }.joined(separator: ", "))
        // Pages by table and index, for the tables every save writes to (a page's owner read
        // now: one the saves freed since, rare, counts as the free list).
        let owners = try wal.owners(of: loneSaves).sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        say("  pages per save by table: " + owners.map { "\($0.key) \(Report.format(Double($0.value) / 200))" }.joined(separator: ", "))
        for (owner, count) in owners {
            figures.append(Figure(name: "    of which \(owner)", value: Double(count) / 200, unit: "pages per save"))
        }
        figures.append(Figure(name: "  WAL pages per record, plain SQLite with the store's schema", value: floorPages,
                              unit: "pages (the same rows, into as many records)"))
        return figures
    }

    /// `clients` connections each saving one record per call for `seconds`.
    /// `run` names the records apart from other runs' (a save of an existing name is refused).
    static func durableSaves(socket: String, clients: Int, seconds: Double, run: String = "") async throws -> (Double, Samples) {
        let deadline = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        let results = try await withThrowingTaskGroup(of: (Int, Samples).self) { group in
            for client in 0..<clients {
                group.addTask {
                    let connection = RPCClient(configuration: ClientConfiguration(socketPath: socket))
                    var latency = Samples()
                    var count = 0
                    while ContinuousClock.now < deadline {
                        var save = Self.usage(count)
                        save.recordName = "w\(run)\(clients)-\(client)-\(count)"
                        let sent = ContinuousClock.now
                        let result = try await connection.call(StoreMethods.modify, ModifyParams(family: "bench", zone: "writes", saves: [save]))
                        guard result.allSucceeded else { throw BenchError("save failed: \(result.saved)") }
                        latency.add(ContinuousClock.now - sent)
                        count += 1
                    }
                    await connection.close()
                    return (count, latency)
                }
            }
            var total = 0
            var all = Samples()
            for try await (count, latency) in group {
                total += count
                all.merge(latency)
            }
            return (total, all)
        }
        let elapsed = ContinuousClock.now - started
        return (Double(results.0) / elapsed.seconds, results.1)
    }

    static func load(socket: String, records: Int) async throws {
        let next = Counter()
        let step = max(1, records / 10)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let connection = RPCClient(configuration: ClientConfiguration(socketPath: socket, callTimeout: .seconds(120)))
                    while true {
                        let first = next.take(400)
                        if first >= records { break }
                        let saves = (first..<min(first + 400, records)).map(Self.usage)
                        _ = try await connection.call(StoreMethods.modify, ModifyParams(family: "bench", zone: "data", saves: saves, savePolicy: .allKeys))
                        if (first / step) != ((first + 400) / step) { say("  loaded \(min(first + 400, records)) of \(records) records") }
                    }
                    await connection.close()
                }
            }
            try await group.waitForAll()
        }
    }
}

/// Hands out ranges of record numbers to the loading tasks.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func take(_ count: Int) -> Int { self.value.add(count, ordering: .relaxed).oldValue }
}

/// A process's CPU time, its threads' (those that ended too) together: `/proc/PID/stat`'s
/// utime and stime, in clock ticks (10 ms), as nanoseconds.
enum ProcessCPU {
    static func nanoseconds(_ pid: Int32) -> Int64 {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return 0 }
        // After the command's name: state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return 0 }
        return (user + system) * 1_000_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK)))
    }
}
