import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RPCCore
import StoreAPI

/// A child's requests for more time, in the aggregator's database: asked, answered once
/// (the first answer wins: `status` moves from `open` in one transaction), expired.
enum TimeRequests {
    /// The child device asks; returns the request as saved.
    static func ask(_ params: AskForTimeParams, child: EarnedTime.Child, device: Actor, now: Int64, _ db: Database) throws -> TimeRequestInfo {
        try Self.expireDue(family: child.family, now: now, db)
        let settings = try FamilyEntry.row(child.family)
            .select(FamilyEntry.Columns.requestExpiryMinutes, FamilyEntry.Columns.maxOpenRequests).fetchOne(db)
        let expiryMinutes: Int64 = settings?[0] ?? 120
        let most: Int64 = settings?[1] ?? 3
        let open = try TimeRequestRow.open(child.family).filter(TimeRequestRow.Columns.child == child.child).fetchCount(db)
        let childName = try Alerts.name(child, db)
        guard open < most else {
            throw RPCError(.limitExceeded, "\(childName) already has \(open) requests waiting for an answer (the family allows \(most)); wait for a parent to answer one")
        }
        let minutes = params.restOfDay == true ? try ChildLookup.minutesLeftToday(family: child.family, now: now, db) : params.minutes ?? 0
        let paused = try PauseRow.on(child).fetchCount(db) > 0
        let row = TimeRequestRow(family: child.family, id: "request-\(UUID().uuidString.lowercased())", child: child.child, deviceId: device.deviceId,
                                 minutes: minutes, restOfDay: params.restOfDay == true, app: params.app, appName: params.appName, note: params.note,
                                 createdMillis: now, expiresMillis: now + expiryMinutes * 60_000, whilePaused: paused)
        try row.insert(db)
        let info = try Self.info(row, db)
        try RecordOutboxRow.queue(row.record, named: row.id, family: row.family, db)
        try FamilyLog.audit(family: row.family, actor: device, action: "time.ask", target: ChildLookup.id(child),
                            words: "asked for \(info.asked)\(info.note.map { ": “\($0)”" } ?? "")", metadata: Self.metadata(info), at: now, db)
        var body = info.note.map { "“\($0)”" } ?? "Approve or deny it in the app."
        if paused { body += " Their reward apps are paused." }
        if let downtime = try Downtime.state(of: child, now: now, db), downtime.on, let until = downtime.until {
            body += " It is downtime until \(ChildLookup.clock(Millis.date(until), days: try ChildLookup.days(child.family, db)))."
        }
        try FamilyLog.notifyParents(family: row.family, alert: Alert(title: info.sentence.components(separatedBy: ": “").first ?? info.sentence, body: body),
                                    data: Self.data(info, event: "timeRequest"), collapseKey: "request:\(row.id)", db)
        return info
    }

