import Foundation
import DurableSQLite
import GRDB
import Logging
import RPCCore
import UsageModel

/// The aggregator's own SQLite database (`<state-dir>/aggregator.sqlite`): what it knows of
/// the store's records (sessions, rules, devices, families' time zones), the daily totals
/// it derived, the summaries still to be written back, and its position in the change
/// log. All of it moves in one transaction per batch of changes: a change is counted once,
/// even across crashes.
final class AggregatorDatabase: StoreLogFollowerDatabase {
    let pool: DatabasePool
    let path: String

    static let fileName = "aggregator.sqlite"

    init(path: String, logger: Logger) throws {
        self.path = path
        self.pool = try DurableSQLite.open(path: path, label: "aggregator", program: "screentime-aggregatord", migrator: Self.migrations, logger: logger)
    }

    // Its position in the store's change log: StoreLogFollowerDatabase.position(), moved
    // with StoreLogPosition.save in the transaction that applies a batch.

    // MARK: Reads

    struct Counts: Sendable {
        var sessions: Int
        var days: Int
        var pendingSummaries: Int
        var pendingChildWrites: Int
        var pendingRetentionWrites: Int
        var pendingConfigurations: Int
    }

    /// Every family's, or one family's.
    func counts(family: String? = nil) async throws -> Counts {
        try await self.pool.read { db in
            // One family's count filters by family, so that it uses the family index.
            func count(_ table: String, where condition: SQLExpression? = nil) throws -> Int {
                var rows = Table(table).all()
                if let family { rows = rows.filter(Column("family") == family) }
                if let condition { rows = rows.filter(condition) }
                return try rows.fetchCount(db)
            }
            return Counts(
                sessions: try count("sessions"), days: try count("days"), pendingSummaries: try count("summary_outbox"),
                pendingChildWrites: try count("child_outbox") + count(AccrualEntry.databaseTableName, where: AccrualEntry.Columns.written == false)
                    + count(RecordOutboxRow.databaseTableName),
                pendingRetentionWrites: try count(WeekOutbox.databaseTableName) + count(PruneOutbox.databaseTableName),
                pendingConfigurations: try count("config_outbox"))
        }
    }
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

    func pendingSummaries(limit: Int) async throws -> [PendingSummary] {
        try await self.pool.read { db in
            try PendingSummary.fetchAll(db, sql: """
                SELECT o.family, o.zone, o.device_id, o.day, o.version, coalesce(f.time_zone, 'UTC') AS time_zone, v.child_ref,
                    d.learning_seconds, d.reward_seconds, d.points, d.apps
                FROM summary_outbox o
                LEFT JOIN days d ON d.family = o.family AND d.device_id = o.device_id AND d.day = o.day
                LEFT JOIN families f ON f.family = o.family
                LEFT JOIN devices v ON v.family = o.family AND v.zone = o.zone
                ORDER BY o.family, o.zone LIMIT ?
                """, arguments: [limit])
        }
    }

    /// Done with these, unless they were computed again meanwhile (a newer version waits).
    func summariesWritten(_ written: [PendingSummary]) async throws {
        try await self.pool.write { db in
            for item in written {
                try db.execute(cached: "DELETE FROM summary_outbox WHERE family = ? AND device_id = ? AND day = ? AND version = ?",
                               arguments: [item.family, item.deviceId, item.day, item.version])
            }
        }
    }
}

// MARK: Children's records to write back

extension AggregatorDatabase {
    /// A child's balance to write.
    struct PendingChildWrite: Sendable {
        var family: String
        var child: String
        var version: Int64
        var balance: Balance?

        struct Balance: Sendable {
            var points: Int64
            var rewardSeconds: Int64
            var balanceSeconds: Int64
            var shielded: Bool
            var shieldVersion: Int64
            var commandsVersion: Int64
            /// `balance`, `paused` (a parent's pause), `downtime`, `dailyCap`.
            var shieldReason: String?
            var pause: Pause?
            /// When the downtime shielding the child ends, and the apps it leaves open.
            var downtimeUntil: Date?
            var alwaysAllowed: [String]
            /// Reward time in the family's day (against a daily cap).
            var rewardToday: Int64
        }

        /// A parent's pause, on now.
        struct Pause: Sendable {
            var since: Date
            var until: Date?
            var by: String
        }
    }

    func pendingChildWrites(limit: Int) async throws -> [PendingChildWrite] {
        try await self.pool.read { db in
            try PendingChildWrite.fetchAll(db, sql: """
                SELECT o.family, o.child, o.version, c.points, c.reward_seconds, c.balance_seconds, c.shielded, c.shield_version, c.commands_version,
                    c.shield_reason, c.reward_today_seconds, c.downtime_until_ms, p.since_ms, p.until_ms, p.by_name, d.always_allowed
                FROM child_outbox o
                LEFT JOIN children c ON c.family = o.family AND c.child = o.child
                LEFT JOIN pauses p ON p.family = o.family AND p.child = o.child AND p.ended_ms IS NULL
                LEFT JOIN downtime d ON d.family = o.family AND d.child = o.child
                ORDER BY o.family, o.child LIMIT ?
                """, arguments: [limit])
        }
    }

