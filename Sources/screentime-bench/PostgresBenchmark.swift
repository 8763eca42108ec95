import ArgumentParser
import Foundation
import Glibc
import ProcessSpawn
import RPCClient
import RPCCore
import StoreAPI
import Synchronization

/// What a self-hoster would run instead of the store: PostgreSQL 15, started for the run
/// on a Unix socket with its durable defaults (fsync, synchronous_commit), a records table
/// shaped like the store's, measured by `pgbench` in the same run as the store: durable
/// single-row INSERTs beside durable one-record saves from 1, 8, 32 and 50 C clients (and
/// the Swift client's from 1 and 32, for what the client runtime costs), a
/// prepared point SELECT beside `store.fetch` of one record (C client), with the store's
/// own floors (SQLite with its schema in process and behind SwiftNIO on one loop: the
/// service floor; the bare SwiftNIO request/reply server).
struct PostgresBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "postgres",
        abstract: "Benchmarks the store beside PostgreSQL 15 on a Unix socket: durable saves vs INSERTs (1, 8, 32, 50 clients), store.fetch vs a prepared point SELECT.",
        discussion: """
            Needs PostgreSQL 15's server programs and pgbench (Debian: postgresql; Benchmarks/run installs it). \
            The server runs in the work directory, on a Unix socket only, fsync and synchronous_commit on; \
            PostgreSQL refuses to run as root, so as root it runs as the user nobody.
            """
    )

    @Option(help: "Seconds of each run (pgbench -T: whole seconds).")
    var seconds: Int = 5

    @Option(help: "Records in the zone, and rows in the table, that fetches and SELECTs read.")
    var records: Int = 100_000

    @Option(help: "Fetches timed for the store's latency figures.")
    var iterations: Int = 3000

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard self.seconds >= 1 else { throw ValidationError("--seconds must be at least 1") }
        guard self.records >= 1 else { throw ValidationError("--records must be at least 1") }
        guard self.iterations >= 10 else { throw ValidationError("--iterations must be at least 10") }
    }

    func run() async throws {
        if let missing = Postgres.missing { throw BenchError(missing) }
        let seconds = self.common.quick ? 1 : self.seconds
        let records = self.common.quick ? min(self.records, 10_000) : self.records
        let iterations = self.common.quick ? 300 : self.iterations
        let services = try BenchServices(self.common)
        defer { services.stop() }
        let work = services.work
        try services.launch("screentime-stored")
        let socket = services.socket("store")
        let admin = try await StoreBenchmark.benchFamily(services.client("store"))
        let postgres = try await Postgres.start(directory: work + "/postgres")
        defer { postgres.stop() }
        say("work directory \(work)")

        // The same record the store saves, as PostgreSQL's JSON.
        let fields = String(decoding: try RPCJSON.makeEncoder().encode(StoreBenchmark.usage(0).fields), as: UTF8.self)
        let scripts = try PostgresScripts(fields: fields, records: records, directory: postgres.directory)
        try await postgres.sql(file: scripts.schema)
        try await postgres.sql(file: scripts.load)
        // The point SELECT finds its row (a miss would be cheaper than a fetch).
        let found = try await postgres.query("SELECT count(*) FROM records WHERE zone = 'data' AND name = 'r\(records - 1)'")
        guard found == "1" else { throw BenchError("PostgreSQL's table lacks the record r\(records - 1) (count \(found))") }
        try await StoreBenchmark.load(socket: socket, records: records)
        say("  \(records) records in the store's zone and in PostgreSQL's table")

        var figures: [Figure] = []
        var saveRates: [Int: Double] = [:]
        var insertRates: [Int: Double] = [:]
        var savesPerCommit: [Int: Double] = [:]
        // Saves from C clients, as pgbench is one: each process sends one save request at a
        // time, a new record each (the name replaces @NAME@), on a connection of its own.
        let c = try CFloor(workDirectory: work)
        var template = StoreBenchmark.usage(0)
        template.recordName = "@NAME@"
        try CFloor.writeRequests([
            ["id": 1, "method": "store.modify", "params": try JSONValue(encoding: ModifyParams(family: "bench", zone: "writes", saves: [template]))],
        ], to: work + "/save.request")
        for clients in [1, 8, 32, 50] {
            let label = "\(clients) client\(clients == 1 ? "" : "s")"
            let before = try await admin.call(StoreMethods.stats, Empty())
            let saves = try c.clients(socket: socket, clients: clients, seconds: Double(seconds), requestFile: work + "/save.request")
            let after = try await admin.call(StoreMethods.stats, Empty())
            savesPerCommit[clients] = Double(after.writes - before.writes) / Double(max(1, after.commits - before.commits))
            let inserts = try await postgres.pgbench(script: scripts.insert, clients: clients, seconds: seconds)
            saveRates[clients] = saves.rps
            insertRates[clients] = inserts.tps
            let target: (String, Bool)? = switch clients {
            case 1: ("≥ 0.8x", saves.rps >= 0.8 * inserts.tps)
            case 32: ("≥ 1.2x", saves.rps >= 1.2 * inserts.tps)
            default: nil
            }
            figures.append(Figure(name: "durable saves, \(label) (C)", value: saves.rps, unit: "saves/s (p50 \(Report.format(saves.p50)) µs)",
                                  comparison: "PostgreSQL INSERT, \(label) (p50 \(Report.format(inserts.latency.p50)) µs)", comparisonValue: inserts.tps,
                                  ratio: saves.rps / inserts.tps, target: target?.0, met: target?.1))
            say("  \(label): store \(Report.format(saves.rps)) saves/s, PostgreSQL \(Report.format(inserts.tps)) inserts/s")
        }
        // The same from the Swift client (RPCClient), for what its runtime adds to each save.
        for clients in [1, 32] {
            let (rate, latency) = try await StoreBenchmark.durableSaves(socket: socket, clients: clients, seconds: Double(seconds))
            figures.append(Figure(name: "  durable saves, \(clients) client\(clients == 1 ? "" : "s") (Swift RPCClient)", value: rate,
                                  unit: "saves/s (p50 \(Report.format(latency.p50)) µs)"))
        }

        // The store's storage floor: SQLite with its schema, as many records a transaction
        // as group commit put in one with 32 clients, and 400 (a bulk save's batch).
        let floorCount = self.common.quick ? 10_000 : 50_000
        let batch32 = max(1, Int((savesPerCommit[32] ?? 1).rounded()))
        let floorRate = try StoreSchemaFloor.recordsPerSecond(
            schemaFrom: work + "/state/store.sqlite", path: work + "/schema-floor.sqlite", count: floorCount, batch: 400)
        let batchFloorRate = try StoreSchemaFloor.recordsPerSecond(
            schemaFrom: work + "/state/store.sqlite", path: work + "/schema-floor-batch.sqlite", count: self.common.quick ? 5_000 : 20_000, batch: batch32)
        // The same one record a transaction, each commit fsynced, in process: what one
        // client's saves could reach on SQLite with the store's schema, with no request path.
        let loneFloorRate = try StoreSchemaFloor.recordsPerSecond(
            schemaFrom: work + "/state/store.sqlite", path: work + "/schema-floor-lone.sqlite", count: self.common.quick ? 500 : 5_000, batch: 1)
        let saves1 = saveRates[1] ?? .nan
        figures.append(Figure(name: "durable saves, 1 client (storage floor)", value: saves1, unit: "saves/s",
                              comparison: "plain SQLite, store schema, 1 record a transaction", comparisonValue: loneFloorRate,
                              ratio: saves1 / loneFloorRate, target: "≥ 0.85x", met: saves1 >= 0.85 * loneFloorRate))
        let inserts1 = insertRates[1] ?? .nan
        figures.append(Figure(name: "  PostgreSQL INSERT, 1 client, vs that floor", value: inserts1, unit: "inserts/s",
                              comparison: "plain SQLite, store schema, 1 record a transaction", comparisonValue: loneFloorRate,
                              ratio: inserts1 / loneFloorRate))
        let saves32 = saveRates[32] ?? .nan
        figures.append(Figure(name: "  saves per commit (group commit), 32 clients", value: savesPerCommit[32] ?? .nan, unit: "saves/commit"))
        figures.append(Figure(name: "durable saves, 32 clients (storage floor at that batch)", value: saves32, unit: "saves/s",
                              comparison: "plain SQLite, store schema, \(batch32) records a transaction", comparisonValue: batchFloorRate,
                              ratio: saves32 / batchFloorRate, target: "≥ 0.8x", met: saves32 >= 0.8 * batchFloorRate))
        figures.append(Figure(name: "  durable saves, 32 clients, vs bulk floor", value: saves32, unit: "saves/s",
                              comparison: "plain SQLite, store schema, 400 records a transaction", comparisonValue: floorRate,
                              ratio: saves32 / floorRate))

        // The service floor: the same saves from the same C clients, answered by SwiftNIO with
        // SQLite on its event loop, one transaction a turn of the loop: what a save service in
        // a process of its own reaches at most on this machine.
        let saveReply = try await admin.call(StoreMethods.modify, ModifyParams(family: "bench", zone: "writes", saves: [StoreBenchmark.usage(0)]))
        let saveReplyBytes = try RPCJSON.makeEncoder().encode(["id": JSONValue.int(1), "result": try JSONValue(encoding: saveReply)]).count
        for clients in [1, 32] {
            let label = "\(clients) client\(clients == 1 ? "" : "s")"
            let service = try c.serviceFloor(socket: work + "/service-floor.sock", schemaFrom: work + "/state/store.sqlite",
                                             database: work + "/service-floor-\(clients).sqlite", replyBytes: saveReplyBytes,
                                             clients: clients, seconds: Double(seconds), requestFile: work + "/save.request")
            let saves = saveRates[clients] ?? .nan
            figures.append(Figure(name: "durable saves, \(label) (C), vs service floor", value: saves, unit: "saves/s",
                                  comparison: "SwiftNIO + SQLite on its loop, \(label) (p50 \(Report.format(service.p50)) µs)",
                                  comparisonValue: service.rps, ratio: saves / service.rps))
            let inProcess = clients == 1 ? loneFloorRate : batchFloorRate
            let records = clients == 1 ? "1 record" : "\(batch32) records"
            figures.append(Figure(name: "  service floor, \(label), vs plain SQLite in process", value: service.rps, unit: "saves/s",
                                  comparison: "plain SQLite, store schema, \(records) a transaction", comparisonValue: inProcess,
                                  ratio: service.rps / inProcess))
            say("  service floor, \(label): \(Report.format(service.rps)) saves/s")
        }

        // Reads: one record by name, one request at a time.
        let reader = RPCClient(configuration: ClientConfiguration(socketPath: socket))
        let params = FetchParams(family: "bench", zone: "data", recordNames: ["r0"])
        let reply = try await reader.call(StoreMethods.fetch, params)
        let encoder = RPCJSON.makeEncoder()
        let requestBytes = try encoder.encode(["id": JSONValue.int(1), "method": "store.fetch", "params": try JSONValue(encoding: params)]).count
        let replyBytes = try encoder.encode(["id": JSONValue.int(1), "result": try JSONValue(encoding: reply)]).count
        await reader.close()
        await admin.close()
        try CFloor.writeRequests((1...1000).map { id in
            ["id": .int(id), "method": "store.fetch",
             "params": ["family": "bench", "zone": "data", "recordNames": [.string("r\(Int.random(in: 0..<records))")]]]
        }, to: work + "/fetch.requests")
        _ = try c.replay(socket: socket, requestFile: work + "/fetch.requests", count: iterations)  // warm-up
        let fetch = try c.replay(socket: socket, requestFile: work + "/fetch.requests", count: iterations)
        let select = try await postgres.pgbench(script: scripts.select, clients: 1, seconds: seconds)
        let nio = try c.nioRoundTrip(socket: work + "/nio-floor.sock", requestBytes: requestBytes, replyBytes: replyBytes, count: iterations)
        figures.append(Figure(name: "store.fetch of 1 record (C client), p50", value: fetch.p50, unit: "µs",
                              comparison: "PostgreSQL prepared point SELECT p50", comparisonValue: select.latency.p50,
                              ratio: fetch.p50 / select.latency.p50, target: "≤ 1x", met: fetch.p50 <= select.latency.p50))
        figures.append(Figure(name: "store.fetch (C client), p50, vs NIO floor", value: fetch.p50, unit: "µs",
                              comparison: "bare SwiftNIO request/reply (C client) p50", comparisonValue: nio.p50,
                              ratio: fetch.p50 / nio.p50, target: "≤ 3x", met: fetch.p50 <= 3 * nio.p50))
        figures.append(Figure(name: "store.fetch of 1 record (C client), p99", value: fetch.p99, unit: "µs",
                              comparison: "PostgreSQL prepared point SELECT p99", comparisonValue: select.latency.p99, ratio: fetch.p99 / select.latency.p99,
                              target: "≤ 2x", met: fetch.p99 <= 2 * select.latency.p99))
        figures.append(Figure(name: "  PostgreSQL prepared point SELECT, 1 client", value: select.tps, unit: "selects/s"))

        Report.print("The store beside PostgreSQL \(postgres.version) (Unix socket, fsync and synchronous_commit on, \(records) records, "
            + "\(seconds) s runs\(self.common.quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
    }
}

