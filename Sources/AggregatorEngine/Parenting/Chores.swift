import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RPCCore
import UsageModel

/// Chores: parents set them, the child marks one done once per occurrence (a day of the
/// family's, or once for a one-off), and the first parent's answer is taken: an approval
/// enters the chore's points as an `adjustment` naming the approver, in the same
/// transaction that moves the completion out of `waiting` (so two approvals accrue once).
enum Chores {
    // MARK: A parent's chores

    static func set(_ params: SetChoreParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> ChoreInfo {
        var row: ChoreRow
        if let id = params.id {
            guard let known = try ChoreRow.filter(key: ["family": family, "id": id]).fetchOne(db), !known.removed else {
                throw RPCError(.notFound, "no chore \(id) in this family: aggregator.listChores lists them")
            }
            if let child = params.child, ChildLookup.id(EarnedTime.Child(family: family, child: known.child)) != child {
                throw RPCError(.invalidParams, "params.child: a chore stays with its child; remove it and add one for \(child)")
            }
            row = known
            if params.remove == true {
                row.removed = true
                try row.update(db)
                let info = try Self.info(row, now: now, db)
                try FamilyLog.audit(family: family, actor: parent, action: "chore.remove", target: info.child,
                                    words: "removed \(info.childName)'s chore “\(info.title)”", metadata: Self.metadata(info), at: now, db)
                return info
            }
            row.title = params.title ?? row.title
            row.points = params.points ?? row.points
            row.repeat = params.repeat?.rawValue ?? row.repeat
            if let days = params.days { row.days = try Downtime.json(days) }
            if row.repeat != ChoreRepeat.weekly.rawValue { row.days = "[]" }
        } else {
            guard params.remove != true else { throw RPCError(.invalidParams, "params.remove: name the chore to remove (params.id)") }
            guard let childId = params.child, let title = params.title, let points = params.points else {
                throw RPCError(.invalidParams, "params: a new chore needs child, title and points")
            }
            let child = try ChildLookup.child(childId, family: family, db)
            let count = try ChoreRow.filter(Column("family") == family && Column("child") == child.child && Column("removed") == false).fetchCount(db)
            guard count < ChoreLimits.perChild else {
                throw RPCError(.limitExceeded, "\(try Alerts.name(child, db)) already has \(count) chores (at most \(ChoreLimits.perChild)); remove one first")
            }
            row = ChoreRow(family: family, id: "chore-\(FamilyLog.randomHex().prefix(8))", child: child.child, title: title, points: points,
                           repeat: (params.repeat ?? .daily).rawValue, days: try Downtime.json(params.days ?? []), createdMillis: now,
                           createdByName: parent.name, removed: false)
        }
        let weekly = row.repeat == ChoreRepeat.weekly.rawValue
        guard !weekly || !row.decodedDays.isEmpty else { throw RPCError(.invalidParams, "params.days: a weekly chore needs the days it is for (mon … sun)") }
        guard weekly || params.days == nil || params.days?.isEmpty == true else {
            throw RPCError(.invalidParams, "params.days: only a weekly chore has days; set repeat to weekly, or leave days out")
        }
        try row.save(db)
        let info = try Self.info(row, now: now, db)
        let words = params.id == nil ? "added a chore for \(info.childName): “\(info.title)”, \(info.points) points, \(Self.often(info))"
                                     : "changed \(info.childName)'s chore “\(info.title)”: \(info.points) points, \(Self.often(info))"
        try FamilyLog.audit(family: family, actor: parent, action: "chore.set", target: info.child, words: words, metadata: Self.metadata(info), at: now, db)
        for device in try Grants.devices(of: EarnedTime.Child(family: family, child: row.child), db) where params.id == nil {
            try FamilyLog.notifyChild(family: family, deviceId: device, title: "A new chore: \(info.title)", body: "\(info.points) points, \(Self.often(info)).",
                                      data: ["event": .string("choreAdded"), "chore": .string(info.id)], collapseKey: "chore:\(info.id)", db)
        }
        return info
    }

    static func list(family: String, child: EarnedTime.Child?, now: Int64, _ db: Database) throws -> ChoreList {
        var chores = ChoreRow.filter(Column("family") == family && Column("removed") == false)
        var completions = CompletionRow.filter(Column("family") == family)
        if let child {
            chores = chores.filter(Column("child") == child.child)
            completions = completions.filter(Column("child") == child.child)
        }
        return ChoreList(
            chores: try chores.order(Column("child"), Column("title")).fetchAll(db).map { try Self.info($0, now: now, db) },
            completions: try completions.order(sql: "status = 'waiting' DESC, done_ms DESC").limit(50).fetchAll(db).map { try Self.completion($0, db) })
    }

    // MARK: The child's "done" and the parent's answer

    static func done(_ params: ChoreDoneParams, child: EarnedTime.Child, device: Actor, now: Int64, _ db: Database) throws -> ChoreCompletion {
        guard let chore = try ChoreRow.filter(key: ["family": child.family, "id": params.chore]).fetchOne(db), chore.child == child.child, !chore.removed else {
            throw RPCError(.notFound, "no chore \(params.chore) for this child: aggregator.listChores lists them")
        }
        let days = try ChildLookup.days(child.family, db)
        let today = days.day(containing: Millis.date(now))
        let info = try Self.info(chore, now: now, db)
        guard info.dueToday else {
            if chore.repeat == ChoreRepeat.once.rawValue {
                throw RPCError(.conflict, "“\(chore.title)” is done and approved already")
            }
            let weekday = days.weekday(of: today).map { Weekday.allCases[$0].name } ?? "today"
            throw RPCError(.invalidParams, "“\(chore.title)” is for \(Self.dayNames(chore.decodedDays)); today is \(weekday)")
        }
        let occurrence = chore.repeat == ChoreRepeat.once.rawValue ? "once" : today
        if let counted = try CompletionRow.filter(Column("family") == child.family && Column("chore") == chore.id && Column("occurrence") == occurrence
                                                  && Column("status") != ChoreStatus.rejected.rawValue).fetchOne(db) {
            let when = occurrence == "once" ? "already" : "today already"
            let message = counted.status == ChoreStatus.waiting.rawValue
                ? "“\(chore.title)” is marked done \(when), waiting for a parent"
                : "“\(chore.title)” is done \(when): \(counted.answeredByName ?? "a parent") approved it"
            throw RPCError(.conflict, message, data: try JSONValue(encoding: try Self.completion(counted, db)))
        }
        let row = CompletionRow(family: child.family, id: "done-\(FamilyLog.randomHex().prefix(8))", chore: chore.id, child: child.child, occurrence: occurrence,
                                points: chore.points, deviceId: device.deviceId, note: params.note, status: ChoreStatus.waiting.rawValue, doneMillis: now)
        try row.insert(db)
        let completion = try Self.completion(row, db)
        try FamilyLog.audit(family: child.family, actor: device, action: "chore.done", target: completion.child,
                            words: "did “\(chore.title)”\(params.note.map { ": “\($0)”" } ?? "")", metadata: Self.metadata(completion), at: now, db)
        try FamilyLog.notifyParents(family: child.family, alert: Alert(title: completion.sentence.components(separatedBy: ": “").first ?? completion.sentence,
                                                                       body: params.note.map { "“\($0)”" } ?? "Approve it or send it back in the app."),
                                    data: Self.data(completion, event: "choreDone"), collapseKey: "chore:\(row.id)", db)
        return completion
    }

    static func answer(_ params: AnswerChoreParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> ChoreCompletion {
        guard var row = try CompletionRow.filter(key: ["family": family, "id": params.completion]).fetchOne(db) else {
            throw RPCError(.notFound, "no chore done \(params.completion) in this family: aggregator.listChores lists them")
        }
        guard row.status == ChoreStatus.waiting.rawValue else {
            let known = try Self.completion(row, db)
            let days = try ChildLookup.days(family, db)
            let when = row.answeredMillis.map { " at \(ChildLookup.clock(Millis.date($0), days: days))" } ?? ""
            throw RPCError(.conflict, "\(row.answeredByName ?? "Another parent") already \(row.status == "approved" ? "approved" : "sent back") this\(when)",
                           data: try JSONValue(encoding: known))
        }
        guard let chore = try ChoreRow.filter(key: ["family": family, "id": row.chore]).fetchOne(db) else {
            throw RPCError(.notFound, "the chore of \(params.completion) is gone")
        }
        row.status = params.approve ? ChoreStatus.approved.rawValue : ChoreStatus.rejected.rawValue
        row.answeredMillis = now
        row.answeredBy = parent.deviceId
        row.answeredByName = parent.name
        row.reason = params.reason
        try row.update(db)
        let child = EarnedTime.Child(family: family, child: row.child)
        if params.approve {
            // Named by the completion: whatever happens, one completion is one entry.
            try Ledger.enter(child, type: "adjustment", points: row.points, reason: "Chore: \(chore.title) (approved by \(parent.name))",
                             name: "chore-\(row.id)", by: parent, now: now, db)
            try EarnedTime.computeBalance(child, now: now, db)
        }
        let completion = try Self.completion(row, db)
        try FamilyLog.audit(family: family, actor: parent, action: params.approve ? "chore.approve" : "chore.reject", target: completion.child,
                            words: params.approve ? "approved \(completion.childName)'s “\(chore.title)”: +\(row.points) points"
                                                  : "sent back \(completion.childName)'s “\(chore.title)”\(params.reason.map { ": “\($0)”" } ?? "")",
                            metadata: Self.metadata(completion), at: now, db)
        let title = params.approve ? "\(parent.name) approved “\(chore.title)”: +\(row.points) points" : "\(parent.name) sent back “\(chore.title)”"
        try FamilyLog.notifyChild(family: family, deviceId: row.deviceId, title: title, body: params.reason.map { "“\($0)”" },
                                  data: Self.data(completion, event: "choreAnswered"), collapseKey: "chore:\(row.id)", db)
        try FamilyLog.notifyParents(family: family, alert: nil, data: Self.data(completion, event: "choreAnswered"), collapseKey: "chore:\(row.id)", db)
        return completion
    }

    // MARK: Reading

    static func info(_ row: ChoreRow, now: Int64, _ db: Database) throws -> ChoreInfo {
        let child = EarnedTime.Child(family: row.family, child: row.child)
        let days = try ChildLookup.days(row.family, db)
        let today = days.day(containing: Millis.date(now))
        let repeats = ChoreRepeat(rawValue: row.repeat) ?? .daily
        let occurrence = repeats == .once ? "once" : today
        let latest = try CompletionRow.filter(Column("family") == row.family && Column("chore") == row.id && Column("occurrence") == occurrence)
            .order(Column("done_ms").desc).fetchOne(db)
        let status = latest.flatMap { ChoreStatus(rawValue: $0.status) }
        let due: Bool
        switch repeats {
        case .once: due = status != .approved
        case .daily: due = true
        case .weekly: due = days.weekday(of: today).map { weekday in row.decodedDays.contains { $0.index == weekday } } ?? false
        }
        return ChoreInfo(id: row.id, child: ChildLookup.id(child), childName: try Alerts.name(child, db), title: row.title, points: row.points, repeat: repeats,
                         days: row.decodedDays, dueToday: due, todayStatus: status, removed: row.removed, createdBy: row.createdByName,
                         createdAt: Millis.date(row.createdMillis))
    }

    static func completion(_ row: CompletionRow, _ db: Database) throws -> ChoreCompletion {
        let chore = try ChoreRow.filter(key: ["family": row.family, "id": row.chore]).fetchOne(db)
        let child = EarnedTime.Child(family: row.family, child: row.child)
        return ChoreCompletion(id: row.id, chore: row.chore, title: chore?.title ?? row.chore, child: ChildLookup.id(child), childName: try Alerts.name(child, db),
                               points: row.points, occurrence: row.occurrence, note: row.note, status: ChoreStatus(rawValue: row.status) ?? .waiting,
                               doneAt: Millis.date(row.doneMillis), deviceId: row.deviceId, answeredAt: row.answeredMillis.map(Millis.date),
                               answeredBy: row.answeredByName, reason: row.reason)
    }

    /// "once", "every day", "on Mondays and Thursdays".
    static func often(_ info: ChoreInfo) -> String {
        switch info.repeat {
        case .once: "once"
        case .daily: "every day"
        case .weekly: "on \(Self.dayNames(info.days))"
        }
    }

    /// "Mondays and Thursdays".
    static func dayNames(_ days: [Weekday]) -> String {
        let names = days.sorted { $0.index < $1.index }.map { "\($0.name)s" }
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }

    /// Removes the child's chores and their history (the child is gone).
    static func forget(_ child: EarnedTime.Child, _ db: Database) throws {
        try ChoreRow.filter(Column("family") == child.family && Column("child") == child.child).deleteAll(db)
        try CompletionRow.filter(Column("family") == child.family && Column("child") == child.child).deleteAll(db)
    }

    private static func data(_ completion: ChoreCompletion, event: String) -> [String: JSONValue] {
        ["event": .string(event), "completion": .string(completion.id), "chore": .string(completion.chore), "child": .string(completion.child),
         "childName": .string(completion.childName), "title": .string(completion.title), "points": .int(completion.points),
         "status": .string(completion.status.rawValue)]
    }

    private static func metadata(_ completion: ChoreCompletion) -> [String: JSONValue] {
        var data = Self.data(completion, event: "")
        data["event"] = nil
        if let note = completion.note { data["note"] = .string(note) }
        if let reason = completion.reason { data["reason"] = .string(reason) }
        return data
    }

    private static func metadata(_ info: ChoreInfo) -> [String: JSONValue] {
        ["chore": .string(info.id), "child": .string(info.child), "childName": .string(info.childName), "title": .string(info.title),
         "points": .int(info.points), "repeat": .string(info.repeat.rawValue), "when": .string(info.when)]
    }
}

/// `chores`.
struct ChoreRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "chores"
    var family: String
    var id: String
    var child: String
    var title: String
    var points: Int64
    var `repeat`: String
    /// `[Weekday]` as JSON.
    var days: String
    var createdMillis: Int64
    var createdByName: String?
    var removed: Bool

    enum CodingKeys: String, CodingKey {
        case family, id, child, title, points, `repeat`, days, removed
        case createdMillis = "created_ms", createdByName = "created_by_name"
    }

    var decodedDays: [Weekday] {
        (try? RPCJSON.decode([Weekday].self, from: self.days)) ?? []
    }
}

/// `chore_completions`.
struct CompletionRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "chore_completions"
    var family: String
    var id: String
    var chore: String
    var child: String
    var occurrence: String
    /// The chore's points when it was done (a later change of the chore does not change it).
    var points: Int64
    var deviceId: String
    var note: String?
    var status: String
    var doneMillis: Int64
    var answeredMillis: Int64?
    var answeredBy: String?
    var answeredByName: String?
    var reason: String?

    enum CodingKeys: String, CodingKey {
        case family, id, chore, child, occurrence, points, note, status, reason
        case deviceId = "device_id", doneMillis = "done_ms", answeredMillis = "answered_ms", answeredBy = "answered_by", answeredByName = "answered_by_name"
    }
}
