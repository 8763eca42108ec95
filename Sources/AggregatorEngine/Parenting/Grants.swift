import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import RPCCore
import StoreAPI

/// Points a parent adds to or takes from a child's earned time, entered in the ledger by
/// the server: in the aggregator's `ledger` at once (the balance and shield move in the
/// same transaction) and queued for the store, whose copy comes back through the change
/// feed as the same row.
enum Ledger {
    /// Enters `points` (> 0) of `type` (`adjustment`, `deduction`, `expiry`) for the child.
    static func enter(_ child: EarnedTime.Child, type: String, points: Int64, reason: String, name: String, by actor: Actor, now: Int64, _ db: Database) throws {
        try db.execute(cached: """
            INSERT INTO ledger(family, record_name, child, type, amount, at_ms) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT(family, record_name) DO NOTHING
            """, arguments: [child.family, name, child.child, type, points, now])
        let entry = PointsLedgerEntry(familyRef: .inDefaultZone(child.family), childRef: .inDefaultZone(child.child), type: type, amount: points,
                                      timestamp: Millis.date(now), reason: reason,
                                      actorParentRef: actor.kind == .parent ? .inDefaultZone(ParentingNames.parentRecord(actor.deviceId)) : nil,
                                      idempotencyKey: name)
        try RecordOutboxRow.queue(entry, named: name, family: child.family, db)
    }
}

