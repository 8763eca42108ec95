import DurableSQLite
import Foundation
import GRDB
import RPCCore
import StoreAPI

/// The C request/reply floor (Benchmarks/floor/floor.c), compiled with `cc` for this run.
struct CFloor {
    let binary: String

    init(workDirectory: String) throws {
        self.binary = try Self.compile("floor", into: workDirectory)
    }

    /// Compiles Benchmarks/floor/NAME.c into the work directory, linked with `libraries`;
    /// the binary's path.
    static func compile(_ name: String, into workDirectory: String, libraries: [String] = []) throws -> String {
        let source = Locations.packageRoot + "/Benchmarks/floor/\(name).c"
        let binary = workDirectory + "/" + name
        let cc = try Self.run("/usr/bin/env", ["cc", "-O2", "-o", binary, source] + libraries)
        guard cc == 0 else { throw BenchError("cannot compile \(source) with cc (exit \(cc)); install gcc" + (libraries.contains("-lssl") ? " and libssl-dev" : "")) }
        return binary
    }

    /// Round-trip p50/p99 in µs for frames of the given sizes.
    func roundTrip(socket: String, requestBytes: Int, replyBytes: Int, count: Int) throws -> (p50: Double, p99: Double) {
        let figures = try self.againstFloorServer(socket: socket, replyBytes: replyBytes, client: ["client", socket, "\(count)", "\(requestBytes)"])
        return (figures["p50"] ?? .nan, figures["p99"] ?? .nan)
    }

    /// Requests per second with `depth` frames in flight on one connection (pipelined).
    func pipelined(socket: String, requestBytes: Int, replyBytes: Int, count: Int, depth: Int) throws -> Double {
        try self.againstFloorServer(socket: socket, replyBytes: replyBytes, client: ["client", socket, "\(count)", "\(requestBytes)", "\(depth)"])["rps"] ?? .nan
    }

    /// Requests per second of real requests (as `replay`) with `depth` in flight on one connection.
    func replayPipelined(socket: String, requestFile: String, count: Int, depth: Int) throws -> Double {
        try self.client(["replay", socket, "\(count)", requestFile, "\(depth)"])["rps"] ?? .nan
    }

    /// Round-trip p50/p99 in µs against the SwiftNIO floor server (``NIOFloorServer``,
    /// this executable): what SwiftNIO alone costs, measured by the same C client.
    func nioRoundTrip(socket: String, requestBytes: Int, replyBytes: Int, count: Int) throws -> (p50: Double, p99: Double) {
        let figures = try self.against(server: [Locations.thisExecutable, "nio-floor-server", socket, "\(replyBytes)"],
                                       client: ["client", socket, "\(count)", "\(requestBytes)"])
        return (figures["p50"] ?? .nan, figures["p99"] ?? .nan)
    }

    /// `clients` C clients (as ``clients(socket:clients:seconds:requestFile:)``) against the
    /// service floor (``NIOFloorServer`` with `--database`, this executable) started for them on a new
    /// database at `database` with the schema of the store's at `schemaFrom`.
    func serviceFloor(socket: String, schemaFrom: String, database: String, replyBytes: Int,
                      clients: Int, seconds: Double, requestFile: String) throws -> (rps: Double, p50: Double, p99: Double) {
        let figures = try self.against(server: [Locations.thisExecutable, "nio-floor-server", socket, "\(replyBytes)", "--database", database, "--schema-from", schemaFrom],
                                       client: ["clients", socket, "\(clients)", "\(seconds)", requestFile])
        return (figures["rps"] ?? .nan, figures["p50"] ?? .nan, figures["p99"] ?? .nan)
    }

    /// Starts the C floor server, runs the C client against it, stops the server.
    private func againstFloorServer(socket: String, replyBytes: Int, client arguments: [String]) throws -> [String: Double] {
        try self.against(server: [self.binary, "server", socket, "\(replyBytes)"], client: arguments)
    }

    /// Runs the C client against a floor server started for it.
    private func against(server command: [String], client arguments: [String]) throws -> [String: Double] {
        try FloorServer.with(command) { _ in try self.client(arguments) }
    }

