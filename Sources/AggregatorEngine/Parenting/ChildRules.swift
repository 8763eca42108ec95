import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import RPCCore
import StoreAPI
import UsageModel

/// A child's own rules, as its ChildContext says (parents set them): a daily cap of reward
/// time (shielded at the cap, lifted at the family's midnight) and weekly expiry (earned
/// time not spent by the end of the family's week expires: an `expiry` ledger entry).
enum ChildRules {
    /// A ChildContext saved or deleted; returns the child whose balance to compute again.
    static func apply(_ change: Ingest.Change, now: Int64, _ db: Database) throws -> EarnedTime.Child? {
        guard change.zone == StoreNames.defaultZone else { return nil }
        let child = EarnedTime.Child(family: change.family, child: change.recordName)
        guard !change.deleted, let context = change.record(ChildContext.self) else {
            // The child is removed: its rules, downtime, chores, pause and requests go with
            // it (a child paired again under the same id starts afresh).
            try ChildRuleRow.filter(key: ["family": child.family, "child": child.child]).deleteAll(db)
            try DowntimeRow.of(child).deleteAll(db)
            try Chores.forget(child, db)
            if change.deleted {
                try db.execute(sql: "INSERT OR IGNORE INTO removed_children(family, child) VALUES (?, ?)", arguments: [child.family, child.child])
            }
            try PauseRow.filter(PauseRow.Columns.family == child.family && PauseRow.Columns.child == child.child).deleteAll(db)
            // Requests not yet written to the store stay unwritten: saved after the child's
            // ChildContext is gone, they would come back through the change feed.
            let requests = TimeRequestRow.filter(TimeRequestRow.Columns.family == child.family && TimeRequestRow.Columns.child == child.child)
            try db.execute(sql: "DELETE FROM record_outbox WHERE family = ? AND record_type = ? AND record_name IN (SELECT id FROM time_requests WHERE family = ? AND child = ?)",
                           arguments: [child.family, RecordTypes.timeRequest, child.family, child.child])
            try requests.deleteAll(db)
            return change.deleted ? nil : child
        }
        try db.execute(sql: "DELETE FROM removed_children WHERE family = ? AND child = ?", arguments: [child.family, child.child])
        var row = try ChildRuleRow.filter(key: ["family": child.family, "child": child.child]).fetchOne(db)
            ?? ChildRuleRow(family: child.family, child: child.child, dailyCapMinutes: nil, weeklyExpiry: false, expiredThrough: nil)
        let before = row
        // A day has at most 1 440 minutes (a larger cap is no cap within a day).
        row.dailyCapMinutes = context.dailyRewardCapMinutes.map { min(max(1, $0), 1440) }
        row.weeklyExpiry = context.weeklyExpiry ?? false
        // Expiry starts with the week it was turned on in: what was earned before is not
        // taken at once.
        if row.weeklyExpiry && !before.weeklyExpiry {
            let days = try Ingest.localDays(of: child.family, db)
            row.expiredThrough = days.monday(of: days.day(containing: Millis.date(now)))
        }
        try row.save(db)
        return before == row ? nil : child
    }

    /// Children shielded by their cap, computed again: those whose day is over are lifted.
    /// Returns how many were.
    @discardableResult
    static func liftCaps(now: Int64, _ db: Database) throws -> Int {
        let capped = try EarnedTime.Child.fetchCapped(db)
        for child in capped { try EarnedTime.computeBalance(child, now: now, db) }
        return capped.count - (try EarnedTime.Child.fetchCapped(db).count)
    }

    /// The next local midnight of a family with a child shielded by its cap.
    static func nextMidnight(now: Int64, _ db: Database) throws -> Int64? {
        let families = Set(try EarnedTime.Child.fetchCapped(db).map(\.family))
        return try families.compactMap { family -> Int64? in
            let days = try Ingest.localDays(of: family, db)
            return (days.bounds(of: days.day(containing: Millis.date(now)))?.end).map(Millis.of)
        }.min()
    }

    /// How long after a week's end its expiry waits: usage of the week's last evening that a
    /// device sends late (asleep, offline) still counts against the week first.
    static let expiryGrace: Int64 = 6 * 3_600_000

