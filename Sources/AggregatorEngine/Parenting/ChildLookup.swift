import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import RPCCore
import UsageModel

/// A family's child, as a parent's call names it (`emma`), and what the aggregator has
/// computed of its earned time.
enum ChildLookup {
    /// The child named `childId` in `family`; `notFound` when the aggregator knows no
    /// device or balance of it.
    static func child(_ childId: String, family: String, _ db: Database) throws -> EarnedTime.Child {
        let child = EarnedTime.Child(family: family, child: ParentingNames.childRecord(childId))
        let known = try DeviceEntry.filter(DeviceEntry.Columns.family == family && DeviceEntry.Columns.childRef == child.child).fetchCount(db) > 0
            || ChildEntry.row(child).fetchCount(db) > 0
        guard known, try !Self.removed(child, db) else {
            throw RPCError(.notFound, "no child \(childId) in this family: use the child's id as paired (screentimectl children lists them)")
        }
        return child
    }

    /// The child a child device belongs to; `notFound` before a parent confirmed it (a
    /// device waiting for confirmation asks nothing of the parents).
    static func child(ofDevice deviceId: String, family: String, _ db: Database) throws -> EarnedTime.Child {
        let record = try DeviceEntry.filter(DeviceEntry.Columns.family == family && DeviceEntry.Columns.deviceId == deviceId && DeviceEntry.Columns.status == "active")
            .select(DeviceEntry.Columns.childRef, as: String?.self).fetchOne(db) ?? nil
        guard let record else {
            throw RPCError(.notFound, "this device is not confirmed in its family yet (or the server has not seen it yet); try again once a parent has confirmed it")
        }
        return EarnedTime.Child(family: family, child: record)
    }

    /// The family's children: those with a device or a balance, and not removed, by id.
    static func children(of family: String, _ db: Database) throws -> [EarnedTime.Child] {
        try String.fetchAll(db, sql: """
            SELECT child_ref FROM devices WHERE family = ? AND child_ref IS NOT NULL UNION SELECT child FROM children WHERE family = ?
            EXCEPT SELECT child FROM removed_children WHERE family = ? ORDER BY 1
            """, arguments: [family, family, family]).map { EarnedTime.Child(family: family, child: $0) }
    }

    /// Whether the child was removed from its family (its ChildContext deleted).
    static func removed(_ child: EarnedTime.Child, _ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM removed_children WHERE family = ? AND child = ?)", arguments: [child.family, child.child]) ?? false
    }

    /// `child-emma` → `emma`.
    static func id(_ child: EarnedTime.Child) -> String { Alerts.name(child.child) }

    /// The child's points, balance and shield as last computed, with its pause.
    static func time(_ child: EarnedTime.Child, _ db: Database) throws -> ChildTime {
        let row = try ChildEntry.row(child).fetchOne(db)
        let pause = try PauseRow.on(child).fetchOne(db)
        return ChildTime(child: Self.id(child), childName: try Alerts.name(child, db), pointsBalance: row?.points ?? 0,
                         balanceSeconds: row?.balanceSeconds ?? 0, shielded: row?.shielded ?? false, shieldReason: row?.shieldReason,
                         pausedSince: pause.map { Millis.date($0.sinceMillis) }, pausedUntil: pause?.untilMillis.map(Millis.date), pausedBy: pause?.byName,
                         downtimeUntil: row?.downtimeUntilMillis.map(Millis.date))
    }

    /// The family's clock: its days in its time zone.
    static func days(_ family: String, _ db: Database) throws -> LocalDays { try Ingest.localDays(of: family, db) }

    /// "17:04", in the family's time zone.
    static func clock(_ date: Date, days: LocalDays) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = days.timeZone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    }

    /// Whole minutes from `now` to the end of the family's day (at least 1).
    static func minutesLeftToday(family: String, now: Int64, _ db: Database) throws -> Int64 {
        let days = try Self.days(family, db)
        guard let end = days.bounds(of: days.day(containing: Millis.date(now)))?.end else { return 1 }
        return max(1, (Millis.of(end) - now + 59_999) / 60_000)
    }

    /// Points worth `minutes` of reward time at the family's rate, rounded up; nil when a
    /// point buys no time.
    static func points(forMinutes minutes: Int64, family: String, _ db: Database) throws -> Int64? {
        let rate = try FamilyEntry.row(family).select(FamilyEntry.Columns.secondsPerPoint, as: Int64.self).fetchOne(db) ?? 60
        guard rate > 0 else { return nil }
        return (minutes * 60 + rate - 1) / rate
    }
}