enum Grants {
    /// Adds or takes away points (or minutes at the family's rate); a removal stops at a
    /// zero balance.
    static func grant(_ params: GrantParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> GrantResult {
        let child = try ChildLookup.child(params.child, family: family, db)
        var asked: Int64
        if let points = params.points {
            asked = points
        } else {
            let minutes = params.minutes ?? 0
            guard let points = try ChildLookup.points(forMinutes: abs(minutes), family: family, db) else {
                throw RPCError(.invalidParams, "the family's points buy no reward time (its rewardSecondsPerPoint is 0): grant points instead of minutes")
            }
            asked = minutes < 0 ? -points : points
        }
        var applied = asked
        if asked < 0 {
            // Never below zero: at most the points the balance holds now.
            let time = try ChildLookup.time(child, db)
            let rate = try FamilyEntry.row(family).select(FamilyEntry.Columns.secondsPerPoint, as: Int64.self).fetchOne(db) ?? 60
            let held = rate > 0 ? max(0, time.balanceSeconds) / rate : max(0, time.pointsBalance)
            applied = -min(-asked, held)
        }
        let childName = try Alerts.name(child, db)
        let amount = Self.words(points: applied, minutes: params.minutes.map { applied == asked ? $0 : nil } ?? nil)
        guard applied != 0 else {
            return GrantResult(points: 0, askedPoints: asked, entry: nil, time: try ChildLookup.time(child, db))
        }
        let name = "\(applied > 0 ? "grant" : "deduction")-\(FamilyLog.randomHex())"
        let reason = params.reason ?? (applied > 0 ? "Added by \(parent.name)" : "Taken away by \(parent.name)")
        try Ledger.enter(child, type: applied > 0 ? "adjustment" : "deduction", points: abs(applied), reason: reason, name: name, by: parent, now: now, db)
        try EarnedTime.computeBalance(child, now: now, db)
        let because = params.reason.map { ": “\($0)”" } ?? ""
        let words = applied > 0 ? "added \(amount) for \(childName)\(because)" : "took away \(amount) from \(childName)\(because)"
        try FamilyLog.audit(family: family, actor: parent, action: applied > 0 ? "points.add" : "points.deduct", target: ChildLookup.id(child), words: words,
                            metadata: ["child": .string(ChildLookup.id(child)), "childName": .string(childName), "points": .int(applied), "askedPoints": .int(asked),
                                       "entry": .string(name)].merging(params.reason.map { ["reason": .string($0)] } ?? [:]) { a, _ in a }, at: now, db)
        for device in try Self.devices(of: child, db) {
            try FamilyLog.notifyChild(family: family, deviceId: device, title: applied > 0 ? "\(parent.name) added \(amount)" : "\(parent.name) took away \(amount)",
                                      body: params.reason.map { "“\($0)”" }, data: ["event": .string("pointsChanged"), "points": .int(applied)],
                                      collapseKey: "ledger:\(name)", db)
        }
        return GrantResult(points: applied, askedPoints: asked, entry: name, time: try ChildLookup.time(child, db))
    }

    /// "30 min" when minutes were asked and given in full, else "12 points".
    static func words(points: Int64, minutes: Int64?) -> String {
        if let minutes { return TimeRequestInfo.minutesWords(abs(minutes)) }
        return abs(points) == 1 ? "1 point" : "\(abs(points)) points"
    }

    /// The child's active devices: who hears of a change to its time.
    static func devices(of child: EarnedTime.Child, _ db: Database) throws -> [String] {
        try DeviceEntry.filter(DeviceEntry.Columns.family == child.family && DeviceEntry.Columns.childRef == child.child
                                && DeviceEntry.Columns.status == "active" && DeviceEntry.Columns.deviceId != nil)
            .select(DeviceEntry.Columns.deviceId, as: String.self).fetchAll(db)
    }
}

enum Pauses {
    /// Pauses the child's reward apps now (replacing a pause already on).
    static func pause(_ params: PauseParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> ChildTime {
        let child = try ChildLookup.child(params.child, family: family, db)
        let until = params.minutes.map { now + $0 * 60_000 }
        try PauseRow(family: family, child: child.child, sinceMillis: now, untilMillis: until, endedMillis: nil, byDevice: parent.deviceId,
                     byName: parent.name, reason: params.reason).save(db)
        try EarnedTime.computeBalance(child, now: now, db)
        let childName = try Alerts.name(child, db)
        let length = params.minutes.map { " for \(TimeRequestInfo.minutesWords($0))" } ?? " until a parent resumes them"
        let because = params.reason.map { ": “\($0)”" } ?? ""
        try FamilyLog.audit(family: family, actor: parent, action: "child.pause", target: ChildLookup.id(child),
                            words: "paused \(childName)'s reward apps\(length)\(because)",
                            metadata: ["child": .string(ChildLookup.id(child)), "childName": .string(childName)]
                                .merging(params.minutes.map { ["minutes": .int($0)] } ?? [:]) { a, _ in a }, at: now, db)
        for device in try Grants.devices(of: child, db) {
            try FamilyLog.notifyChild(family: family, deviceId: device, title: "\(parent.name) paused your reward apps\(length)",
                                      body: params.reason.map { "“\($0)”" }, data: ["event": .string("paused")], collapseKey: "pause:\(child.child)", db)
        }
        return try ChildLookup.time(child, db)
    }

    /// Ends the child's pause now (nothing to do when none is on).
    static func resume(_ params: ResumeParams, family: String, parent: Actor, now: Int64, _ db: Database) throws -> ChildTime {
        let child = try ChildLookup.child(params.child, family: family, db)
        guard var pause = try PauseRow.on(child).fetchOne(db) else { return try ChildLookup.time(child, db) }
        try Self.end(&pause, at: now, by: parent, db)
        return try ChildLookup.time(child, db)
    }

    /// Pauses whose time is up end (at their end, as the parent set it).
    @discardableResult
    static func endDue(now: Int64, _ db: Database) throws -> Int {
        let due = try PauseRow.on.filter(PauseRow.Columns.untilMillis != nil && PauseRow.Columns.untilMillis <= now).fetchAll(db)
        for var pause in due { try Self.end(&pause, at: pause.untilMillis ?? now, by: .server, db) }
        return due.count
    }

    /// When the next pause ends by itself.
    static func nextEnd(_ db: Database) throws -> Int64? {
        try PauseRow.on.select(min(PauseRow.Columns.untilMillis), as: Int64.self).fetchOne(db)
    }

    private static func end(_ pause: inout PauseRow, at: Int64, by actor: Actor, _ db: Database) throws {
        pause.endedMillis = at
        try pause.update(db)
        let child = EarnedTime.Child(family: pause.family, child: pause.child)
        try EarnedTime.computeBalance(child, now: at, db)
        let childName = try Alerts.name(child, db)
        let words = actor.kind == .server ? "ended the pause of \(childName)'s reward apps: its time was up" : "resumed \(childName)'s reward apps"
        try FamilyLog.audit(family: pause.family, actor: actor, action: "child.resume", target: ChildLookup.id(child), words: words,
                            metadata: ["child": .string(ChildLookup.id(child)), "childName": .string(childName), "pausedBy": .string(pause.byName)], at: at, db)
        for device in try Grants.devices(of: child, db) {
            try FamilyLog.notifyChild(family: pause.family, deviceId: device,
                                      title: actor.kind == .server ? "Your pause is over" : "\(actor.name) resumed your reward apps",
                                      body: nil, data: ["event": .string("resumed")], collapseKey: "pause:\(pause.child)", db)
        }
    }
}
