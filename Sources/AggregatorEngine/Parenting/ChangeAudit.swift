import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import RPCCore
import StoreAPI

/// The family's log of what parents change through the store from any client (a rule, the
/// family's settings, a child's cap, a redemption, a rule removed): the aggregator sees each
/// save or deletion in the change feed and writes its AuditEntry, with the parent's name and
/// a sentence, before it
/// applies the change (the sentence says what changed). Named after the change's place in
/// the store's log (`audit-change-<seq>`), so a change met again (a database made again
/// from the store's history) writes the same entry again, not a second one. Pairing's own
/// actions are audited by the pairing service; the aggregator's methods audit themselves.
enum ChangeAudit {
    /// Returns whether an entry was queued (the write-back has something to send).
    @discardableResult
    static func note(_ change: Ingest.Change, _ db: Database) throws -> Bool {
        guard let seq = change.seq, let by = change.by, by.hasPrefix("device:"), change.zone == StoreNames.defaultZone
            || change.recordType == RecordTypes.appConfiguration else { return false }
        let deviceId = String(by.dropFirst("device:".count))
        guard let (action, target, words) = try change.deleted ? Self.removal(change, db) : Self.sentence(change, db) else { return false }
        let actor = Actor(kind: .parent, deviceId: deviceId, name: try ParentNames.name(family: change.family, deviceId: deviceId, db) ?? "")
        try FamilyLog.audit(family: change.family, actor: actor, action: action, target: target, words: words,
                            metadata: ["recordType": .string(change.recordType), "recordName": .string(change.recordName)],
                            at: Millis.of(change.at ?? Date()), named: "audit-change-\(seq)", db)
        return true
    }

    /// A parent's deletion (its fields as they were): the entry's action, target and words;
    /// nil for deletions that are not a parent's action of their own (cascades of a child's
    /// removal, which pairing audits).
    private static func removal(_ change: Ingest.Change, _ db: Database) throws -> (String, String, String)? {
        switch change.recordType {
        case RecordTypes.appRule:
            guard let rule = change.record(AppRule.self) else { return nil }
            return ("rule.remove", rule.bundleId, "removed the rule for \(rule.displayName ?? rule.bundleId)")
        case RecordTypes.childAppRule:
            guard let rule = change.record(ChildAppRule.self) else { return nil }
            let child = EarnedTime.Child(family: change.family, child: rule.childRef.recordName)
            // Gone with its child: not a parent's choice of rule.
            guard try !ChildLookup.removed(child, db) else { return nil }
            let app = try Downtime.appNames(family: change.family, db)[rule.bundleId] ?? rule.bundleId
            return ("rule.remove", rule.bundleId, "let \(try Alerts.name(child, db)) follow the family's rule for \(app) again")
        default:
            return nil
        }
    }