/// The pgbench scripts and the SQL of the comparable table, written for one run.
struct PostgresScripts {
    let schema: String
    let load: String
    let insert: String
    let select: String

    /// `fields`: the store's record fields as JSON; its `"logicalID":"app-0"` varies by row.
    init(fields: String, records: Int, directory: String) throws {
        guard !fields.contains("'"), fields.contains(#""logicalID":"app-0""#) else { throw BenchError("unexpected record JSON: \(fields)") }
        // A SQL expression of the record's JSON with the app number from `app`.
        func json(app: String) -> String {
            "('" + fields.replacingOccurrences(of: #""logicalID":"app-0""#, with: #""logicalID":"app-' || "# + app + #" || '""#) + "')::jsonb"
        }
        // The store's records table (Sources/RecordStore/Database/Tables.swift) as a
        // PostgreSQL user would write it: the zone by name, the fields as jsonb, the
        // record's identity unique, three expression indexes on the fields the app
        // queries by. A sequence names the inserted records, as the store's change
        // sequence numbers its saves.
        let schema = """
            CREATE TABLE records (
                id bigserial PRIMARY KEY,
                zone text NOT NULL,
                name text NOT NULL,
                type text NOT NULL,
                fields jsonb NOT NULL,
                change_tag text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                modified_at timestamptz NOT NULL DEFAULT now(),
                UNIQUE (zone, name)
            );
            CREATE INDEX records_by_logical_id ON records ((fields->>'logicalID'));
            CREATE INDEX records_by_session_start ON records ((fields->>'sessionStart'));
            CREATE INDEX records_by_device_id ON records ((fields->>'deviceID'));
            CREATE SEQUENCE record_names;

            """
        let load = """
            INSERT INTO records (zone, name, type, fields, change_tag)
                SELECT 'data', 'r' || i, 'UsageRecord', \(json(app: "(i % \(StoreBenchmark.apps))")), 't' || i FROM generate_series(0, \(records - 1)) AS i;
            VACUUM ANALYZE records;

            """
        // One durable single-row INSERT a transaction (autocommit), as one save a call.
        let insert = """
            \\set app random(0, \(StoreBenchmark.apps - 1))
            INSERT INTO records (zone, name, type, fields, change_tag)
                SELECT 'writes', 'w' || n, 'UsageRecord', \(json(app: ":app")), 't' || n FROM nextval('record_names') AS n;

            """
        // The whole record by its zone and name, as store.fetch returns it.
        let select = """
            \\set r random(0, \(records - 1))
            SELECT name, type, fields, change_tag, created_at, modified_at FROM records WHERE zone = 'data' AND name = 'r' || :r;

            """
        self.schema = directory + "/schema.sql"
        self.load = directory + "/load.sql"
        self.insert = directory + "/insert.sql"
        self.select = directory + "/select.sql"
        for (path, text) in [(self.schema, schema), (self.load, load), (self.insert, insert), (self.select, select)] {
            try text.write(toFile: path, atomically: false, encoding: .utf8)
        }
    }
}

/// A PostgreSQL 15 server of Debian's, in a directory of its own, on a Unix socket there
/// and nowhere else, with fsync and synchronous_commit on (its defaults, said explicitly).
///
/// Its programs and pgbench are started with ``ProcessSpawn/Spawn``, which gives a child
/// an empty signal mask. Foundation's `Process` does not: a child started from a task
/// inherits the mask of the thread it was started on, and the cooperative pool's threads
/// block SIGALRM among others, so `pgbench -T`, which ends its run on SIGALRM, ran on and
/// on until something killed it.
final class Postgres: @unchecked Sendable {
    /// Debian's PostgreSQL 15 (bookworm's), else the newest version installed.
    static let binDirectory: String = {
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).compactMap(Int.init).sorted()
        let version = versions.contains(15) ? 15 : versions.last ?? 15
        return "/usr/lib/postgresql/\(version)/bin"
    }()
    static let tools = ["initdb", "postgres", "pgbench", "psql", "pg_isready"]
    /// The database user the benchmark connects as (initdb's superuser; trust over the socket).
    static let user = "bench"

    /// Why the benchmark cannot run here, or nil.
    static var missing: String? {
        self.tools.first { !FileManager.default.isExecutableFile(atPath: self.binDirectory + "/" + $0) }.map {
            "PostgreSQL's \($0) is not installed (\(Self.binDirectory)/\($0)): apt-get install postgresql, or run Benchmarks/run"
        }
    }

    /// Holds the data directory, the socket, the logs and the scripts.
    let directory: String
    let server: pid_t
    let version: String
    private let stopped = Mutex(false)

    private init(directory: String, server: pid_t, version: String) {
        self.directory = directory
        self.server = server
        self.version = version
    }

    /// initdb, then the server, until it accepts connections.
    static func start(directory: String) async throws -> Postgres {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let prefix = try self.unprivileged(owning: directory)
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PG") }.merging(["HOME": directory, "LC_ALL": "C"]) { $1 }
        let data = directory + "/data"
        // --no-sync: the empty cluster need not reach the disk before the run; the server's
        // own writes are fsynced as configured.
        let initdb = try await self.run(prefix + [self.binDirectory + "/initdb", "-D", data, "-U", self.user, "--auth=trust", "--encoding=UTF8", "--no-sync"],
                                        environment: environment, log: directory + "/initdb.log", timeout: .seconds(180))
        guard initdb == 0 else { throw BenchError("initdb failed (exit \(initdb)): \(self.tail(directory + "/initdb.log"))") }

        let command = prefix + [self.binDirectory + "/postgres", "-D", data, "-c", "listen_addresses=", "-c", "unix_socket_directories=\(directory)",
                                "-c", "fsync=on", "-c", "synchronous_commit=on"]
        let log = directory + "/server.log"
        let pid = try Spawn(executable: command[0], arguments: Array(command.dropFirst()), environment: environment,
                            stdout: .file(log), stderr: .descriptor(1), ownProcessGroup: true).start()
        // setpriv executes postgres in its place: the pid is the server's. Its immediate
        // shutdown (SIGQUIT) ends the backends too, should the benchmark be interrupted.
        Interruption.track(pid, signal: SIGQUIT)
        let server = Postgres(directory: directory, server: pid, version: self.serverVersion())
        say("PostgreSQL \(server.version) pid \(pid)\(prefix.isEmpty ? "" : ", as the user nobody (PostgreSQL refuses to run as root)"), socket in \(directory)")
        do {
            let deadline = ContinuousClock.now + .seconds(60)
            while try await self.run([self.binDirectory + "/pg_isready", "-q", "-h", directory, "-U", self.user, "-d", "postgres"],
                                     environment: environment, log: nil, timeout: .seconds(20)) != 0 {
                if let status = ChildExit.poll(pid) {
                    Interruption.untrack(pid)
                    server.stopped.withLock { $0 = true }
                    throw BenchError("the PostgreSQL server exited (\(status)) before accepting connections: \(self.tail(log))")
                }
                guard ContinuousClock.now < deadline else { throw BenchError("the PostgreSQL server did not accept connections within 60 s: \(self.tail(log))") }
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    /// Runs a SQL file with psql, stopping at the first error.
    func sql(file: String) async throws {
        let log = self.directory + "/psql.log"
        let status = try await Self.run([Self.binDirectory + "/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.directory, "-U", Self.user,
                                         "-d", "postgres", "-f", file], environment: nil, log: log, timeout: .seconds(600))
        guard status == 0 else { throw BenchError("psql -f \(file) failed (exit \(status)): \(Self.tail(log))") }
    }

    /// One value from a query (psql -tA).
    func query(_ sql: String) async throws -> String {
        let log = self.directory + "/query.out"
        try? FileManager.default.removeItem(atPath: log)
        let status = try await Self.run([Self.binDirectory + "/psql", "-X", "-tA", "-v", "ON_ERROR_STOP=1", "-h", self.directory, "-U", Self.user,
                                         "-d", "postgres", "-c", sql], environment: nil, log: log, timeout: .seconds(60))
        let text = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard status == 0 else { throw BenchError("psql -c \"\(sql)\" failed (exit \(status)): \(text)") }
        return text
    }

    /// `pgbench` with one custom script (`-n -M prepared`) from `clients` connections for
    /// `seconds`: transactions per second (without connecting), and the latency of each
    /// transaction from its per-transaction log (`-l`), each client's first tenth left out
    /// as warm-up (it holds the statement's preparation).
    func pgbench(script: String, clients: Int, seconds: Int) async throws -> (tps: Double, latency: Samples) {
        // On a busy machine many clients can spend a whole short run connecting, and
        // pgbench then reports no transaction at all: run again, longer, rather than fail.
        var seconds = seconds
        for _ in 0..<2 {
            do {
                return try await self.pgbenchOnce(script: script, clients: clients, seconds: seconds)
            } catch let error as NoTransactions {
                say("  pgbench -c \(clients) processed no transaction in \(error.seconds) s (its clients were still connecting); again for \(seconds * 4) s")
                seconds *= 4
            }
        }
        return try await self.pgbenchOnce(script: script, clients: clients, seconds: seconds)
    }

    private struct NoTransactions: Error { var seconds: Int }

    private func pgbenchOnce(script: String, clients: Int, seconds: Int) async throws -> (tps: Double, latency: Samples) {
        let run = "pgbench-\(URL(fileURLWithPath: script).deletingPathExtension().lastPathComponent)-\(clients)"
        let output = self.directory + "/\(run).out"
        let logPrefix = self.directory + "/\(run).log"
        let arguments = ["-h", self.directory, "-U", Self.user, "-n", "-M", "prepared", "-f", script,
                         "-c", "\(clients)", "-j", "\(min(clients, 2))", "-T", "\(seconds)", "-l", "--log-prefix=\(logPrefix)"]
        let status = try await Self.run([Self.binDirectory + "/pgbench"] + arguments + ["postgres"], environment: nil, log: output,
                                        timeout: .seconds(Int64(seconds) + 120))
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        if status == 0, text.contains("number of transactions actually processed: 0\n") { throw NoTransactions(seconds: seconds) }
        // "tps = 9187.431 (without initial connection time)"
        guard status == 0, let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
              let tps = Double(line.dropFirst(6).prefix { $0 != " " }), text.contains("number of failed transactions: 0 ")
        else { throw BenchError("pgbench -f \(script) -c \(clients) failed (exit \(status)): \(text.suffix(1500))") }
        // One log a thread (PREFIX.PID, PREFIX.PID.1); each line:
        // client_id transaction_no latency_µs script_no epoch_s epoch_µs.
        let files = try FileManager.default.contentsOfDirectory(atPath: self.directory).filter { $0.hasPrefix(URL(fileURLWithPath: logPrefix).lastPathComponent + ".") }
        var byClient: [Substring: [Double]] = [:]
        for file in files {
            for line in try String(contentsOfFile: self.directory + "/" + file, encoding: .utf8).split(separator: "\n") {
                let columns = line.split(separator: " ")
                guard columns.count >= 3, let value = Double(columns[2]) else { continue }
                byClient[columns[0], default: []].append(value)
            }
        }
        var latency = Samples()
        for values in byClient.values {
            for value in values.dropFirst(values.count / 10) { latency.add(.microseconds(value)) }
        }
        guard !latency.values.isEmpty else { throw BenchError("pgbench wrote no per-transaction log (\(logPrefix).*)") }
        return (tps, latency)
    }

    /// Fast shutdown (SIGINT: the backends end, the server checkpoints and exits); an
    /// immediate one (SIGQUIT) if that takes more than 30 s; SIGKILL after 10 s more.
    func stop() {
        guard !self.stopped.withLock({ stopped in defer { stopped = true }; return stopped }) else { return }
        for (signal, seconds) in [(SIGINT, 30.0), (SIGQUIT, 10.0), (SIGKILL, 10.0)] {
            kill(self.server, signal)
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if ChildExit.poll(self.server) != nil {
                    Interruption.untrack(self.server)
                    return
                }
                usleep(10_000)
            }
        }
        say("the PostgreSQL server (pid \(self.server)) did not exit")
    }

    /// Runs a program to its end (killed after `timeout`), its output to `log` (or
    /// nowhere); its exit status.
    private static func run(_ command: [String], environment: [String: String]?, log: String?, timeout: Duration) async throws -> Int32 {
        let pid = try Spawn(executable: command[0], arguments: Array(command.dropFirst()),
                            environment: environment ?? ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PG") },
                            stdout: log.map(Spawn.Stream.file) ?? .null, stderr: log == nil ? .null : .descriptor(1)).start()
        Interruption.track(pid)
        defer { Interruption.untrack(pid) }
        return try await ChildExit.wait(pid, timeout: timeout)
    }

    /// As root: the command prefix that runs the server's programs as the user nobody
    /// (setpriv executes the program in its own place, with no PAM session or parent of
    /// its own, unlike runuser or su), and `directory` handed to nobody. Otherwise none.
    private static func unprivileged(owning directory: String) throws -> [String] {
        guard geteuid() == 0 else { return [] }
        guard let user = getpwnam("nobody") else { throw BenchError("running as root, and there is no user nobody to run PostgreSQL as") }
        let setpriv = "/usr/bin/setpriv"
        guard FileManager.default.isExecutableFile(atPath: setpriv) else { throw BenchError("running as root, and \(setpriv) (util-linux) is missing") }
        guard chown(directory, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
            throw BenchError("cannot hand \(directory) to the user nobody: \(String(cString: strerror(errno)))")
        }
        // nobody must reach the directory: every directory above it must let others through.
        var parent = URL(fileURLWithPath: directory).deletingLastPathComponent().path
        while parent != "/" {
            if let mode = (try? FileManager.default.attributesOfItem(atPath: parent))?[.posixPermissions] as? Int, mode & 0o001 == 0 {
                throw BenchError("running as root, PostgreSQL runs as nobody, who cannot enter \(parent) (mode \(String(mode, radix: 8))); choose another --work-dir")
            }
            parent = URL(fileURLWithPath: parent).deletingLastPathComponent().path
        }
        return [setpriv, "--reuid=\(user.pointee.pw_uid)", "--regid=\(user.pointee.pw_gid)", "--clear-groups", "--"]
    }

    private static func serverVersion() -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("pg-version-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        guard let pid = try? Spawn(executable: self.binDirectory + "/postgres", arguments: ["--version"], stdout: .file(output)).start() else { return "15" }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        // "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        return text.split(separator: " ").dropFirst(2).first.map(String.init) ?? "15"
    }

    private static func tail(_ path: String) -> String {
        String(((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").suffix(1500))
    }
}
