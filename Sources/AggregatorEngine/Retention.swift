import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import StoreAPI
import UsageModel

/// Retention (detail kept 90 days, then weekly aggregates). Every whole week
/// (Monday to Sunday, local time) that ended more than the retention period ago is sealed:
///
/// - its UsageRecords and the parents' ledger entries are pruned from the store, and so
///   are the aggregator's own accruals of its days;
/// - what they counted stays: the aggregator keeps its per-day totals (aggregates, not the
///   sessions), and carries the pruned ledger entries' points per child and week, so
///   balances and reports are the same after the cut as before;
/// - a WeeklySummary record per child and week holds the week's totals in the store.
///
/// A sealed day is never computed again. Usage that arrives later for a sealed day is not
/// counted (its overlap with the pruned sessions cannot be known) and is pruned; a ledger
/// entry dated in a sealed week is carried into that week at once.
enum Retention {
    /// Where a family's sealed days end.
    struct Seal: Sendable {
        /// Days before this one are sealed ('' when none is).
        var day: String
        /// Its first instant, in milliseconds (nil when none is sealed).
        var startMillis: Int64?

        func covers(day: String) -> Bool { day < self.day }
        func covers(millis: Int64) -> Bool { self.startMillis.map { millis < $0 } ?? false }
    }

    static func seal(of family: String, days: LocalDays, _ db: Database) throws -> Seal {
        // Read for each family of every ingest batch: cached.
        let day = try String.fetchOne(cached: db, sql: "SELECT sealed_before FROM families WHERE family = ?", arguments: [family]) ?? ""
        return Seal(day: day, startMillis: days.bounds(of: day).map { Millis.of($0.start) })
    }

    // MARK: Late records

    /// A session that ends inside the sealed days: pruned, not counted.
    static func pruneLate(family: String, zone: String, recordName: String, _ db: Database) throws {
        try Self.prune(family, zone, recordName, db)
    }

    /// A parent's ledger entry dated inside the sealed days: carried into its week (once:
    /// an entry already waiting to be pruned was carried before).
    static func carryLate(family: String, recordName: String, child: String, type: String, amount: Int64, atMillis: Int64, days: LocalDays, _ db: Database) throws {
        let outbox = PruneOutbox.Columns.self
        let waiting = try !PruneOutbox.filter(outbox.family == family && outbox.zone == StoreNames.defaultZone && outbox.recordName == recordName).isEmpty(db)
        guard !waiting else { return }
        let week = Self.week(of: atMillis, days)
        try Self.carry(family, child, week: week, type: type, amount: amount, db)
        try Self.prune(family, StoreNames.defaultZone, recordName, db)
        try Self.queueWeek(family, child, week, db)
    }

    // MARK: Rolling up

