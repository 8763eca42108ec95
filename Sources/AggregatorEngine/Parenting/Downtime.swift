import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import RPCCore
import UsageModel

/// A child's weekly downtime: windows read on the family's clocks (its time zone, whatever
/// a device says), during which the child's reward apps are shielded whatever its balance,
/// but for the apps always allowed. `EarnedTime.computeBalance` asks ``state(of:now:_:)``;
/// the deadlines service computes the child again at each boundary (``tick(now:_:)``).
enum Downtime {
    /// A stretch of downtime: occurrences of the windows, those that touch or overlap merged.
    struct Interval: Equatable {
        var start: Int64
        var end: Int64
    }

    /// Where the family's clock is in a schedule.
    struct State: Equatable {
        /// In a window now (lifted or not).
        var inWindow: Bool
        /// An approval lifted it until then (later than now).
        var liftedUntil: Int64?
        /// The end of the window it is in.
        var until: Int64?
        /// The start of the next window.
        var nextStart: Int64?

        /// Shielding now.
        var on: Bool { self.inWindow && self.liftedUntil == nil }
        /// When this state changes next.
        var nextBoundary: Int64? {
            [self.until, self.nextStart, self.liftedUntil].compactMap { $0 }.min()
        }
    }

    /// The windows' occurrences from the day before `now` to a week after, in order.
    static func intervals(_ windows: [DowntimeWindow], around now: Int64, days: LocalDays) -> [Interval] {
        let today = days.day(containing: Millis.date(now))
        var found: [Interval] = []
        for offset in -1...8 {
            guard let day = days.day(today, plus: offset), let weekday = days.weekday(of: day) else { continue }
            for window in windows where window.days.contains(where: { $0.index == weekday }) {
                guard let start = DowntimeWindow.minutes(window.start), let end = DowntimeWindow.minutes(window.end),
                      let endDay = end > start ? day : days.day(day, plus: 1),
                      let from = days.instant(of: day, minute: start), let to = days.instant(of: endDay, minute: end)
                else { continue }
                // A window wholly inside the spring-forward gap never happens that night.
                if to > from { found.append(Interval(start: Millis.of(from), end: Millis.of(to))) }
            }
        }
        var merged: [Interval] = []
        for interval in found.sorted(by: { $0.start < $1.start }) {
            if let last = merged.last, interval.start <= last.end {
                merged[merged.count - 1].end = max(last.end, interval.end)
            } else {
                merged.append(interval)
            }
        }
        return merged
    }

    static func state(_ row: DowntimeRow, now: Int64, days: LocalDays) -> State {
        let intervals = Self.intervals(row.decodedWindows, around: now, days: days)
        let current = intervals.first { $0.start <= now && now < $0.end }
        let lifted = row.liftedUntilMillis.flatMap { $0 > now ? $0 : nil }
        return State(inWindow: current != nil, liftedUntil: current == nil ? nil : lifted, until: current?.end,
                     nextStart: intervals.first { $0.start > now }?.start)
    }

    /// The child's downtime now; nil when it has no schedule.
    static func state(of child: EarnedTime.Child, now: Int64, _ db: Database) throws -> State? {
        guard let row = try DowntimeRow.of(child).fetchOne(db), !row.decodedWindows.isEmpty else { return nil }
        return Self.state(row, now: now, days: try Ingest.localDays(of: child.family, db))
    }

    // MARK: A parent's schedule

    /// Refuses a schedule a parent could not mean: malformed times, an empty window, a day
    /// listed twice, windows that overlap (on the same day or across midnight).
    static func check(_ params: SetScheduleParams) throws(RPCError) {
        guard params.windows.count <= DowntimeLimits.windows else {
            throw RPCError(.invalidParams, "params.windows: at most \(DowntimeLimits.windows) windows (this schedule has \(params.windows.count))")
        }
        // Each window's occurrences as minutes of the week (Monday 00:00 is 0).
        var occurrences: [(start: Int, length: Int, window: DowntimeWindow, day: Weekday)] = []
        for (index, window) in params.windows.enumerated() {
            let name = "params.windows[\(index)]"
            guard let start = DowntimeWindow.minutes(window.start) else { throw RPCError(.invalidParams, "\(name).start: a time as HH:MM (00:00 to 23:59), not \"\(window.start)\"") }
            guard let end = DowntimeWindow.minutes(window.end) else { throw RPCError(.invalidParams, "\(name).end: a time as HH:MM (00:00 to 23:59), not \"\(window.end)\"") }
            guard start != end else {
                throw RPCError(.invalidParams, "\(name): from \(window.start) to \(window.end) is no time at all; give an end different from the start (an end before the start is the next morning's)")
            }
            guard !window.days.isEmpty else { throw RPCError(.invalidParams, "\(name).days: at least one day (mon, tue, wed, thu, fri, sat, sun)") }
            if let twice = window.days.first(where: { day in window.days.filter { $0 == day }.count > 1 }) {
                throw RPCError(.invalidParams, "\(name).days: \(twice.rawValue) is listed twice")
            }
            let length = end > start ? end - start : end + 1440 - start
            occurrences += window.days.map { (start: $0.index * 1440 + start, length: length, window: window, day: $0) }
        }
        let week = 7 * 1440
        let sorted = occurrences.sorted { $0.start < $1.start }
        for (index, this) in sorted.enumerated() where sorted.count > 1 {
            let next = sorted[(index + 1) % sorted.count]
            let nextStart = index + 1 < sorted.count ? next.start : next.start + week
            if this.start + this.length > nextStart {
                let first = "\(this.window.words) (from \(this.day.name))"
                let second = this.window == next.window ? "itself on \(next.day.name)" : "\(next.window.words) (from \(next.day.name))"
                throw RPCError(.invalidParams, "params.windows: \(first) overlaps \(second); windows may touch but not overlap")
            }
        }
        if let allowed = params.alwaysAllowed {
            guard allowed.count <= DowntimeLimits.alwaysAllowed else {
                throw RPCError(.invalidParams, "params.alwaysAllowed: at most \(DowntimeLimits.alwaysAllowed) apps (this list has \(allowed.count))")
            }
            for (index, app) in allowed.enumerated() { try Parenting.check(text: app, "params.alwaysAllowed[\(index)]", empty: false) }
        }
    }