    func childWritesDone(_ done: [PendingChildWrite]) async throws {
        try await self.pool.write { db in
            for item in done {
                try db.execute(cached: "DELETE FROM child_outbox WHERE family = ? AND child = ? AND day = '' AND version = ?",
                               arguments: [item.family, item.child, item.version])
            }
        }
    }

    /// One of the aggregator's own ledger entries, not yet written to the store.
    struct PendingAccrual: Sendable, FetchableRecord {
        var family: String
        var child: String
        var day: String
        var seq: Int64
        var type: String
        var amount: Int64
        var atMillis: Int64
        /// An entry of the earlier naming (one rewritten entry per day) to delete with it.
        var replaces: String?
        /// The family's time zone (an entry that replaces one is dated at its day's start, as that one was).
        var timeZone: String

        /// `accrual-<childRecordName>-<YYYY-MM-DD>-<seq>`: its idempotency key too.
        var recordName: String { "accrual-\(self.child)-\(self.day)-\(self.seq)" }

        init(row: Row) {
            self.family = row["family"]
            self.child = row["child"]
            self.day = row["day"]
            self.seq = row["seq"]
            self.type = row["type"]
            self.amount = row["amount"]
            self.atMillis = row["at_ms"]
            self.replaces = row["replaces"]
            self.timeZone = row["time_zone"]
        }
    }

    func pendingAccruals(limit: Int) async throws -> [PendingAccrual] {
        try await self.pool.read { db in
            try PendingAccrual.fetchAll(db, sql: """
                SELECT a.family, a.child, a.day, a.seq, a.type, a.amount, a.at_ms, a.replaces, coalesce(f.time_zone, 'UTC') AS time_zone
                FROM accruals a LEFT JOIN families f ON f.family = a.family WHERE a.written = 0 ORDER BY a.family LIMIT ?
                """, arguments: [limit])
        }
    }

    func accrualsWritten(_ done: [PendingAccrual]) async throws {
        try await self.pool.write { db in
            for item in done {
                try db.execute(cached: "UPDATE accruals SET written = 1 WHERE family = ? AND child = ? AND day = ? AND seq = ?",
                               arguments: [item.family, item.child, item.day, item.seq])
            }
        }
    }

    /// The child's devices' zones and ids, and the shield policy that applies (the child's
    /// own, else the family's).
    func shieldTargets(family: String, child: String) async throws -> (devices: [(zone: String, deviceId: String)], apps: [String], categories: [String]) {
        try await self.pool.read { db in
            let device = DeviceEntry.Columns.self
            let devices = try Row.fetchAll(db, DeviceEntry.paired(family).filter(device.childRef == child).select(device.zone, device.deviceId))
                .map { (zone: $0[device.zone] as String, deviceId: $0[device.deviceId] as String) }
            let policy = try Row.fetchOne(db, sql: """
                SELECT apps, categories FROM shield_policies WHERE family = ? AND child IN (?, '') ORDER BY child DESC, record_name LIMIT 1
                """, arguments: [family, child])
            let decode = { (text: String?) in (try? RPCJSON.decode([String].self, from: (text ?? "[]"))) ?? [] }
            return (devices, decode(policy?["apps"]), decode(policy?["categories"]))
        }
    }

    func shieldCommandsWritten(family: String, child: String, version: Int64) async throws {
        try await self.pool.write { db in
            try db.execute(sql: "UPDATE children SET commands_version = max(commands_version, ?) WHERE family = ? AND child = ?",
                           arguments: [version, family, child])
        }
    }
}

// MARK: Reports

extension AggregatorDatabase {
    struct DayRow: Sendable {
        var deviceId: String
        var day: String
        var learningSeconds: Int64
        var rewardSeconds: Int64
        var points: Int64
        var apps: [AppUsage]
    }

    func timeZone(of family: String) async throws -> String {
        try await self.pool.read { db in try String.fetchOne(cached: db, sql: "SELECT time_zone FROM families WHERE family = ?", arguments: [family]) ?? "UTC" }
    }

    /// The paired devices of a child (by its ChildContext record name).
    func devices(ofChild child: String, family: String) async throws -> [String] {
        try await self.pool.read { db in
            try String.fetchAll(cached: db, sql: "SELECT DISTINCT device_id FROM devices WHERE family = ? AND child_ref = ? AND device_id IS NOT NULL ORDER BY device_id",
                                arguments: [family, child])
        }
    }

    func knows(device: String, family: String) async throws -> Bool {
        try await self.pool.read { db in
            try Bool.fetchOne(cached: db, sql: """
                SELECT EXISTS (SELECT 1 FROM devices WHERE family = ? AND device_id = ?) OR EXISTS (SELECT 1 FROM days WHERE family = ? AND device_id = ?)
                """, arguments: [family, device, family, device]) ?? false
        }
    }

