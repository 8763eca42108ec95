import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RPCCore
import UsageModel

/// The weekly digest: each child's seven days of the family's beside the seven before, from
/// the computed days, the ledger, requests and chores. Sent to every parent once a week, at
/// the family's day and time in its time zone (`Family.digestDay`, `digestTime`), by the
/// deadlines service; a week is sent once (`families.digest_sent_through`), caught up at
/// start when its moment passed while the aggregator was stopped.
enum Digests {
    /// A family's digest settings.
    struct Settings {
        var family: String
        var enabled: Bool
        var day: Weekday
        var minute: Int
        var sentThrough: String?
        var days: LocalDays

        static func all(_ db: Database) throws -> [Settings] {
            try Row.fetchAll(db, sql: "SELECT family, time_zone, digest_enabled, digest_day, digest_time, digest_sent_through FROM families").map { row in
                Settings(family: row["family"], enabled: row["digest_enabled"], day: Weekday(rawValue: row["digest_day"]) ?? .sun,
                         minute: DowntimeWindow.minutes(row["digest_time"]) ?? 18 * 60, sentThrough: row["digest_sent_through"],
                         days: LocalDays(timeZone: row["time_zone"]) ?? LocalDays(timeZone: "UTC")!)
            }
        }

        /// The digest day on or after `day`.
        func digestDay(onOrAfter day: String) -> String? {
            guard let weekday = self.days.weekday(of: day) else { return nil }
            return self.days.day(day, plus: (self.day.index - weekday + 7) % 7)
        }

        /// The moment of the week `instant` is in (its digest day, at its time), in ms.
        func moment(weekOf instant: Int64) -> (day: String, at: Int64)? {
            let today = self.days.day(containing: Millis.date(instant))
            guard let monday = self.days.monday(of: today), let day = self.days.day(monday, plus: self.day.index),
                  let at = self.days.instant(of: day, minute: self.minute) else { return nil }
            return (day, Millis.of(at))
        }

        /// The last moment at or before `now`: this week's, or (not yet come) last week's, so a
        /// Sunday's digest missed while the aggregator was stopped is still sent on Monday.
        func lastMoment(atOrBefore now: Int64) -> (day: String, at: Int64)? {
            guard let this = self.moment(weekOf: now) else { return nil }
            return this.at <= now ? this : self.moment(weekOf: now - 7 * 86_400_000)
        }

        /// The first moment after `now`.
        func nextMoment(after now: Int64) -> (day: String, at: Int64)? {
            guard let this = self.moment(weekOf: now) else { return nil }
            return this.at > now ? this : self.moment(weekOf: now + 7 * 86_400_000)
        }
    }

    // MARK: Sending

    /// Families whose digest moment passed and whose week was not sent: sent to every parent
    /// (a week with nothing to tell is marked sent, quietly). Returns how many were sent.
    @discardableResult
    static func sendDue(now: Int64, _ db: Database) throws -> Int {
        var sent = 0
        for settings in try Settings.all(db) where settings.enabled {
            guard let (day, at) = settings.lastMoment(atOrBefore: now), at <= now, (settings.sentThrough ?? "") < day else { continue }
            try db.execute(sql: "UPDATE families SET digest_sent_through = ? WHERE family = ?", arguments: [day, settings.family])
            let digest = try Self.build(family: settings.family, through: day, settings.days, db)
            guard digest.children.contains(where: Self.hasNews) else { continue }
            try FamilyLog.notifyParents(family: settings.family, alert: Alert(title: digest.title, body: digest.body),
                                        data: ["event": "weeklyDigest", "from": .string(digest.from), "to": .string(digest.to)],
                                        collapseKey: "digest:\(digest.to)", db)
            sent += 1
        }
        return sent
    }

    /// When the next digest is due.
    static func nextMoment(now: Int64, _ db: Database) throws -> Int64? {
        try Settings.all(db).filter(\.enabled).compactMap { settings -> Int64? in
            if let due = settings.lastMoment(atOrBefore: now), (settings.sentThrough ?? "") < due.day { return due.at }
            return settings.nextMoment(after: now)?.at
        }.min()
    }

    private static func hasNews(_ week: ChildWeek) -> Bool {
        week.learningSeconds.value + week.rewardSeconds.value + week.pointsEarned.value + week.pointsSpent.value + week.requestsAsked + week.choresDone > 0
    }

    // MARK: The digest