    /// Replaces the child's schedule, shields or unshields it at once if the family's clock
    /// is in (or out of) a window now, and audits the change.
    static func set(_ params: SetScheduleParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> DowntimeSchedule {
        let child = try ChildLookup.child(params.child, family: family, db)
        let before = try DowntimeRow.of(child).fetchOne(db)
        var seen = Set<String>()
        let allowed = (params.alwaysAllowed ?? before?.allowed ?? []).filter { seen.insert($0).inserted }
        let row = DowntimeRow(family: family, child: child.child, windows: try Self.json(params.windows), alwaysAllowed: try Self.json(allowed),
                              liftOnApproval: params.liftOnApproval ?? before?.liftOnApproval ?? true,
                              // A lift on now stays (an edit of the apps allowed does not end it).
                              liftedUntilMillis: before?.liftedUntilMillis.flatMap { $0 > now ? $0 : nil },
                              toldOn: before?.toldOn ?? false, updatedMillis: now, updatedByName: parent.name)
        try row.save(db)
        try EarnedTime.computeBalance(child, now: now, db)
        _ = try Self.tell(row, now: now, db)
        let info = try Self.info(row, now: now, db)
        let names = info.alwaysAllowedNames.isEmpty ? "" : " (always allowed: \(info.alwaysAllowedNames.joined(separator: ", ")))"
        let words = params.windows.isEmpty
            ? "turned off \(info.childName)'s downtime"
            : "set \(info.childName)'s downtime: \(params.windows.map(\.words).joined(separator: "; "))\(names)"
        try FamilyLog.audit(family: family, actor: parent, action: "downtime.set", target: info.child, words: words,
                            metadata: ["child": .string(info.child), "childName": .string(info.childName),
                                       "windows": .array(params.windows.map { .string($0.words) }), "alwaysAllowed": .array(allowed.map(JSONValue.string))],
                            at: now, db)
        return info
    }

    /// The family's children's schedules (or one child's), children without one included.
    static func list(family: String, child: EarnedTime.Child?, now: Int64, _ db: Database) throws -> [DowntimeSchedule] {
        let children = try child.map { [$0] } ?? ChildLookup.children(of: family, db)
        return try children.map { child in
            let row = try DowntimeRow.of(child).fetchOne(db)
                ?? DowntimeRow(family: family, child: child.child, windows: "[]", alwaysAllowed: "[]", liftOnApproval: true, liftedUntilMillis: nil,
                               toldOn: false, updatedMillis: nil, updatedByName: nil)
            return try Self.info(row, now: now, db)
        }
    }

    static func info(_ row: DowntimeRow, now: Int64, _ db: Database) throws -> DowntimeSchedule {
        let child = EarnedTime.Child(family: row.family, child: row.child)
        let days = try Ingest.localDays(of: row.family, db)
        let state = Self.state(row, now: now, days: days)
        let names = try Self.appNames(family: row.family, db)
        return DowntimeSchedule(
            child: ChildLookup.id(child), childName: try Alerts.name(child, db), windows: row.decodedWindows, alwaysAllowed: row.allowed,
            alwaysAllowedNames: row.allowed.map { names[$0] ?? $0 }, liftOnApproval: row.liftOnApproval, active: state.on,
            activeUntil: state.until.map(Millis.date), nextStart: state.nextStart.map(Millis.date), liftedUntil: state.liftedUntil.map(Millis.date),
            updatedAt: row.updatedMillis.map(Millis.date), updatedBy: row.updatedByName, timeZone: days.timeZone.identifier)
    }

    /// The family's apps by bundle id, named as its rules name them.
    static func appNames(family: String, _ db: Database) throws -> [String: String] {
        let rule = AppRuleEntry.Columns.self
        var names: [String: String] = [:]
        for row in try Row.fetchAll(db, AppRuleEntry.select(rule.app, rule.displayName).filter(rule.family == family && rule.displayName != nil)) {
            names[row[rule.app]] = row[rule.displayName]
        }
        return names
    }

    // MARK: The family's clock

    /// An approval of more time during downtime lifts it for the minutes approved (never
    /// past the end of this stretch of downtime), when the schedule says so. Returns until when.
    static func lift(_ child: EarnedTime.Child, minutes: Int64, now: Int64, _ db: Database) throws -> Int64? {
        guard var row = try DowntimeRow.of(child).fetchOne(db), row.liftOnApproval else { return nil }
        let state = Self.state(row, now: now, days: try Ingest.localDays(of: child.family, db))
        guard state.on, let end = state.until else { return nil }
        // Never past this stretch of downtime: the next one holds as set.
        row.liftedUntilMillis = min(now + minutes * 60_000, end)
        try row.update(db)
        return row.liftedUntilMillis
    }

    /// Children whose downtime began or ended (or whose lift ran out) since their devices
    /// were told: computed again (the shield command), and told. Returns how many.
    @discardableResult
    static func tick(now: Int64, _ db: Database) throws -> Int {
        var changed = 0
        for row in try DowntimeRow.fetchAll(db) {
            let state = Self.state(row, now: now, days: try Ingest.localDays(of: row.family, db))
            guard state.on != row.toldOn else { continue }
            try EarnedTime.computeBalance(EarnedTime.Child(family: row.family, child: row.child), now: now, db)
            if try Self.tell(row, now: now, db) { changed += 1 }
        }
        return changed
    }

    /// Tells the child's devices that downtime began or ended, when that is news to them.
    private static func tell(_ row: DowntimeRow, now: Int64, _ db: Database) throws -> Bool {
        let days = try Ingest.localDays(of: row.family, db)
        let state = Self.state(row, now: now, days: days)
        guard state.on != row.toldOn else { return false }
        try db.execute(sql: "UPDATE downtime SET told_on = ? WHERE family = ? AND child = ?", arguments: [state.on, row.family, row.child])
        let child = EarnedTime.Child(family: row.family, child: row.child)
        let title: String
        var body: String?
        if state.on {
            title = "Downtime until \(state.until.map { ChildLookup.clock(Millis.date($0), days: days) } ?? "a parent ends it")"
            let names = try Self.appNames(family: row.family, db)
            body = row.allowed.isEmpty ? "Reward apps are shielded until then." : "Reward apps are shielded until then; \(row.allowed.map { names[$0] ?? $0 }.joined(separator: ", ")) stay open."
        } else if let lifted = row.liftedUntilMillis, lifted > now, state.inWindow {
            title = "Downtime is lifted until \(ChildLookup.clock(Millis.date(lifted), days: days))"
        } else {
            title = "Downtime is over"
        }
        for device in try Grants.devices(of: child, db) {
            try FamilyLog.notifyChild(family: row.family, deviceId: device, title: title, body: body,
                                      data: ["event": .string(state.on ? "downtimeStarted" : "downtimeEnded")], collapseKey: "downtime:\(row.child)", db)
        }
        return true
    }

    /// The next boundary of any child's downtime (a window's start or end, a lift's end).
    static func nextBoundary(now: Int64, _ db: Database) throws -> Int64? {
        try DowntimeRow.fetchAll(db).compactMap { row in
            Self.state(row, now: now, days: try Ingest.localDays(of: row.family, db)).nextBoundary
        }.min()
    }

    static func json<T: Encodable>(_ value: T) throws -> String {
        try RPCJSON.encodeText(value)
    }
}

/// `downtime`: a child's schedule, as set (the aggregator's database is its only home).
struct DowntimeRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "downtime"
    var family: String
    var child: String
    /// `[DowntimeWindow]` as JSON.
    var windows: String
    /// `[String]` as JSON.
    var alwaysAllowed: String
    var liftOnApproval: Bool
    var liftedUntilMillis: Int64?
    /// Whether the child's devices were last told downtime is on.
    var toldOn: Bool
    var updatedMillis: Int64?
    var updatedByName: String?

    enum CodingKeys: String, CodingKey {
        case family, child, windows
        case alwaysAllowed = "always_allowed", liftOnApproval = "lift_on_approval", liftedUntilMillis = "lifted_until_ms", toldOn = "told_on"
        case updatedMillis = "updated_ms", updatedByName = "updated_by_name"
    }

    static func of(_ child: EarnedTime.Child) -> QueryInterfaceRequest<DowntimeRow> {
        Self.filter(Column("family") == child.family && Column("child") == child.child)
    }

    var decodedWindows: [DowntimeWindow] {
        (try? RPCJSON.decode([DowntimeWindow].self, from: self.windows)) ?? []
    }

    var allowed: [String] {
        (try? RPCJSON.decode([String].self, from: self.alwaysAllowed)) ?? []
    }
}