    /// The computed days of these devices from `from` to `to` (both included), by day then device.
    func days(family: String, devices: [String], from: String, to: String) async throws -> [DayRow] {
        guard !devices.isEmpty else { return [] }
        return try await self.pool.read { db in
            let marks = Array(repeating: "?", count: devices.count).joined(separator: ", ")
            let arguments: [(any DatabaseValueConvertible)?] = [family] + devices.map { $0 } + [from, to]
            return try DayRow.fetchAll(db, sql: """
                SELECT device_id, day, learning_seconds, reward_seconds, points, apps FROM days
                WHERE family = ? AND device_id IN (\(marks)) AND day BETWEEN ? AND ? ORDER BY day, device_id
                """, arguments: StatementArguments(arguments))
        }
    }
}

// MARK: Alerts to send

extension AggregatorDatabase {
    struct PendingAlert: Sendable {
        var id: Int64
        var family: String
        var kind: String
        var title: String
        var body: String
        var data: String
    }

    func pendingAlerts(limit: Int) async throws -> [PendingAlert] {
        try await self.pool.read { db in
            try PendingAlert.fetchAll(db, AlertOutbox.order(AlertOutbox.Columns.id).limit(limit))
        }
    }

    func alertSent(_ id: Int64) async throws {
        try await self.pool.write { db in _ = try AlertOutbox.deleteOne(db, key: id) }
    }
}

// MARK: Rows as the reads above select them

extension AggregatorDatabase.PendingSummary: FetchableRecord {
    enum Columns {
        static let family = Column("family"), zone = Column("zone"), deviceId = Column("device_id"), day = Column("day")
        static let version = Column("version"), timeZone = Column("time_zone"), childRef = Column("child_ref")
        static let learningSeconds = Column("learning_seconds"), rewardSeconds = Column("reward_seconds")
        static let points = Column("points"), apps = Column("apps")
    }

    init(row: Row) {
        let apps: String? = row[Columns.apps]
        self.init(
            family: row[Columns.family], zone: row[Columns.zone], deviceId: row[Columns.deviceId], day: row[Columns.day],
            version: row[Columns.version], timeZone: row[Columns.timeZone], childRef: row[Columns.childRef],
            totals: apps.map { Totals(learningSeconds: row[Columns.learningSeconds], rewardSeconds: row[Columns.rewardSeconds], points: row[Columns.points], apps: $0) })
    }
}

extension AggregatorDatabase.PendingChildWrite: FetchableRecord {
    enum Columns {
        static let family = Column("family"), child = Column("child"), version = Column("version")
        static let balancePoints = Column("points"), rewardSeconds = Column("reward_seconds"), balanceSeconds = Column("balance_seconds")
        static let shielded = Column("shielded"), shieldVersion = Column("shield_version"), commandsVersion = Column("commands_version")
        static let shieldReason = Column("shield_reason"), rewardToday = Column("reward_today_seconds"), pausedSince = Column("since_ms"), pausedUntil = Column("until_ms"), pausedBy = Column("by_name")
        static let downtimeUntil = Column("downtime_until_ms"), alwaysAllowed = Column("always_allowed")
    }

    init(row: Row) {
        let balancePoints: Int64? = row[Columns.balancePoints]
        let pausedSince: Int64? = row[Columns.pausedSince]
        let pause = pausedSince.map { Pause(since: Millis.date($0), until: (row[Columns.pausedUntil] as Int64?).map(Millis.date), by: row[Columns.pausedBy]) }
        self.init(
            family: row[Columns.family], child: row[Columns.child], version: row[Columns.version],
            balance: balancePoints.map {
                Balance(points: $0, rewardSeconds: row[Columns.rewardSeconds], balanceSeconds: row[Columns.balanceSeconds],
                        shielded: row[Columns.shielded], shieldVersion: row[Columns.shieldVersion], commandsVersion: row[Columns.commandsVersion],
                        shieldReason: row[Columns.shieldReason], pause: pause,
                        downtimeUntil: (row[Columns.downtimeUntil] as Int64?).map(Millis.date),
                        alwaysAllowed: (row[Columns.alwaysAllowed] as String?).flatMap { try? RPCJSON.decode([String].self, from: $0) } ?? [],
                        rewardToday: row[Columns.rewardToday])
            })
    }
}

extension AggregatorDatabase.DayRow: FetchableRecord {
    enum Columns {
        static let deviceId = Column("device_id"), day = Column("day"), learningSeconds = Column("learning_seconds")
        static let rewardSeconds = Column("reward_seconds"), points = Column("points"), apps = Column("apps")
    }

    init(row: Row) {
        self.init(
            deviceId: row[Columns.deviceId], day: row[Columns.day], learningSeconds: row[Columns.learningSeconds],
            rewardSeconds: row[Columns.rewardSeconds], points: row[Columns.points], apps: (try? AppsJSON.decode(row[Columns.apps])) ?? [])
    }
}

extension AggregatorDatabase.PendingAlert: FetchableRecord {
    enum Columns {
        static let id = Column("id"), family = Column("family"), kind = Column("kind"), title = Column("title"), body = Column("body"), data = Column("data")
    }

    init(row: Row) {
        self.init(id: row[Columns.id], family: row[Columns.family], kind: row[Columns.kind], title: row[Columns.title], body: row[Columns.body], data: row[Columns.data])
    }
}