    /// Seals the weeks of `family` that ended more than `retentionDays` before `today`,
    /// in the caller's transaction.
    static func rollUp(family: String, today: String, retentionDays: Int, _ db: Database) throws -> FamilyRollUp? {
        let days = try Ingest.localDays(of: family, db)
        let old = try Self.seal(of: family, days: days, db)
        guard let oldest = days.day(today, plus: -retentionDays), let cutoff = days.monday(of: oldest),
              let cutoffStart = days.bounds(of: cutoff)?.start
        else { return nil }
        guard cutoff > old.day else {
            return FamilyRollUp(family: family, sealedBefore: old.day, weeks: [], usageRecordsPruned: 0, ledgerEntriesPruned: 0, accrualsPruned: 0)
        }
        let cutoffMillis = Millis.of(cutoffStart)
        var weeks = Set<[String]>()
        let device = DeviceEntry.Columns.self
        let children = Dictionary(try Row.fetchAll(db, DeviceEntry.filter(device.family == family && device.childRef != nil).select(device.zone, device.childRef))
                                      .map { ($0[device.zone] as String, $0[device.childRef] as String) },
                                  uniquingKeysWith: { first, _ in first })

        // Sessions that ended before the cut: their days are computed for good.
        let session = SessionEntry.Columns.self
        let ended = SessionEntry.filter(session.family == family && session.endMillis <= cutoffMillis)
        let sessions = try Row.fetchAll(db, ended.select(session.zone, session.recordName, session.startMillis))
        for row in sessions {
            let zone: String = row[session.zone]
            try Self.prune(family, zone, row[session.recordName], db)
            guard let child = children[zone] else { continue }
            let week = Self.week(of: row[session.startMillis], days)
            try db.execute(sql: """
                INSERT INTO carried(family, child, week, usage_records) VALUES (?, ?, ?, 1)
                ON CONFLICT(family, child, week) DO UPDATE SET usage_records = usage_records + 1
                """, arguments: [family, child, week])
            weeks.insert([child, week])
        }
        try ended.deleteAll(db)

        // The parents' ledger entries dated before the cut: their points are carried.
        let entry = LedgerEntry.Columns.self
        let dated = LedgerEntry.filter(entry.family == family && entry.atMillis < cutoffMillis)
        let entries = try Row.fetchAll(db, dated.select(entry.recordName, entry.child, entry.type, entry.amount, entry.atMillis))
        for row in entries {
            let child: String = row[entry.child]
            let week = Self.week(of: row[entry.atMillis], days)
            try Self.carry(family, child, week: week, type: row[entry.type], amount: row[entry.amount], db)
            try Self.prune(family, StoreNames.defaultZone, row[entry.recordName], db)
            weeks.insert([child, week])
        }
        try dated.deleteAll(db)

        // The aggregator's own ledger entries of the newly sealed days (their points stay
        // counted in the days kept).
        let accrual = AccrualEntry.Columns.self
        let sealed = AccrualEntry.filter(accrual.family == family && accrual.day >= old.day && accrual.day < cutoff)
        let sealedEntries = try Row.fetchAll(db, sealed.select(accrual.child, accrual.day, accrual.seq, accrual.replaces))
        for row in sealedEntries {
            let child: String = row[accrual.child]
            let day: String = row[accrual.day]
            let seq: Int64 = row[accrual.seq]
            try Self.prune(family, StoreNames.defaultZone, "accrual-\(child)-\(day)-\(seq)", db)
            if let replaced: String = row[accrual.replaces] { try Self.prune(family, StoreNames.defaultZone, replaced, db) }
            weeks.insert([child, days.monday(of: day) ?? day])
        }
        try sealed.deleteAll(db)
        // Every week with usage gets its summary, points or not.
        for row in try Row.fetchAll(db, sql: """
            SELECT DISTINCT v.child_ref AS child, d.day FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
            WHERE d.family = ? AND d.day >= ? AND d.day < ? AND v.child_ref IS NOT NULL
            """, arguments: [family, old.day, cutoff]) {
            let day: String = row["day"]
            weeks.insert([row["child"], days.monday(of: day) ?? day])
        }

        try db.execute(sql: """
            INSERT INTO families(family, time_zone, sealed_before) VALUES (?, 'UTC', ?)
            ON CONFLICT(family) DO UPDATE SET sealed_before = excluded.sealed_before
            """, arguments: [family, cutoff])
        for week in weeks { try Self.queueWeek(family, week[0], week[1], db) }
        return FamilyRollUp(
            family: family, sealedBefore: cutoff, weeks: weeks.map { "\($0[0]) \($0[1])" }.sorted(),
            usageRecordsPruned: sessions.count, ledgerEntriesPruned: entries.count, accrualsPruned: sealedEntries.count)
    }

    /// Every family the aggregator knows.
    static func families(_ db: Database) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT family FROM families UNION SELECT family FROM devices ORDER BY 1")
    }

    /// The pruned ledger points of a child: adjustments minus redemptions.
    static func carriedPoints(family: String, child: String, _ db: Database) throws -> Int64 {
        // Part of every child's balance, computed in each ingest batch: cached.
        try Int64.fetchOne(cached: db, sql: "SELECT coalesce(sum(adjusted - redeemed), 0) FROM carried WHERE family = ? AND child = ?",
                           arguments: [family, child]) ?? 0
    }

    // MARK: Pieces

    private static func week(of millis: Int64, _ days: LocalDays) -> String {
        let day = days.day(containing: Millis.date(millis))
        return days.monday(of: day) ?? day
    }

    private static func carry(_ family: String, _ child: String, week: String, type: String, amount: Int64, _ db: Database) throws {
        // What was taken off (redemptions, deductions, expiries) and what was added.
        let debit = PointsLedgerEntry.debitTypes.contains(type)
        let redeemed = debit ? amount : 0
        let adjusted = debit ? 0 : amount
        try db.execute(sql: """
            INSERT INTO carried(family, child, week, redeemed, adjusted, ledger_entries) VALUES (?, ?, ?, ?, ?, 1)
            ON CONFLICT(family, child, week) DO UPDATE SET redeemed = redeemed + excluded.redeemed, adjusted = adjusted + excluded.adjusted,
                ledger_entries = ledger_entries + 1
            """, arguments: [family, child, week, redeemed, adjusted])
    }

    private static func prune(_ family: String, _ zone: String, _ recordName: String, _ db: Database) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO prune_outbox(family, zone, record_name) VALUES (?, ?, ?)", arguments: [family, zone, recordName])
    }

    private static func queueWeek(_ family: String, _ child: String, _ week: String, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO week_outbox(family, child, week, version) VALUES (?, ?, ?, 1)
            ON CONFLICT(family, child, week) DO UPDATE SET version = version + 1
            """, arguments: [family, child, week])
    }
}
