import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI
import UsageModel

/// Points and earned reward time, per child (across the child's devices):
///
///     points         = accruals − reversals (learning points of every day) + adjustments
///                      − redemptions − deductions − expiries
///                      (those pruned by retention included: see `Retention`)
///     balanceSeconds = points × the family's rewardSecondsPerPoint − reward seconds used
///
/// Reward apps are shielded while a parent's pause is on, during the child's downtime, or
/// while the balance is at or below zero (or today's reward time at a daily cap); each
/// change of that (a crossing) is numbered, so the child's devices get one command per
/// crossing.
enum EarnedTime {
    struct Child: Hashable, Sendable {
        var family: String
        /// The ChildContext's record name (`child-<childId>`).
        var child: String
    }

    /// The ledger entries of parents' actions (posted by a parent's client, or by the
    /// aggregator for a parent: grants, deductions, approvals; and weekly expiries); accruals
    /// and reversals are the aggregator's count of learning, kept apart.
    static let parentsEntryTypes: Set<String> = ["redemption", "adjustment", "deduction", "expiry"]

    /// Mirrors a parent's redemption or adjustment; returns the child whose balance moves.
    static func applyLedger(_ change: Ingest.Change, days: LocalDays, seal: Retention.Seal, _ db: Database) throws -> Child? {
        let old = try String.fetchOne(cached: db, sql: "SELECT child FROM ledger WHERE family = ? AND record_name = ?", arguments: [change.family, change.recordName])
        try db.execute(cached: "DELETE FROM ledger WHERE family = ? AND record_name = ?", arguments: [change.family, change.recordName])
        guard !change.deleted, let entry = change.record(PointsLedgerEntry.self), Self.parentsEntryTypes.contains(entry.type) else {
            return old.map { Child(family: change.family, child: $0) }
        }
        let (type, child, amount, at) = (entry.type, entry.childRef.recordName, entry.amount, Millis.of(entry.timestamp))
        if seal.covers(millis: at) {
            try Retention.carryLate(family: change.family, recordName: change.recordName, child: child, type: type, amount: amount, atMillis: at, days: days, db)
        } else {
            try db.execute(cached: "INSERT INTO ledger(family, record_name, child, type, amount, at_ms) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [change.family, change.recordName, child, type, amount, at])
        }
        return Child(family: change.family, child: child)
    }

    static func applyShieldPolicy(_ change: Ingest.Change, _ db: Database) throws {
        try db.execute(cached: "DELETE FROM shield_policies WHERE family = ? AND record_name = ?", arguments: [change.family, change.recordName])
        guard !change.deleted, let policy = change.record(ShieldPolicy.self) else { return }
        let child = policy.childRef?.recordName ?? ""
        let apps = policy.rewardApps ?? []
        let categories = policy.rewardCategories ?? []
        try db.execute(cached: "INSERT INTO shield_policies(family, record_name, child, apps, categories) VALUES (?, ?, ?, ?, ?)",
                       arguments: [change.family, change.recordName, child, try Self.json(apps), try Self.json(categories)])
    }

    static func children(of family: String, _ db: Database) throws -> Set<Child> {
        Set(try String.fetchAll(cached: db, sql: "SELECT child FROM children WHERE family = ?", arguments: [family]).map { Child(family: family, child: $0) })
    }

    /// Brings the ledger of each child-day whose devices' days were computed again up to
    /// the day's points: a new entry for the difference (an `accrual`, or a `reversal` when
    /// the day counts fewer points than were entered), dated `now` within the day. Entries
    /// already made are never changed. Returns those days by child (their balance moves too).
    static func recordAccruals(for days: Set<Ingest.DeviceDay>, now: Int64, calendar: (String) throws -> LocalDays, _ db: Database) throws -> [Child: Set<String>] {
        var children: [Child: Set<String>] = [:]
        for item in days {
            guard let child = try String.fetchOne(cached: db, sql: "SELECT child_ref FROM devices WHERE family = ? AND device_id = ? AND child_ref IS NOT NULL",
                                                  arguments: [item.family, item.deviceId]) else { continue }
            children[Child(family: item.family, child: child), default: []].insert(item.day)
        }
        try Self.enterDifferences(children, now: now, calendar: calendar, db)
        return children
    }

    /// One of the aggregator's own entries as the store holds it (its change, coming back,
    /// or one written before this database existed: a database made again from the store's
    /// history). The store's entry is the record: the day's row takes what it says, and
    /// returns the child-day, whose difference from its points is entered again.
    static func adoptEntry(_ change: Ingest.Change, seal: Retention.Seal, _ db: Database) throws -> (child: Child, day: String)? {
        // A day's single entry of the earlier naming, met again in the store's history (an
        // upgraded store, this database made again): the numbered entries replace it.
        guard !change.deleted, change.zone == StoreNames.defaultZone, let entry = change.record(PointsLedgerEntry.self) else { return nil }
        let child = entry.childRef.recordName
        if entry.type == "accrual", change.recordName.hasPrefix("accrual-\(child)-"), LocalDays.parse(String(change.recordName.dropFirst("accrual-\(child)-".count))) != nil {
            try db.execute(cached: "INSERT OR IGNORE INTO prune_outbox(family, zone, record_name) VALUES (?, ?, ?)",
                           arguments: [change.family, StoreNames.defaultZone, change.recordName])
            return nil
        }
        let (type, amount, at) = (entry.type, entry.amount, Millis.of(entry.timestamp))
        guard let name = AccrualName(change.recordName), !seal.covers(day: name.day), type == "accrual" || type == "reversal" else { return nil }
        let known = try Row.fetchOne(cached: db, sql: "SELECT type, amount, written FROM accruals WHERE family = ? AND child = ? AND day = ? AND seq = ?",
                                     arguments: [change.family, name.child, name.day, name.seq])
        if let known, known["type"] as String == type, known["amount"] as Int64 == amount, known["written"] as Bool { return nil }
        try db.execute(cached: """
            INSERT INTO accruals(family, child, day, seq, type, amount, at_ms, written) VALUES (?, ?, ?, ?, ?, ?, ?, 1)
            ON CONFLICT(family, child, day, seq) DO UPDATE SET type = excluded.type, amount = excluded.amount, at_ms = excluded.at_ms,
                written = 1, replaces = NULL
            """, arguments: [change.family, name.child, name.day, name.seq, type, amount, at])
        return (Child(family: change.family, child: name.child), name.day)
    }

    /// For each child-day, one more entry when the day's points differ from what its
    /// entries hold.
    static func enterDifferences(_ children: [Child: Set<String>], now: Int64, calendar: (String) throws -> LocalDays, _ db: Database) throws {
        for (child, childDays) in children {
            for day in childDays {
                let points = try Int64.fetchOne(cached: db, sql: """
                    SELECT coalesce(sum(d.points), 0) FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
                    WHERE d.family = ? AND v.child_ref = ? AND d.day = ?
                    """, arguments: [child.family, child.child, day]) ?? 0
                let entered = try Row.fetchOne(cached: db, sql: """
                    SELECT coalesce(sum(CASE type WHEN 'reversal' THEN -amount ELSE amount END), 0) AS points, coalesce(max(seq), 0) AS seq
                    FROM accruals WHERE family = ? AND child = ? AND day = ?
                    """, arguments: [child.family, child.child, day])
                let difference = points - (entered?["points"] ?? 0)
                guard difference != 0 else { continue }
                let bounds = try calendar(child.family).bounds(of: day)
                let at = bounds.map { min(max(now, Millis.of($0.start)), Millis.of($0.end) - 1) } ?? now
                try db.execute(cached: """
                    INSERT INTO accruals(family, child, day, seq, type, amount, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [child.family, child.child, day, (entered?["seq"] ?? 0) + 1, difference > 0 ? "accrual" : "reversal", abs(difference), at])
            }
        }
    }

    /// `accrual-<childRecordName>-<YYYY-MM-DD>-<n>`, read back.
    struct AccrualName {
        var child: String
        var day: String
        var seq: Int64

        init?(_ name: String) {
            let start = name.index(name.startIndex, offsetBy: 8, limitedBy: name.endIndex) ?? name.endIndex
            guard name.hasPrefix("accrual-"), let dash = name.lastIndex(of: "-"), dash >= start,
                  let seq = Int64(name[name.index(after: dash)...]), (1...1_000_000).contains(seq) else { return nil }
            let rest = name[start..<dash]
            guard rest.count > 11, rest[rest.index(rest.endIndex, offsetBy: -11)] == "-" else { return nil }
            self.day = String(rest.suffix(10))
            self.child = String(rest.dropLast(11))
            self.seq = seq
            guard LocalDays.parse(self.day) != nil, !self.child.isEmpty else { return nil }
        }
    }

    /// Computes a child's balance, notes a shield crossing, and queues the balance record.
    /// `now` places the child's day, against its daily cap.
    static func computeBalance(_ child: Child, now: Int64, _ db: Database) throws {
        let usage = try Row.fetchOne(cached: db, sql: """
            SELECT coalesce(sum(d.points), 0) AS points, coalesce(sum(d.reward_seconds), 0) AS reward
            FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
            WHERE d.family = ? AND v.child_ref = ?
            """, arguments: [child.family, child.child])
        let ledger = try Row.fetchOne(cached: db, sql: """
            SELECT coalesce(sum(CASE WHEN type IN ('redemption', 'deduction', 'expiry') THEN -amount ELSE amount END), 0) AS net
            FROM ledger WHERE family = ? AND child = ?
            """, arguments: [child.family, child.child])
        let rate = try Int64.fetchOne(cached: db, sql: "SELECT seconds_per_point FROM families WHERE family = ?", arguments: [child.family]) ?? 60
        let accrued: Int64 = usage?["points"] ?? 0
        let net: Int64 = ledger?["net"] ?? 0
        let points = accrued + net + (try Retention.carriedPoints(family: child.family, child: child.child, db))
        let reward: Int64 = usage?["reward"] ?? 0
        let balance = points * rate - reward
        let paused = try Bool.fetchOne(cached: db, sql: "SELECT EXISTS (SELECT 1 FROM pauses WHERE family = ? AND child = ? AND ended_ms IS NULL)",
                                       arguments: [child.family, child.child]) ?? false
        let (rewardToday, capReached) = try Self.dailyCap(child, now: now, db)
        let downtime = try Downtime.state(of: child, now: now, db)
        let downtimeUntil = downtime?.on == true ? downtime?.until : nil
        // A pause says more than downtime (a parent's word over a schedule), downtime more
        // than an empty balance (it holds whatever the balance), and an empty balance more
        // than a cap (lifted at midnight: the balance's shield stays).
        let reason: String? = paused ? "paused" : downtimeUntil != nil ? "downtime" : balance <= 0 ? "balance" : capReached ? "dailyCap" : nil
        let shielded = reason != nil
        // A child first seen with time to spare needs no command: reward apps start unshielded.
        let before = try Row.fetchOne(cached: db, sql: """
            SELECT points, reward_seconds, balance_seconds, shielded, shield_reason, reward_today_seconds, downtime_until_ms FROM children
            WHERE family = ? AND child = ?
            """, arguments: [child.family, child.child])
        // The same numbers again are no change: nothing to write, nobody to notify.
        if let before, before["points"] as Int64 == points, before["reward_seconds"] as Int64 == reward,
           before["balance_seconds"] as Int64 == balance, before["shielded"] as Bool == shielded, before["shield_reason"] as String? == reason,
           before["reward_today_seconds"] as Int64 == rewardToday, before["downtime_until_ms"] as Int64? == downtimeUntil {
            return
        }
        let crossed = (before.map { ($0["shielded"] as Bool) } ?? false) != shielded
        // Shielded for another reason (a pause over an empty balance, say): the devices get
        // a command saying so, as for a crossing.
        let newCommand = crossed || (shielded && before.map { ($0["shield_reason"] as String?) != reason } == true)
        try db.execute(cached: """
            INSERT INTO children(family, child, points, reward_seconds, balance_seconds, shielded, shield_reason, reward_today_seconds, downtime_until_ms,
                shield_version)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(family, child) DO UPDATE SET points = excluded.points, reward_seconds = excluded.reward_seconds,
                balance_seconds = excluded.balance_seconds, shielded = excluded.shielded, shield_reason = excluded.shield_reason,
                reward_today_seconds = excluded.reward_today_seconds, downtime_until_ms = excluded.downtime_until_ms,
                shield_version = shield_version + (CASE WHEN ? THEN 1 ELSE 0 END)
            """, arguments: [child.family, child.child, points, reward, balance, shielded, reason, rewardToday, downtimeUntil, newCommand ? 1 : 0, newCommand])
        try Self.queue(child.family, child.child, day: "", db)
        // The alert is of earned time running out, not of a parent's pause.
        if crossed { try Alerts.balanceCrossed(child, exhausted: balance <= 0 && shielded, balanceSeconds: balance, db) }
    }

    /// The child's reward time in the family's day of `now` (as of this computation: the
    /// record says when it was made), and whether its daily cap (if it has one) is reached.
    private static func dailyCap(_ child: Child, now: Int64, _ db: Database) throws -> (rewardToday: Int64, reached: Bool) {
        let today = try Ingest.localDays(of: child.family, db).day(containing: Millis.date(now))
        let reward = try Int64.fetchOne(cached: db, sql: """
            SELECT coalesce(sum(d.reward_seconds), 0) FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
            WHERE d.family = ? AND v.child_ref = ? AND d.day = ?
            """, arguments: [child.family, child.child, today]) ?? 0
        let cap = try Int64.fetchOne(cached: db, sql: "SELECT daily_cap_minutes FROM child_rules WHERE family = ? AND child = ?",
                                     arguments: [child.family, child.child])
        return (reward, cap.map { reward >= $0 * 60 } ?? false)
    }

    private static func queue(_ family: String, _ child: String, day: String, _ db: Database) throws {
        try db.execute(cached: """
            INSERT INTO child_outbox(family, child, day, version) VALUES (?, ?, ?, 1)
            ON CONFLICT(family, child, day) DO UPDATE SET version = version + 1
            """, arguments: [family, child, day])
    }

    static func json(_ strings: [String]) throws -> String {
        try RPCJSON.encodeText(strings)
    }
}
