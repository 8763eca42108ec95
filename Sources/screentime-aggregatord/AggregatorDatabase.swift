import Foundation
import DurableSQLite
import GRDB
import Logging
import UsageModel

/// The aggregator's own SQLite database (`<state-dir>/aggregator.sqlite`): what it knows of
/// the store's records (sessions, rules, devices, families' time zones), the daily totals
/// it derived, the summaries still to be written back, and its position in the change
/// log. All of it moves in one transaction per batch of changes: a change is counted once,
/// even across crashes.
final class AggregatorDatabase: Sendable {
    let pool: DatabasePool
    let path: String

    static let fileName = "aggregator.sqlite"

    init(path: String, logger: Logger) throws {
        self.path = path
        var migrator = DatabaseMigrator()
        migrator.registerMigration("aggregator-v1") { db in
            try db.execute(sql: """
                -- the UsageRecords as last seen (one row per record)
                CREATE TABLE sessions (
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    app TEXT NOT NULL,
                    bundle_id TEXT,
                    category TEXT,
                    start_ms INTEGER NOT NULL,
                    end_ms INTEGER NOT NULL,
                    PRIMARY KEY (family, zone, record_name)
                ) WITHOUT ROWID;
                CREATE INDEX sessions_by_device ON sessions(family, device_id, start_ms);
                -- a device's local day, as computed
                CREATE TABLE days (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    day TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    learning_seconds INTEGER NOT NULL,
                    reward_seconds INTEGER NOT NULL,
                    points INTEGER NOT NULL,
                    apps TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, day)
                ) WITHOUT ROWID;
                -- days whose DailySummary record must be written (or deleted) in the store
                CREATE TABLE summary_outbox (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    day TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    PRIMARY KEY (family, device_id, day)
                ) WITHOUT ROWID;
                CREATE TABLE families (
                    family TEXT PRIMARY KEY NOT NULL,
                    time_zone TEXT NOT NULL
                ) WITHOUT ROWID;
                -- AppRule (family-wide, by bundle id) and AppConfiguration (per device, by logical id)
                CREATE TABLE app_rules (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,  -- '' for a family-wide AppRule
                    app TEXT NOT NULL,        -- bundle id (AppRule) or logical id (AppConfiguration)
                    record TEXT NOT NULL,     -- zone/recordName of the rule, to forget it on delete
                    category TEXT,
                    points_per_minute INTEGER,
                    PRIMARY KEY (family, device_id, app)
                ) WITHOUT ROWID;
                CREATE INDEX app_rules_by_record ON app_rules(family, record);
                -- a child device's zone: its device and child (from the MonitoringSession)
                CREATE TABLE devices (
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    device_id TEXT,
                    child_ref TEXT,
                    PRIMARY KEY (family, zone)
                ) WITHOUT ROWID;
                """)
            try db.execute(sql: MetaTable.createSQL)
        }
        self.pool = try DurableSQLite.open(path: path, label: "aggregator", program: "screentime-aggregatord", migrator: migrator, logger: logger)
    }

    // MARK: Position

    static let positionKey = "watch_position"

    func position() throws -> Int64 {
        try self.pool.read { db in try MetaTable.get(db, Self.positionKey) }
    }

    static func setPosition(_ db: Database, _ value: Int64) throws {
        try MetaTable.set(db, Self.positionKey, value)
    }

    // MARK: Reads

    struct Counts: Sendable {
        var sessions: Int
        var days: Int
        var pendingSummaries: Int
    }

    func counts() throws -> Counts {
        try self.pool.read { db in
            Counts(
                sessions: try Int.fetchOne(db, sql: "SELECT count(*) FROM sessions") ?? 0,
                days: try Int.fetchOne(db, sql: "SELECT count(*) FROM days") ?? 0,
                pendingSummaries: try Int.fetchOne(db, sql: "SELECT count(*) FROM summary_outbox") ?? 0)
        }
    }
}

enum Millis {
    static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
}

// MARK: Summaries to write back

extension AggregatorDatabase {
    /// A device-day whose DailySummary the store must get: its totals, or nil when the day
    /// has no usage any more (the summary is deleted).
    struct PendingSummary: Sendable {
        var family: String
        var zone: String
        var deviceId: String
        var day: String
        var version: Int64
        var timeZone: String
        var childRef: String?
        var totals: Totals?

        struct Totals: Sendable {
            var learningSeconds: Int64
            var rewardSeconds: Int64
            var points: Int64
            var apps: String
        }
    }

    func pendingSummaries(limit: Int) throws -> [PendingSummary] {
        try self.pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT o.family, o.zone, o.device_id, o.day, o.version, coalesce(f.time_zone, 'UTC') AS time_zone, v.child_ref,
                    d.learning_seconds, d.reward_seconds, d.points, d.apps
                FROM summary_outbox o
                LEFT JOIN days d ON d.family = o.family AND d.device_id = o.device_id AND d.day = o.day
                LEFT JOIN families f ON f.family = o.family
                LEFT JOIN devices v ON v.family = o.family AND v.zone = o.zone
                ORDER BY o.family, o.zone LIMIT ?
                """, arguments: [limit]).map { row in
                let apps: String? = row["apps"]
                return PendingSummary(
                    family: row["family"], zone: row["zone"], deviceId: row["device_id"], day: row["day"], version: row["version"],
                    timeZone: row["time_zone"], childRef: row["child_ref"],
                    totals: apps.map { PendingSummary.Totals(learningSeconds: row["learning_seconds"], rewardSeconds: row["reward_seconds"], points: row["points"], apps: $0) })
            }
        }
    }

    /// Done with these, unless they were computed again meanwhile (a newer version waits).
    func summariesWritten(_ written: [PendingSummary]) async throws {
        try await self.pool.write { db in
            for item in written {
                try db.execute(sql: "DELETE FROM summary_outbox WHERE family = ? AND device_id = ? AND day = ? AND version = ?",
                               arguments: [item.family, item.deviceId, item.day, item.version])
            }
        }
    }
}
