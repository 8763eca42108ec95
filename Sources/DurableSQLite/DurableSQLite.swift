import Foundation
import GRDB
import Logging

/// How the services open their SQLite databases: WAL (GRDB's `DatabasePool`), every commit
/// fsynced (`synchronous=FULL`: what a reply acknowledged survives kill -9 and power loss),
/// migrated on open, and refused when a newer binary migrated it further.
public enum DurableSQLite {
    public struct OpenError: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Opens (creating if needed) and migrates; logs the migrations it applied.
    /// `program` names the binary in the error a newer database gets.
    /// `checkpointPages`: the WAL's length (pages) at which a commit checkpoints it
    /// (SQLite's default: 1,000).
    public static func open(
        path: String, label: String, program: String, migrator: DatabaseMigrator, checkpointPages: Int? = nil, logger: Logger
    ) throws -> DatabasePool {
        var configuration = Configuration()
        configuration.label = label
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // Savepoints' statement journals would otherwise be temporary files created and
            // deleted on every write.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            if let checkpointPages { try db.execute(sql: "PRAGMA wal_autocheckpoint = \(checkpointPages)") }
        }
        let pool = try self.pool(path: path, configuration: configuration)
        if try pool.read({ try migrator.hasBeenSuperseded($0) }) {
            throw OpenError(description: "the database \(path) was migrated by a newer \(program) than this one; install the newer version again or restore a backup")
        }
        let before = try pool.read { try migrator.appliedIdentifiers($0) }
        try migrator.migrate(pool)
        let applied = try pool.read { try migrator.appliedIdentifiers($0) }.subtracting(before)
        if !applied.isEmpty {
            logger.notice("database migrated", metadata: ["migrations": "\(applied.sorted())", "path": "\(path)"])
        }
        return pool
    }
}

extension DurableSQLite {
    /// A WAL `DatabasePool` whose writer fsyncs every commit, checked.
    ///
    /// GRDB's `DatabasePool` turns WAL on in its writer after `prepareDatabase` has run, and
    /// sets `synchronous = NORMAL` there as it does. In WAL mode NORMAL syncs the log only at
    /// checkpoints: a commit survives the process being killed, but not a power cut or a
    /// kernel crash. So the writer is set back to FULL (one fsync of the log per commit),
    /// and a writer that does not say FULL is refused.
    public static func pool(path: String, configuration: Configuration) throws -> DatabasePool {
        SQLiteMemoryStatistics.turnOff()
        let pool = try DatabasePool(path: path, configuration: configuration)
        let synchronous = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        guard synchronous == 2 else {
            throw OpenError(description: "SQLite would not fsync every commit of \(path) (synchronous is \(synchronous.map(String.init) ?? "unknown"), not FULL)")
        }
        return pool
    }

    /// The writer's `synchronous` setting: 2 (FULL) for a pool from ``pool(path:configuration:)``.
    public static func synchronous(of pool: DatabasePool) throws -> Int? {
        try pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
    }
}

/// A `meta(key, value)` table of integers (a follower's position in the store's log, …).
public enum MetaTable {
    public static let createSQL = "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID"

    public static func get(_ db: Database, _ key: String) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]) ?? 0
    }

    public static func set(_ db: Database, _ key: String, _ value: Int64) throws {
        try db.execute(sql: "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [key, value])
    }
}

/// Where a service that follows the store's change log (push, the aggregator) is in it:
/// the last change applied, saved in its `meta` table in the same transaction as what the
/// change did, so a crash replays from there and nothing is applied twice.
public protocol StoreLogFollowerDatabase: Sendable {
    var pool: DatabasePool { get }
}

extension StoreLogFollowerDatabase {
    /// The last change of the store's log applied (0: none yet).
    public func position() async throws -> Int64 {
        try await self.pool.read { db in try StoreLogPosition.load(db) }
    }
}

public enum StoreLogPosition {
    static let key = "watch_position"

    /// The last change applied (0: none yet), read in `db`'s transaction.
    public static func load(_ db: Database) throws -> Int64 {
        try MetaTable.get(db, Self.key)
    }

    /// Moves the position, inside the transaction that applied the changes up to it.
    public static func save(_ db: Database, _ value: Int64) throws {
        try MetaTable.set(db, Self.key, value)
    }
}