    /// Round-trip p50/p99 in µs of real requests (one JSON object per line of
    /// `requestFile`, cycled) sent by the C client to a running service: the service's
    /// own cost, with no runtime on the client side.
    func replay(socket: String, requestFile: String, count: Int) throws -> (p50: Double, p99: Double) {
        let figures = try self.client(["replay", socket, "\(count)", requestFile])
        return (figures["p50"] ?? .nan, figures["p99"] ?? .nan)
    }

    /// `clients` C processes, a connection each, sending the request in `requestFile` one at a
    /// time for `seconds`, its `@NAME@` a new name each time: requests per second of them
    /// all, and the round-trip p50 and p99 in µs.
    func clients(socket: String, clients: Int, seconds: Double, requestFile: String) throws -> (rps: Double, p50: Double, p99: Double) {
        let figures = try self.client(["clients", socket, "\(clients)", "\(seconds)", requestFile])
        return (figures["rps"] ?? .nan, figures["p50"] ?? .nan, figures["p99"] ?? .nan)
    }

    /// Runs the C client; its JSON output.
    private func client(_ arguments: [String]) throws -> [String: Double] {
        let (status, text) = try Tools.output(self.binary, arguments, keepErrors: true)
        guard status == 0 else { throw BenchError("the C client (\(arguments.joined(separator: " "))) failed (exit \(status))") }
        return try JSONDecoder().decode([String: Double].self, from: Data(text.utf8))
    }

    /// Writes requests for ``replay(socket:requestFile:count:)``, one per line.
    static func writeRequests(_ requests: [JSONValue], to path: String) throws {
        let encoder = RPCJSON.makeEncoder()
        var text = Data()
        for request in requests {
            text.append(try encoder.encode(request))
            text.append(0x0A)
        }
        try text.write(to: URL(fileURLWithPath: path))
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// A floor server (the C one, or ``NIOFloorServer``), which prints a line once listening.
enum FloorServer {
    /// Starts `command`, waits for its line, runs `body` with its process, stops it.
    static func with<T>(_ command: [String], _ body: (Process) throws -> T) throws -> T {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: command[0])
        server.arguments = Array(command.dropFirst())
        let ready = Pipe()
        server.standardOutput = ready
        try server.run()
        defer {
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
        }
        _ = ready.fileHandleForReading.availableData  // "ready"
        return try body(server)
    }
}

/// Plain SQLite with the store's durability (WAL, synchronous=FULL), one transaction — so
/// one fsync — per insert: what "one fsync per save" allows on this disk.
enum SQLiteFloor {
    static func insertsPerSecond(path: String, payload: String, seconds: Double) throws -> Double {
        let pool = try DurableSQLite.pool(path: path, configuration: Configuration())
        try pool.write { db in try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, fields TEXT)") }
        let deadline = Date().addingTimeInterval(seconds)
        var count = 0
        let started = Date()
        while Date() < deadline {
            try pool.write { db in
                try db.execute(sql: "INSERT INTO t(name, fields) VALUES (?, ?)", arguments: ["r\(count)", payload])
            }
            count += 1
        }
        return Double(count) / Date().timeIntervalSince(started)
    }
}

/// Plain SQLite doing what the store writes for a usage record — the lookup of an existing
/// record, its change-log row, its row, its three field-index rows — with the store's own
/// schema (copied from its database) and durability (WAL, synchronous=FULL), `batch`
/// records a transaction: the floor of the store's storage on this machine, without
/// requests, JSON, checks or a second process.
enum StoreSchemaFloor {
    static func recordsPerSecond(schemaFrom store: String, path: String, count: Int, batch: Int) throws -> Double {
        let floor = try self.database(schemaFrom: store, path: path)
        let started = ContinuousClock.now
        for first in stride(from: 0, to: count, by: batch) { try floor.write(first..<min(count, first + batch)) }
        return Double(count) / (ContinuousClock.now - started).seconds
    }

    /// The WAL pages (page numbers, as the log holds them) that `count` records write, one a
    /// transaction, into a new database already holding `preload` (its B-trees as deep as
    /// the store's): the floor beside the store's WAL pages per save.
    static func walPages(schemaFrom store: String, path: String, preload: Int, count: Int) async throws -> (pages: [UInt32], wal: WALFile) {
        let floor = try self.database(schemaFrom: store, path: path)
        for first in stride(from: 0, to: preload, by: 400) { try floor.write(first..<min(preload, first + 400)) }
        // The log checkpointed, then begun again (with a record not counted), and no
        // checkpoint until the count is done: the frames of the records counted all go into
        // one log.
        try floor.checkpointOnce()
        try floor.write(preload..<preload + 1)
        let wal = WALFile(database: path)
        guard let appended = try await wal.appended(by: { for index in preload + 1...preload + count { try floor.write(index..<index + 1) } }) else {
            throw BenchError("the floor's WAL restarted while its pages were counted")
        }
        return (appended, wal)
    }