    /// The family's digest of the seven days ending with `through`.
    static func build(family: String, through: String, _ days: LocalDays, _ db: Database) throws -> WeeklyDigest {
        // A day the calendar has (2026-02-31 is none: it would read as 3 March).
        guard let bounds = days.bounds(of: through), days.day(containing: bounds.start) == through,
              let from = days.day(through, plus: -6), let previousFrom = days.day(through, plus: -13), let previousTo = days.day(through, plus: -7),
              let start = days.bounds(of: from)?.start, let previousStart = days.bounds(of: previousFrom)?.start
        else { throw RPCError.invalidParams("params.through", "must be a day of the calendar written YYYY-MM-DD, such as 2026-11-29") }
        let end = bounds.end
        let names = try AppNames.of(family: family, db)
        var children: [ChildWeek] = []
        for child in try ChildLookup.children(of: family, db) {
            let now = try Self.usage(child, from: from, to: through, db)
            let before = try Self.usage(child, from: previousFrom, to: previousTo, db)
            let ledger = try Self.ledger(child, from: Millis.of(start), to: Millis.of(end), db)
            let ledgerBefore = try Self.ledger(child, from: Millis.of(previousStart), to: Millis.of(start), db)
            let requests = try Row.fetchOne(db, sql: """
                SELECT count(*) AS asked, coalesce(sum(status = 'approved'), 0) AS approved, coalesce(sum(status = 'denied'), 0) AS denied
                FROM time_requests WHERE family = ? AND child = ? AND created_ms >= ? AND created_ms < ?
                """, arguments: [family, child.child, Millis.of(start), Millis.of(end)])
            let chores = try Int64.fetchOne(db, sql: """
                SELECT count(*) FROM chore_completions WHERE family = ? AND child = ? AND status = 'approved' AND answered_ms >= ? AND answered_ms < ?
                """, arguments: [family, child.child, Millis.of(start), Millis.of(end)]) ?? 0
            let top = now.top(3).map { app in
                DigestApp(app: app.app, name: names[app.app] ?? app.app, category: app.category, seconds: app.seconds)
            }
            var week = ChildWeek(
                child: ChildLookup.id(child), childName: try Alerts.name(child, db),
                learningSeconds: DigestFigure(value: now.learning, previous: before.learning),
                rewardSeconds: DigestFigure(value: now.reward, previous: before.reward),
                pointsEarned: DigestFigure(value: now.points + ledger.earned, previous: before.points + ledgerBefore.earned),
                pointsSpent: DigestFigure(value: ledger.spent, previous: ledgerBefore.spent),
                requestsAsked: requests?["asked"] ?? 0, requestsApproved: requests?["approved"] ?? 0, requestsDenied: requests?["denied"] ?? 0,
                choresDone: chores, topApps: top, sentence: "")
            week.sentence = Self.sentence(week)
            children.append(week)
        }
        let title = "The week of \(Self.shortDate(from, days)) to \(Self.shortDate(through, days))"
        let body = children.isEmpty ? "No children yet." : children.map(\.sentence).joined(separator: "\n")
        return WeeklyDigest(family: family, from: from, to: through, timeZone: days.timeZone.identifier, children: children, title: title, body: body)
    }

    /// "Emma: 3 h 20 min learning (+40 min), 2 h reward (−15 min), 240 points earned, 20
    /// spent; 2 requests (1 yes, 1 no); 3 chores; most used: Khan Academy, YouTube."
    static func sentence(_ week: ChildWeek) -> String {
        func time(_ figure: DigestFigure, _ what: String) -> String {
            let words = "\(TimeRequestInfo.minutesWords(figure.value / 60)) \(what)"
            let change = figure.change / 60
            return change == 0 ? "\(words) (as the week before)" : "\(words) (\(change > 0 ? "+" : "−")\(TimeRequestInfo.minutesWords(abs(change))))"
        }
        var parts = [time(week.learningSeconds, "learning"), time(week.rewardSeconds, "reward"),
                     "\(week.pointsEarned.value) points earned, \(week.pointsSpent.value) spent"]
        if week.requestsAsked > 0 {
            parts.append("\(week.requestsAsked) request\(week.requestsAsked == 1 ? "" : "s") (\(week.requestsApproved) yes, \(week.requestsDenied) no)")
        }
        if week.choresDone > 0 { parts.append("\(week.choresDone) chore\(week.choresDone == 1 ? "" : "s") done") }
        if !week.topApps.isEmpty { parts.append("most used: \(week.topApps.map(\.name).joined(separator: ", "))") }
        return "\(week.childName): \(parts.joined(separator: "; "))."
    }

    private static func usage(_ child: EarnedTime.Child, from: String, to: String, _ db: Database) throws -> Tally {
        var tally = Tally()
        for row in try AggregatorDatabase.DayRow.fetchAll(db, sql: """
            SELECT d.device_id, d.day, d.learning_seconds, d.reward_seconds, d.points, d.apps FROM days d
            JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
            WHERE d.family = ? AND v.child_ref = ? AND d.day BETWEEN ? AND ?
            """, arguments: [child.family, child.child, from, to]) {
            tally.add(row)
        }
        return tally
    }

    /// Points parents added (grants, approvals, chores), and those redeemed, taken or expired.
    private static func ledger(_ child: EarnedTime.Child, from: Int64, to: Int64, _ db: Database) throws -> (earned: Int64, spent: Int64) {
        let row = try Row.fetchOne(db, sql: """
            SELECT coalesce(sum(CASE WHEN type = 'adjustment' THEN amount ELSE 0 END), 0) AS earned,
                   coalesce(sum(CASE WHEN type IN ('redemption', 'deduction', 'expiry') THEN amount ELSE 0 END), 0) AS spent
            FROM ledger WHERE family = ? AND child = ? AND at_ms >= ? AND at_ms < ?
            """, arguments: [child.family, child.child, from, to])
        return (row?["earned"] ?? 0, row?["spent"] ?? 0)
    }

    /// "23 Nov".
    private static func shortDate(_ day: String, _ days: LocalDays) -> String {
        guard let (_, month, dayOfMonth) = LocalDays.parse(day) else { return day }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return "\(dayOfMonth) \(months[month - 1])"
    }
}