    /// Every child with weekly expiry whose family's week ended (more than the grace ago)
    /// since it last expired: the points unspent at the week's end expire (once per week),
    /// never taking the balance below zero.
    @discardableResult
    static func expireWeeks(now: Int64, _ db: Database) throws -> Int {
        var expired = 0
        for var rule in try ChildRuleRow.filter(Column("weekly_expiry") == true).fetchAll(db) {
            let days = try Ingest.localDays(of: rule.family, db)
            guard let monday = days.monday(of: days.day(containing: Millis.date(now - Self.expiryGrace))), monday > (rule.expiredThrough ?? "") else { continue }
            rule.expiredThrough = monday
            try rule.update(db)
            let child = EarnedTime.Child(family: rule.family, child: rule.child)
            guard let weekEnd = days.bounds(of: monday)?.start, let ended = days.day(monday, plus: -7) else { continue }
            let rate = try FamilyEntry.row(rule.family).select(FamilyEntry.Columns.secondsPerPoint, as: Int64.self).fetchOne(db) ?? 60
            guard rate > 0 else { continue }
            let time = try ChildLookup.time(child, db)
            let atEnd = try Self.balance(child, before: monday, at: Millis.of(weekEnd), rate: rate, db)
            let points = min(max(0, atEnd) / rate, max(0, time.balanceSeconds) / rate)
            guard points > 0 else { continue }
            let at = Millis.of(weekEnd) - 1
            try Ledger.enter(child, type: "expiry", points: points, reason: "Unspent at the end of the week of \(ended)",
                             name: "expiry-\(rule.child)-\(ended)", by: .server, now: at, db)
            try EarnedTime.computeBalance(child, now: now, db)
            let words = "let \(points == 1 ? "1 unspent point" : "\(points) unspent points") of \(time.childName) expire at the end of the week"
            try FamilyLog.audit(family: rule.family, actor: .server, action: "points.expire", target: ChildLookup.id(child), words: words,
                                metadata: ["child": .string(ChildLookup.id(child)), "childName": .string(time.childName), "points": .int(points), "week": .string(ended)],
                                at: at, db)
            for device in try Grants.devices(of: child, db) {
                try FamilyLog.notifyChild(family: rule.family, deviceId: device, title: "A new week: \(points == 1 ? "1 point" : "\(points) points") you did not spend expired",
                                          body: nil, data: ["event": .string("pointsExpired"), "points": .int(points)], collapseKey: "expiry:\(rule.child)", db)
            }
            expired += 1
        }
        return expired
    }

    /// The child's balance in seconds at a week's end: the points of its days before
    /// `day` and of the ledger before `at` (and what retention carried), less the reward
    /// time of those days.
    private static func balance(_ child: EarnedTime.Child, before day: String, at: Int64, rate: Int64, _ db: Database) throws -> Int64 {
        let usage = try Row.fetchOne(db, sql: """
            SELECT coalesce(sum(d.points), 0) AS points, coalesce(sum(d.reward_seconds), 0) AS reward
            FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
            WHERE d.family = ? AND v.child_ref = ? AND d.day < ?
            """, arguments: [child.family, child.child, day])
        let ledger = try Int64.fetchOne(db, sql: """
            SELECT coalesce(sum(CASE WHEN type IN ('redemption', 'deduction', 'expiry') THEN -amount ELSE amount END), 0)
            FROM ledger WHERE family = ? AND child = ? AND at_ms < ?
            """, arguments: [child.family, child.child, at]) ?? 0
        let points = (usage?["points"] ?? 0) + ledger + (try Retention.carriedPoints(family: child.family, child: child.child, db))
        return points * rate - (usage?["reward"] ?? 0)
    }

    /// The next end of a week (with its grace) of a family with a child whose time expires weekly.
    static func nextWeekEnd(now: Int64, _ db: Database) throws -> Int64? {
        let families = try Set(ChildRuleRow.filter(Column("weekly_expiry") == true).select(Column("family"), as: String.self).fetchAll(db))
        return try families.compactMap { family in
            let days = try Ingest.localDays(of: family, db)
            guard let monday = days.monday(of: days.day(containing: Millis.date(now - Self.expiryGrace))), let next = days.day(monday, plus: 7) else { return nil }
            return days.bounds(of: next).map { Millis.of($0.start) + Self.expiryGrace }
        }.min()
    }
}

/// `child_rules`: a child's cap and weekly expiry.
struct ChildRuleRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "child_rules"
    var family: String
    var child: String
    var dailyCapMinutes: Int64?
    var weeklyExpiry: Bool
    var expiredThrough: String?

    enum CodingKeys: String, CodingKey {
        case family, child
        case dailyCapMinutes = "daily_cap_minutes", weeklyExpiry = "weekly_expiry", expiredThrough = "expired_through"
    }
}

extension EarnedTime.Child {
    /// Children whose reward apps are shielded by their daily cap.
    static func fetchCapped(_ db: Database) throws -> [EarnedTime.Child] {
        try Row.fetchAll(db, sql: "SELECT family, child FROM children WHERE shield_reason = 'dailyCap'").map { EarnedTime.Child(family: $0["family"], child: $0["child"]) }
    }
}