    /// A database of the store's schema, and the key of a usage record's one field-index
    /// entry in it.
    struct Floor {
        var pool: DatabasePool
        /// `sessionStart`'s (`logicalID` and `deviceID` are read from the records).
        var key: Int64

        /// The records of `range` in one transaction (GRDB's synchronous write, also from an
        /// async caller).
        func write(_ range: Range<Int>) throws {
            try self.pool.write { db in try StoreSchemaFloor.insert(db, range, key: self.key) }
        }

        /// Checkpoints the log now, and not again.
        func checkpointOnce() throws {
            try self.pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint = 0") }
        }
    }

    /// A new database at `path` (any old one removed) with the store's tables and indexes
    /// (copied from its database, with the keys of its field index), a family and a zone.
    static func database(schemaFrom store: String, path: String) throws -> Floor {
        for file in [path, path + "-wal", path + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
        let (schema, keyRows) = try DatabaseQueue(path: store, configuration: {
            var configuration = Configuration()
            configuration.readonly = true
            return configuration
        }()).read { db in
            (try String.fetchAll(db, sql: """
                SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND type IN ('table', 'index')
                ORDER BY type = 'index', rowid
                """),
             try Row.fetchAll(db, sql: "SELECT key, type, field FROM field_keys"))
        }
        let pool = try DurableSQLite.pool(path: path, configuration: Configuration())
        try pool.write { db in
            for statement in schema { try db.execute(sql: statement) }
            for key in keyRows {
                try db.execute(sql: "INSERT INTO field_keys(key, type, field) VALUES (?, ?, ?)", arguments: [key["key"], key["type"], key["field"]])
            }
            try db.execute(sql: "INSERT INTO families(id, created_at) VALUES ('f', 0)")
            try db.execute(sql: "INSERT INTO zones(id, family, name, created_at, change_seq) VALUES (1, 'f', 'ChildMonitoring-1', 0, 0)")
        }
        guard let key = keyRows.first(where: { $0["type"] == "UsageRecord" && $0["field"] == "sessionStart" }) else {
            throw BenchError("the store's database has no index key for UsageRecord.sessionStart")
        }
        return Floor(pool: pool, key: key["key"])
    }

    /// What the store writes for each usage record of `range`.
    private static func insert(_ db: Database, _ range: Range<Int>, key: Int64) throws {
        for index in range {
            let name = "u-\(index)"
            let at = Int64(1_790_000_000_000 + index * 60_000)
            let start = StoreDates.format(Date(timeIntervalSince1970: Double(at) / 1000))
            let end = StoreDates.format(Date(timeIntervalSince1970: Double(at) / 1000 + 600))
            _ = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, seq FROM records WHERE zone_id = 1 AND name = ?"), arguments: [name])
            try db.cachedStatement(sql: """
                INSERT INTO changes(family, zone, kind, record_type, record_name, at, created) VALUES ('f', 'ChildMonitoring-1', 'recordSaved', 'UsageRecord', ?, ?, 1)
                """).execute(arguments: [name, at])
            let seq = db.lastInsertedRowID
            let fields = #"{"category":"learning","deviceID":"dev-1","logicalID":"org.khan","sessionEnd":"\#(end)","sessionStart":"\#(start)","totalSeconds":600}"#
            try db.cachedStatement(sql: """
                INSERT INTO records(zone_id, name, type, fields, change_tag, seq, created_at, created_by, modified_at, modified_by)
                VALUES (1, ?, 'UsageRecord', ?, ?, ?, ?, 'dev-1', ?, 'dev-1')
                """).execute(arguments: [name, fields, "t\(seq)", seq, at, at])
            let record = db.lastInsertedRowID
            try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO field_index(key, value, zone_id, record_id) VALUES (?3, ?2, 1, ?1)
                """).execute(arguments: [record, at, key])
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