    /// A parent answers. The first answer wins: a request no longer open gets `conflict`
    /// saying who answered it and how. An approval enters its minutes' points in the ledger
    /// (an adjustment by the parent) and computes the child's balance again.
    static func answer(_ params: AnswerRequestParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> TimeRequestInfo {
        try Self.expireDue(family: family, now: now, db)
        guard var row = try TimeRequestRow.filter(TimeRequestRow.Columns.family == family && TimeRequestRow.Columns.id == params.request).fetchOne(db) else {
            throw RPCError(.notFound, "no request \(params.request) in this family: aggregator.listRequests lists them")
        }
        guard row.status == TimeRequestStatus.open.rawValue else {
            let info = try Self.info(row, db)
            let days = try ChildLookup.days(family, db)
            let when = info.answeredAt.map { " at \(ChildLookup.clock($0, days: days))" } ?? ""
            let message = row.status == TimeRequestStatus.expired.rawValue
                ? "this request expired unanswered\(when.isEmpty ? "" : when); \(info.childName) can ask again"
                : "\(info.answeredBy ?? "Another parent") already \(row.status == "approved" ? "approved" : "denied") this request\(when)\(row.status == "approved" ? " (\(TimeRequestInfo.minutesWords(info.grantedMinutes ?? info.minutes)))" : "")"
            throw RPCError(.conflict, message, data: try JSONValue(encoding: info))
        }
        let child = EarnedTime.Child(family: family, child: row.child)
        row.status = params.approve ? TimeRequestStatus.approved.rawValue : TimeRequestStatus.denied.rawValue
        row.answeredMillis = now
        row.answeredBy = parent.deviceId
        row.answeredByName = parent.name
        row.reply = params.reply
        if params.approve {
            let minutes = try params.minutes ?? (row.restOfDay ? ChildLookup.minutesLeftToday(family: family, now: now, db) : row.minutes)
            guard let points = try ChildLookup.points(forMinutes: minutes, family: family, db) else {
                throw RPCError(.invalidParams, "the family's points buy no reward time (its rewardSecondsPerPoint is 0): set a rate first, or grant points with aggregator.grant")
            }
            row.grantedMinutes = minutes
            let info = try Self.info(row, db)
            try Ledger.enter(child, type: "adjustment", points: points, reason: "Request approved: \(info.asked)\(params.reply.map { " (\($0))" } ?? "")",
                             name: "grant-\(row.id)", by: parent, now: now, db)
            // During downtime, the time approved is time to use now (when the schedule says so).
            _ = try Downtime.lift(child, minutes: minutes, now: now, db)
        }
        // One statement decides: only an open request moves (the transaction is the
        // database's only writer, so the check above and this agree).
        try row.update(db)
        let info = try Self.info(row, db)
        try RecordOutboxRow.queue(row.record, named: row.id, family: family, db)
        let words = params.approve
            ? "approved \(TimeRequestInfo.minutesWords(row.grantedMinutes ?? row.minutes)) for \(info.childName)\(params.reply.map { ": “\($0)”" } ?? "")"
            : "said no to \(info.childName)'s \(info.asked)\(params.reply.map { ": “\($0)”" } ?? "")"
        try FamilyLog.audit(family: family, actor: parent, action: params.approve ? "time.approve" : "time.deny", target: ChildLookup.id(child),
                            words: words, metadata: Self.metadata(info), at: now, db)
        let title = params.approve
            ? "\(parent.name) said yes: \(TimeRequestInfo.minutesWords(row.grantedMinutes ?? row.minutes)) more"
            : "\(parent.name) said no to \(info.asked)"
        try FamilyLog.notifyChild(family: family, deviceId: row.deviceId, title: title, body: params.reply.map { "“\($0)”" },
                                  data: Self.data(info, event: "timeRequestAnswered"), collapseKey: "request:\(row.id)", db)
        // The other parents' alert of this request is answered: a hint replaces it where undelivered.
        try FamilyLog.notifyParents(family: family, alert: nil, data: Self.data(info, event: "timeRequestAnswered"), collapseKey: "request:\(row.id)", db)
        if params.approve { try EarnedTime.computeBalance(child, now: now, db) }
        return info
    }

    /// Open requests past their time become `expired`; the child's device hears of it.
    @discardableResult
    static func expireDue(family: String? = nil, now: Int64, _ db: Database) throws -> Int {
        var due = TimeRequestRow.filter(TimeRequestRow.Columns.status == TimeRequestStatus.open.rawValue && TimeRequestRow.Columns.expiresMillis <= now)
        if let family { due = due.filter(TimeRequestRow.Columns.family == family) }
        let rows = try due.fetchAll(db)
        for var row in rows {
            row.status = TimeRequestStatus.expired.rawValue
            try row.update(db)
            let info = try Self.info(row, db)
            try RecordOutboxRow.queue(row.record, named: row.id, family: row.family, db)
            try FamilyLog.audit(family: row.family, actor: .server, action: "time.expire", target: info.child,
                                words: "let \(info.childName)'s request for \(info.asked) expire: nobody answered it in time", metadata: Self.metadata(info),
                                at: row.expiresMillis, db)
            try FamilyLog.notifyChild(family: row.family, deviceId: row.deviceId, title: "Nobody answered your request for \(info.asked)",
                                      body: "It expired. You can ask again.", data: Self.data(info, event: "timeRequestExpired"),
                                      collapseKey: "request:\(row.id)", db)
            try FamilyLog.notifyParents(family: row.family, alert: nil, data: Self.data(info, event: "timeRequestExpired"), collapseKey: "request:\(row.id)", db)
        }
        return rows.count
    }

    /// When the next open request expires.
    static func nextExpiry(_ db: Database) throws -> Int64? {
        try TimeRequestRow.filter(TimeRequestRow.Columns.status == TimeRequestStatus.open.rawValue)
            .select(min(TimeRequestRow.Columns.expiresMillis), as: Int64.self).fetchOne(db)
    }

    /// Open ones on top, then answered and expired; newest first in each.
    static func list(family: String, child: String?, status: TimeRequestStatus?, limit: Int, _ db: Database) throws -> [TimeRequestInfo] {
        var rows = TimeRequestRow.filter(TimeRequestRow.Columns.family == family)
        if let child { rows = rows.filter(TimeRequestRow.Columns.child == child) }
        if let status { rows = rows.filter(TimeRequestRow.Columns.status == status.rawValue) }
        let ordered = rows.order(sql: "status = 'open' DESC, created_ms DESC")
        return try ordered.limit(limit).fetchAll(db).map { try Self.info($0, db) }
    }

    static func info(_ row: TimeRequestRow, _ db: Database) throws -> TimeRequestInfo {
        let child = EarnedTime.Child(family: row.family, child: row.child)
        let deviceName = try DeviceEntry.filter(DeviceEntry.Columns.family == row.family && DeviceEntry.Columns.deviceId == row.deviceId)
            .select(DeviceEntry.Columns.deviceName, as: String?.self).fetchOne(db) ?? nil
        return TimeRequestInfo(
            id: row.id, child: ChildLookup.id(child), childName: try Alerts.name(child, db), deviceId: row.deviceId, deviceName: deviceName,
            minutes: row.minutes, restOfDay: row.restOfDay, app: row.app, appName: row.appName, note: row.note,
            status: TimeRequestStatus(rawValue: row.status) ?? .open, createdAt: Millis.date(row.createdMillis), expiresAt: Millis.date(row.expiresMillis),
            whilePaused: row.whilePaused, answeredAt: row.answeredMillis.map(Millis.date), answeredBy: row.answeredByName,
            answeredByDeviceId: row.answeredBy, grantedMinutes: row.grantedMinutes, reply: row.reply)
    }

    private static func data(_ info: TimeRequestInfo, event: String) -> [String: JSONValue] {
        var data: [String: JSONValue] = ["event": .string(event), "request": .string(info.id), "child": .string(info.child),
                                         "childName": .string(info.childName), "status": .string(info.status.rawValue), "minutes": .int(info.minutes)]
        if let granted = info.grantedMinutes { data["grantedMinutes"] = .int(granted) }
        if let app = info.app { data["app"] = .string(app) }
        return data
    }

    private static func metadata(_ info: TimeRequestInfo) -> [String: JSONValue] {
        var data = Self.data(info, event: "")
        data["event"] = nil
        if let note = info.note { data["note"] = .string(note) }
        if let reply = info.reply { data["reply"] = .string(reply) }
        return data
    }
}