    /// The entry's action, target and words; nil for what is not a parent's action.
    private static func sentence(_ change: Ingest.Change, _ db: Database) throws -> (String, String, String)? {
        switch change.recordType {
        case RecordTypes.appRule:
            guard let rule = change.record(AppRule.self) else { return nil }
            let app = rule.displayName ?? rule.bundleId
            let what = Self.ruleWords(rule.classification, rule.pointsPerMinute, blocked: rule.blockingEnabled, enabled: rule.isEnabled)
            return ("rule.save", rule.bundleId, change.created == true ? "added a rule: \(app) is \(what)" : "changed the rule for \(app): \(what)")
        case RecordTypes.childAppRule:
            guard let rule = change.record(ChildAppRule.self) else { return nil }
            let name = try Alerts.name(EarnedTime.Child(family: change.family, child: rule.childRef.recordName), db)
            let app = try Downtime.appNames(family: change.family, db)[rule.bundleId] ?? rule.bundleId
            let what = Self.ruleWords(rule.classification, rule.pointsPerMinute, blocked: rule.blockingEnabled, enabled: rule.isEnabled)
            return ("rule.save", rule.bundleId, "set \(name)'s own rule for \(app): \(what)")
        case RecordTypes.appConfiguration:
            guard let app = change.record(AppConfiguration.self) else { return nil }
            let device = app.deviceID.flatMap { id in try? DeviceEntry.filter(DeviceEntry.Columns.family == change.family && DeviceEntry.Columns.deviceId == id)
                .select(DeviceEntry.Columns.deviceName, as: String?.self).fetchOne(db) ?? nil } ?? "a child's device"
            return ("rule.save", app.logicalID, "changed \(device)'s settings for \(app.displayName ?? app.logicalID)")
        case RecordTypes.family:
            guard change.recordName == change.family, let family = change.record(Family.self) else { return nil }
            return ("settings.save", change.family, "changed the family's settings" + (try Self.settingsChanged(family, family: change.family, db)))
        case RecordTypes.childContext:
            guard let context = change.record(ChildContext.self) else { return nil }
            let child = EarnedTime.Child(family: change.family, child: change.recordName)
            let name = try Alerts.name(child, db)
            let before = try ChildRuleRow.filter(key: ["family": change.family, "child": change.recordName]).fetchOne(db)
            var parts: [String] = []
            if context.dailyRewardCapMinutes != before?.dailyCapMinutes {
                parts.append(context.dailyRewardCapMinutes.map { "set \(name)'s daily cap to \(TimeRequestInfo.minutesWords($0))" } ?? "removed \(name)'s daily cap")
            }
            if (context.weeklyExpiry ?? false) != (before?.weeklyExpiry ?? false) {
                parts.append(context.weeklyExpiry == true ? "made \(name)'s unspent time expire at the end of each week" : "let \(name) keep unspent time from week to week")
            }
            return ("child.save", Alerts.name(change.recordName), parts.isEmpty ? "changed \(name)'s details" : parts.joined(separator: " and "))
        case RecordTypes.pointsLedgerEntry:
            guard let entry = change.record(PointsLedgerEntry.self), entry.type == "redemption" || entry.type == "adjustment" else { return nil }
            let name = try Alerts.name(EarnedTime.Child(family: change.family, child: entry.childRef.recordName), db)
            let points = entry.amount == 1 ? "1 point" : "\(entry.amount) points"
            let reason = entry.reason.map { ": “\($0)”" } ?? ""
            return (entry.type == "redemption" ? "points.redeem" : "points.add", Alerts.name(entry.childRef.recordName),
                    entry.type == "redemption" ? "redeemed \(points) of \(name)'s\(reason)" : "added \(points) for \(name)\(reason)")
        case RecordTypes.shieldPolicy:
            guard let policy = change.record(ShieldPolicy.self) else { return nil }
            let whose = try policy.childRef.map { "\(try Alerts.name(EarnedTime.Child(family: change.family, child: $0.recordName), db))'s " } ?? ""
            return ("shield.save", policy.childRef.map { Alerts.name($0.recordName) } ?? change.family,
                    "changed which of \(whose.isEmpty ? "the family's" : whose)apps are shielded when earned time runs out")
        default:
            return nil
        }
    }

    /// "a learning app, 2 points a minute", "a reward app", "blocked", "… (turned off)".
    private static func ruleWords(_ classification: String, _ pointsPerMinute: Int64?, blocked: Bool?, enabled: Bool?) -> String {
        var what = classification == "learning"
            ? "a learning app\(pointsPerMinute.map { ", \($0 == 1 ? "1 point" : "\($0) points") a minute" } ?? "")"
            : "a reward app"
        if blocked == true { what = "blocked" }
        if enabled == false { what += " (turned off)" }
        return what
    }

    /// ": a point buys 30 s (was 60 s), …" for the settings the aggregator keeps that this
    /// save changes; "" when none of them did.
    private static func settingsChanged(_ family: Family, family id: String, _ db: Database) throws -> String {
        guard let old = try Row.fetchOne(db, FamilyEntry.row(id)) else { return "" }
        var parts: [String] = []
        func note<T: Equatable & DatabaseValueConvertible>(_ column: String, _ new: T?, _ words: (T) -> String) {
            let before: T? = old[column]
            if let new, new != before { parts.append(words(new)) }
        }
        note("time_zone", family.timeZone) { "its time zone to \($0)" }
        note("seconds_per_point", family.rewardSecondsPerPoint) { "a point buys \($0) s" }
        note("alert_reward_minutes", family.alertRewardMinutesPerDay) { "an alert after \(TimeRequestInfo.minutesWords($0)) of reward apps a day" }
        note("alert_no_data_hours", family.alertNoDataHours) { "an alert when a device is silent for \($0) h" }
        note("request_expiry_minutes", family.requestExpiryMinutes) { "requests for more time wait \(TimeRequestInfo.minutesWords($0))" }
        note("max_open_requests", family.maxOpenRequests) { "a child may have \($0) requests open" }
        note("digest_enabled", family.digestEnabled) { $0 ? "a weekly digest for the parents" : "no weekly digest" }
        if family.digestEnabled != false, family.digestDay != old["digest_day"] || family.digestTime != old["digest_time"],
           let day = family.digestDay.flatMap(Weekday.init(rawValue:)), let time = family.digestTime {
            parts.append("the weekly digest on \(day.name)s at \(time)")
        }
        return parts.isEmpty ? "" : ": " + parts.joined(separator: ", ")
    }
}

/// The family's parents as it knows them, by device (for the audit log's sentences).
enum ParentNames {
    static func apply(_ change: Ingest.Change, _ db: Database) throws {
        guard !change.deleted, let profile = change.record(ParentProfile.self) else { return }
        for device in profile.deviceIds ?? [] {
            try db.execute(sql: """
                INSERT INTO parent_names(family, device_id, display_name) VALUES (?, ?, ?)
                ON CONFLICT(family, device_id) DO UPDATE SET display_name = excluded.display_name
                """, arguments: [change.family, device, profile.displayName])
        }
    }

    static func applyDevice(_ device: RegisteredDevice, family: String, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO parent_names(family, device_id, device_name) VALUES (?, ?, ?)
            ON CONFLICT(family, device_id) DO UPDATE SET device_name = excluded.device_name
            """, arguments: [family, device.deviceID, device.deviceName])
    }

    /// The parent's name, else its device's; nil when neither is known.
    static func name(family: String, deviceId: String, _ db: Database) throws -> String? {
        let row = try Row.fetchOne(db, sql: "SELECT display_name, device_name FROM parent_names WHERE family = ? AND device_id = ?", arguments: [family, deviceId])
        return [row?["display_name"] as String?, row?["device_name"] as String?].compactMap { $0?.trimmingCharacters(in: .whitespaces) }.first { !$0.isEmpty }
    }
}
