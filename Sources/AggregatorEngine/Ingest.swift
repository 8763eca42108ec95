import AggregatorAPI
import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI
import UsageModel

/// Applies the store's changes to the aggregator's tables, inside one transaction: usage
/// sessions, app rules, devices and time zones are updated, and every device-day they
/// touch is computed again and queued for its DailySummary to be written.
struct Ingest {
    /// Points per minute of a learning app no rule rates.
    let defaultPointsPerMinute: Int
    /// The aggregator's clock: a child's shield is of the present (its downtime, its day
    /// against a cap), whenever the change that moved its balance was made.
    var clock: @Sendable () -> Date = { Date() }

    /// The record types followed.
    static let recordTypes = [RecordTypes.usageRecord, RecordTypes.family, RecordTypes.appRule, RecordTypes.appConfiguration, RecordTypes.monitoringSession,
                              RecordTypes.pointsLedgerEntry, RecordTypes.shieldPolicy, RecordTypes.configurationCommand, RecordTypes.registeredDevice,
                              RecordTypes.timeRequest, RecordTypes.childContext, RecordTypes.parentProfile, RecordTypes.childAppRule]

    /// A change, with the record's fields (as saved, or as they were when deleted).
    struct Change: Sendable {
        var deleted: Bool
        var family: String
        var zone: String
        var recordType: String
        var recordName: String
        var fields: [String: JSONValue]
        /// When it was made (the store's change time); nil: now.
        var at: Date? = nil
        /// Its place in the store's change log (nil for a record read again from the store).
        var seq: Int64? = nil
        /// Who saved it (`device:<id>`, `local`), for a save.
        var by: String? = nil
        /// The save created the record.
        var created: Bool? = nil

        /// The record's fields as its typed record, when they read as one.
        func record<F: RecordFields>(_ type: F.Type) -> F? {
            try? JSONValueDecoding.decode(F.self, from: .object(self.fields))
        }
    }

    struct DeviceDay: Hashable {
        var family: String
        var deviceId: String
        var day: String
    }

    /// Returns how many device-days and children were computed again, families and devices
    /// whose configuration is to be sent, and audit entries queued: what the write-back has
    /// to do.
    @discardableResult
    func apply(_ changes: [Change], _ db: Database) throws -> Int {
        var dirty = Set<DeviceDay>()
        var wholeFamilies = Set<String>()
        var children = Set<EarnedTime.Child>()
        // Families whose configuration (rules, shield policy) changed: a new version each.
        var configurations = Set<String>()
        // Devices that need their configuration (confirmed now): something to write back.
        var activated = 0
        // One time zone lookup per family and batch, not one per usage record.
        var calendars: [String: LocalDays] = [:]
        func calendar(_ family: String) throws -> LocalDays {
            if let known = calendars[family] { return known }
            let days = try Self.localDays(of: family, db)
            calendars[family] = days
            return days
        }
        // Child-days whose ledger entries came from the store different from what this
        // database held (see EarnedTime.adoptEntry).
        var adoptedDays: [EarnedTime.Child: Set<String>] = [:]
        var seals: [String: Retention.Seal] = [:]
        func seal(_ family: String) throws -> Retention.Seal {
            if let known = seals[family] { return known }
            let seal = try Retention.seal(of: family, days: calendar(family), db)
            seals[family] = seal
            return seal
        }
        var audited = 0
        // Each device's clock as its newest session of the batch says (noted once a batch).
        var clocks: [DeviceClock: ClockReading] = [:]
        for change in changes {
            // Before the change is applied: its sentence says what it changed.
            if try ChangeAudit.note(change, db) { audited += 1 }
            switch change.recordType {
            case RecordTypes.usageRecord:
                dirty.formUnion(try self.applySession(change, days: calendar(change.family), seal: seal(change.family), clocks: &clocks, db))
            case RecordTypes.family:
                switch try self.applyFamily(change, db) {
                case .timeZone:
                    wholeFamilies.insert(change.family)
                    calendars[change.family] = nil
                    seals[change.family] = nil
                case .rate: children.formUnion(try EarnedTime.children(of: change.family, db))
                case .nothing: break
                }
            case RecordTypes.appRule, RecordTypes.appConfiguration, RecordTypes.childAppRule:
                try self.applyRule(change, db)
                wholeFamilies.insert(change.family)
                if change.recordType != RecordTypes.appConfiguration { configurations.insert(change.family) }
            case RecordTypes.monitoringSession:
                if try self.applyDevice(change, db) {
                    try Configuration.queue(family: change.family, zone: change.zone, db)
                    activated += 1
                }
            case RecordTypes.configurationCommand:
                try Configuration.noteExecuted(change, db)
            case RecordTypes.registeredDevice:
                try self.applyDeviceName(change, db)
            case RecordTypes.pointsLedgerEntry:
                if let child = try EarnedTime.applyLedger(change, days: calendar(change.family), seal: seal(change.family), db) { children.insert(child) }
                if let adopted = try EarnedTime.adoptEntry(change, seal: seal(change.family), db) { adoptedDays[adopted.child, default: []].insert(adopted.day) }
            case RecordTypes.shieldPolicy:
                try EarnedTime.applyShieldPolicy(change, db)
                configurations.insert(change.family)
            case RecordTypes.parentProfile:
                try ParentNames.apply(change, db)
            case RecordTypes.childContext:
                if let child = try ChildRules.apply(change, now: Millis.of(change.at ?? Date()), db) { children.insert(child) }
            case RecordTypes.timeRequest:
                // The aggregator's own; its database holds the truth. Met when that database
                // is made again from the store's history: taken as the store has it.
                if change.deleted {
                    // Gone with its child (its ChildContext deleted, `deleteSelf`).
                    try TimeRequestRow.deleteOne(db, key: ["family": change.family, "id": change.recordName])
                } else if change.zone == StoreNames.defaultZone, let request = change.record(TimeRequest.self) {
                    // A request of a child removed since is not taken back.
                    let row = TimeRequestRow(family: change.family, id: change.recordName, request)
                    if try !ChildLookup.removed(EarnedTime.Child(family: row.family, child: row.child), db) { try row.insert(db, onConflict: .ignore) }
                }
            default:
                continue
            }
        }
        for (device, reading) in clocks {
            try Alerts.noteClock(family: device.family, deviceId: device.deviceId, offsetSeconds: reading.offsetSeconds, at: reading.at, db)
        }
        for family in configurations { try Configuration.changed(family: family, db) }
        for family in wholeFamilies { dirty.formUnion(try Self.allDays(of: family, db)) }
        dirty = try dirty.filter { try !seal($0.family).covers(day: $0.day) }
        var ratings: [String: Ratings] = [:]
        // Only the days whose numbers moved go on: a rule for an app nobody used recomputes
        // every day of the family and changes none, and must not rewrite (and notify) them.
        var changed = Set<DeviceDay>()
        for item in dirty {
            let rating = try ratings[item.family] ?? Ratings.load(family: item.family, defaultPointsPerMinute: self.defaultPointsPerMinute, db)
            ratings[item.family] = rating
            if try Self.compute(item, days: calendar(item.family), rating: rating, db) { changed.insert(item) }
        }
        // The ledger's new entries are dated by the newest change of the batch (the store's
        // clock), so that a replayed or simulated history dates them as it happened.
        let now = changes.compactMap(\.at).max().map(Millis.of) ?? Millis.of(Date())
        let childDays = try EarnedTime.recordAccruals(for: changed, now: now, calendar: calendar, db)
        try EarnedTime.enterDifferences(adoptedDays, now: now, calendar: calendar, db)
        children.formUnion(childDays.keys)
        try Alerts.checkRewardDays(childDays, db)
        let present = max(now, Millis.of(self.clock()))
        for child in children { try EarnedTime.computeBalance(child, now: present, db) }
        // An audit entry alone is something to write back too.
        return changed.count + children.count + configurations.count + activated + audited
    }

    // MARK: Records

    /// Stores the session as it is now (or forgets it); returns the days it touched then and now.
    private func applySession(_ change: Change, days: LocalDays, seal: Retention.Seal, clocks: inout [DeviceClock: ClockReading],
                              _ db: Database) throws -> Set<DeviceDay> {
        let session = change.deleted ? nil : Session(change.fields)
        // A session not seen before (most are): its row is new, and no older days to count again.
        if let session, !Self.isLate(session, seal), try Self.insertIfNew(session, of: change, db) {
            Self.note(session, of: change, in: &clocks)
            return Self.days(family: change.family, device: session.deviceId, session.start, session.end, days)
        }
        var touched = Set<DeviceDay>()
        if let old = try Row.fetchOne(cached: db, sql: "SELECT device_id, start_ms, end_ms FROM sessions WHERE family = ? AND zone = ? AND record_name = ?",
                                      arguments: [change.family, change.zone, change.recordName]) {
            touched.formUnion(Self.days(family: change.family, device: old["device_id"], Millis.date(old["start_ms"]), Millis.date(old["end_ms"]), days))
            try db.execute(cached: "DELETE FROM sessions WHERE family = ? AND zone = ? AND record_name = ?", arguments: [change.family, change.zone, change.recordName])
        }
        guard let session else { return touched }
        if Self.isLate(session, seal) {
            try Retention.pruneLate(family: change.family, zone: change.zone, recordName: change.recordName, db)
            return touched
        }
        // Its old row (if any) is gone: stored now.
        _ = try Self.insertIfNew(session, of: change, db)
        touched.formUnion(Self.days(family: change.family, device: session.deviceId, session.start, session.end, days))
        Self.note(session, of: change, in: &clocks)
        return touched
    }

    /// A device of a family, whose clock its sessions tell.
    struct DeviceClock: Hashable {
        var family: String
        var deviceId: String
    }

    struct ClockReading {
        var offsetSeconds: Int64
        var at: Int64
    }

    /// Ends before the family's sealed days: kept only as their totals.
    private static func isLate(_ session: Session, _ seal: Retention.Seal) -> Bool {
        seal.startMillis.map { Millis.of(session.end) <= $0 } ?? false
    }

    /// Stores the session's row unless the record has one; returns whether it stored it.
    private static func insertIfNew(_ session: Session, of change: Change, _ db: Database) throws -> Bool {
        try db.execute(cached: """
            INSERT INTO sessions(family, zone, record_name, device_id, app, bundle_id, category, start_ms, end_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT DO NOTHING
            """, arguments: [change.family, change.zone, change.recordName, session.deviceId, session.app, session.bundleId,
                             session.category, Millis.of(session.start), Millis.of(session.end)])
        return db.changesCount > 0
    }

    /// Keeps the session's clock reading when it is the device's newest of the batch.
    private static func note(_ session: Session, of change: Change, in clocks: inout [DeviceClock: ClockReading]) {
        let reading = ClockReading(offsetSeconds: session.clockOffsetSeconds, at: Millis.of(change.at ?? Date()))
        let device = DeviceClock(family: change.family, deviceId: session.deviceId)
        if let known = clocks[device], known.at > reading.at { return }
        clocks[device] = reading
    }

    enum FamilyChange { case nothing, timeZone, rate }

    /// What changed that matters: the time zone (every day of the family moves) or the
    /// reward seconds a point buys (every balance changes).
    private func applyFamily(_ change: Change, _ db: Database) throws -> FamilyChange {
        guard change.zone == StoreNames.defaultZone, change.recordName == change.family, !change.deleted, let family = change.record(Family.self) else {
            return .nothing
        }
        let zone = family.timeZone.flatMap { LocalDays(timeZone: $0) != nil ? $0 : nil } ?? "UTC"
        let rate = min(max(0, family.rewardSecondsPerPoint ?? 60), 86_400)
        let old = try Row.fetchOne(cached: db, sql: "SELECT time_zone, seconds_per_point FROM families WHERE family = ?", arguments: [change.family])
        try db.execute(cached: """
            INSERT INTO families(family, time_zone, seconds_per_point, alert_reward_minutes, alert_exhausted, alert_no_data_hours,
                request_expiry_minutes, max_open_requests, digest_enabled, digest_day, digest_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(family) DO UPDATE SET time_zone = excluded.time_zone, seconds_per_point = excluded.seconds_per_point,
                alert_reward_minutes = excluded.alert_reward_minutes, alert_exhausted = excluded.alert_exhausted, alert_no_data_hours = excluded.alert_no_data_hours,
                request_expiry_minutes = excluded.request_expiry_minutes, max_open_requests = excluded.max_open_requests,
                digest_enabled = excluded.digest_enabled, digest_day = excluded.digest_day, digest_time = excluded.digest_time
            """, arguments: [change.family, zone, rate, family.alertRewardMinutesPerDay.map { min($0, 1440) }, family.alertOnBalanceExhausted ?? true,
                              family.alertNoDataHours.map { min($0, 24 * 366) },
                              // Bounded as the dashboard bounds them (a week, 100): a record's own
                              // value never overflows the times computed from it.
                              min(max(1, family.requestExpiryMinutes ?? 120), 10_080), min(max(1, family.maxOpenRequests ?? 3), 100),
                              // A day or time that is none (a raw save) is the default's.
                              family.digestEnabled ?? true, family.digestDay.flatMap { Weekday(rawValue: $0)?.rawValue } ?? "sun",
                              family.digestTime.flatMap { DowntimeWindow.minutes($0) != nil ? $0 : nil } ?? "18:00"])
        if (old?["time_zone"] ?? "UTC") != zone { return .timeZone }
        return (old?["seconds_per_point"] ?? 60) != rate ? .rate : .nothing
    }

    private func applyRule(_ change: Change, _ db: Database) throws {
        let record = change.zone + "/" + change.recordName
        let at = Millis.of(change.at ?? Date())
        // What was there ends now (a deleted rule: no rule from this moment on).
        for row in try Row.fetchAll(cached: db, sql: "SELECT device_id, app FROM app_rules WHERE family = ? AND record = ?", arguments: [change.family, record]) {
            try Self.ruleFrom(family: change.family, device: row["device_id"], app: row["app"], at: at, category: Ratings.noRule, pointsPerMinute: nil, blocked: false, db)
        }
        try db.execute(cached: "DELETE FROM app_rules WHERE family = ? AND record = ?", arguments: [change.family, record])
        guard !change.deleted else { return }
        guard let rule = Rule(change) else { return }
        let (app, device) = (rule.app, rule.device)
        var category = rule.category
        if rule.isEnabled == false { category = "disabled" }
        try db.execute(cached: """
            INSERT INTO app_rules(family, device_id, app, record, category, points_per_minute, blocked, display_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(family, device_id, app) DO UPDATE SET record = excluded.record, category = excluded.category,
                points_per_minute = excluded.points_per_minute, blocked = excluded.blocked, display_name = excluded.display_name
            """, arguments: [change.family, device, app, record, category, rule.pointsPerMinute, rule.blockingEnabled == true, rule.displayName])
        try Self.ruleFrom(family: change.family, device: device, app: app, at: at, category: category,
                          pointsPerMinute: rule.pointsPerMinute, blocked: rule.blockingEnabled == true, db)
    }

    /// A family's AppRule (by bundle id, for every device), a child's ChildAppRule (by
    /// bundle id, for its devices) or a device's AppConfiguration (by logical id), as one rule.
    private struct Rule {
        var app: String
        /// '' for a family's rule, `@<childRecordName>` for a child's (no device id has an `@`).
        var device: String
        var category: String?
        var pointsPerMinute: Int64?
        var isEnabled: Bool?
        var blockingEnabled: Bool?
        var displayName: String?

        init?(_ change: Change) {
            if change.recordType == RecordTypes.appRule {
                guard let rule = change.record(AppRule.self) else { return nil }
                self.app = rule.bundleId
                self.device = ""
                self.category = rule.classification
                (self.pointsPerMinute, self.isEnabled, self.blockingEnabled, self.displayName) = (rule.pointsPerMinute, rule.isEnabled, rule.blockingEnabled, rule.displayName)
            } else if change.recordType == RecordTypes.childAppRule {
                guard let rule = change.record(ChildAppRule.self) else { return nil }
                self.app = rule.bundleId
                self.device = Ratings.childKey(rule.childRef.recordName)
                self.category = rule.classification
                (self.pointsPerMinute, self.isEnabled, self.blockingEnabled, self.displayName) = (rule.pointsPerMinute, rule.isEnabled, rule.blockingEnabled, nil)
            } else {
                guard let configuration = change.record(AppConfiguration.self) else { return nil }
                self.app = configuration.logicalID
                self.device = configuration.deviceID ?? ""
                self.category = configuration.category
                (self.pointsPerMinute, self.isEnabled, self.blockingEnabled, self.displayName) =
                    (configuration.pointsPerMinute, configuration.isEnabled, configuration.blockingEnabled, configuration.displayName)
            }
        }
    }

    /// The rule in force for an app from `at` on (a later save at the same moment replaces
    /// it). The same rule as the one in force before is no change: no period begins (a
    /// display name edited, a rule read again, must not cut sessions in two).
    private static func ruleFrom(family: String, device: String, app: String, at: Int64, category: String?, pointsPerMinute: Int64?, blocked: Bool, _ db: Database) throws {
        if let before = try Row.fetchOne(cached: db, sql: """
            SELECT category, points_per_minute, blocked FROM rule_history WHERE family = ? AND device_id = ? AND app = ? AND from_ms < ?
            ORDER BY from_ms DESC LIMIT 1
            """, arguments: [family, device, app, at]),
           before["category"] as String? == category, before["points_per_minute"] as Int64? == pointsPerMinute, before["blocked"] as Bool == blocked {
            try db.execute(cached: "DELETE FROM rule_history WHERE family = ? AND device_id = ? AND app = ? AND from_ms = ?", arguments: [family, device, app, at])
            return
        }
        try db.execute(cached: """
            INSERT INTO rule_history(family, device_id, app, from_ms, category, points_per_minute, blocked) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(family, device_id, app, from_ms) DO UPDATE SET category = excluded.category,
                points_per_minute = excluded.points_per_minute, blocked = excluded.blocked
            """, arguments: [family, device, app, at, category, pointsPerMinute, blocked])
    }

    /// A child device's RegisteredDevice (in its zone): the device's name, for alerts, and
    /// its app's version, for the parents.
    private func applyDeviceName(_ change: Change, _ db: Database) throws {
        guard !change.deleted, let device = change.record(RegisteredDevice.self) else { return }
        if device.deviceType == "parent" { return try ParentNames.applyDevice(device, family: change.family, db) }
        try db.execute(cached: "UPDATE devices SET device_name = ?, app_version = ? WHERE family = ? AND device_id = ?",
                       arguments: [device.deviceName, device.appVersion, change.family, device.deviceID])
    }

    /// A child's zone's MonitoringSession: its device, its child, the child's name as the
    /// parent gave it when inviting (`title`), and the pairing's status. Returns whether the
    /// device became active (confirmed): it then needs the family's configuration.
    private func applyDevice(_ change: Change, _ db: Database) throws -> Bool {
        guard !change.deleted, let session = change.record(MonitoringSession.self) else { return false }
        let status = session.status
        let before = try String.fetchOne(cached: db, sql: "SELECT status FROM devices WHERE family = ? AND zone = ?", arguments: [change.family, change.zone])
        try db.execute(cached: """
            INSERT INTO devices(family, zone, device_id, child_ref, child_name, status) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT(family, zone) DO UPDATE SET device_id = coalesce(excluded.device_id, device_id),
                child_ref = coalesce(excluded.child_ref, child_ref), child_name = coalesce(excluded.child_name, child_name),
                status = coalesce(excluded.status, status)
            """, arguments: [change.family, change.zone, session.deviceID, session.childRef?.recordName, session.title, status])
        return status == "active" && before != "active"
    }

    // MARK: Days

    static func localDays(of family: String, _ db: Database) throws -> LocalDays {
        let zone = try String.fetchOne(cached: db, sql: "SELECT time_zone FROM families WHERE family = ?", arguments: [family]) ?? "UTC"
        return LocalDays(timeZone: zone) ?? LocalDays(timeZone: "UTC")!
    }

    private static func days(family: String, device: String, _ start: Date, _ end: Date, _ days: LocalDays) -> Set<DeviceDay> {
        Set(days.split(start, end).map { DeviceDay(family: family, deviceId: device, day: $0.day) })
    }

    /// Every day the family has, or would have from its sessions now.
    private static func allDays(of family: String, _ db: Database) throws -> Set<DeviceDay> {
        let days = try Self.localDays(of: family, db)
        var all = Set(try Row.fetchAll(cached: db, sql: "SELECT device_id, day FROM days WHERE family = ?", arguments: [family]).map {
            DeviceDay(family: family, deviceId: $0["device_id"], day: $0["day"])
        })
        for row in try Row.fetchAll(cached: db, sql: "SELECT device_id, start_ms, end_ms FROM sessions WHERE family = ?", arguments: [family]) {
            all.formUnion(Self.days(family: family, device: row["device_id"], Millis.date(row["start_ms"]), Millis.date(row["end_ms"]), days))
        }
        return all
    }

    /// Computes one device-day from its sessions and, when its numbers changed, queues its
    /// summary for the store; returns whether they changed.
    @discardableResult
    static func compute(_ item: DeviceDay, days: LocalDays, rating: Ratings, _ db: Database) throws -> Bool {
        guard let bounds = days.bounds(of: item.day) else { return false }
        let rows = try Row.fetchAll(cached: db, sql: """
            SELECT zone, app, bundle_id, category, start_ms, end_ms FROM sessions
            WHERE family = ? AND device_id = ? AND start_ms >= ? AND start_ms < ? AND end_ms > ?
            """, arguments: [item.family, item.deviceId, Millis.of(bounds.start) - Session.longest, Millis.of(bounds.end), Millis.of(bounds.start)])
        // Each session split where its app's rule changed, each part counted at the rule in
        // force then: the parts of one app under one rule are one key of DayTotals, so
        // overlaps still count once.
        var spans: [Span] = []
        var facts: [String: (app: String, bundleId: String?, category: String?, at: Int64)] = [:]
        for row in rows {
            let app: String = row["app"], bundleId: String? = row["bundle_id"], category: String? = row["category"]
            let start: Int64 = max(row["start_ms"], Millis.of(bounds.start)), end: Int64 = min(row["end_ms"], Millis.of(bounds.end))
            guard start < end else { continue }
            let cuts = rating.changes(device: item.deviceId, app: app, bundleId: bundleId, from: start, to: end)
            for (from, to) in zip([start] + cuts, cuts + [end]) {
                // Named by the rule's start, so that parts under one rule share a key.
                let ruleStart = ([Int64.min] + rating.changes(device: item.deviceId, app: app, bundleId: bundleId, from: Int64.min, to: from + 1)).last!
                let key = "\(app)\u{1F}\(ruleStart)"
                spans.append(Span(app: key, start: Millis.date(from), end: Millis.date(to)))
                facts[key] = (app, bundleId, category, from)
            }
        }
        let parts = DayTotals.compute(spans, from: bounds.start, to: bounds.end) { key in
            let fact = facts[key]!
            return rating.rate(device: item.deviceId, app: fact.app, bundleId: fact.bundleId, recorded: fact.category, at: fact.at)
        }
        let totals = parts.merged { key in facts[key]!.app }
        let zone = try rows.first.map { $0["zone"] as String }
            ?? String.fetchOne(cached: db, sql: "SELECT zone FROM days WHERE family = ? AND device_id = ? AND day = ?", arguments: [item.family, item.deviceId, item.day])
        guard let zone else { return false }  // nothing then, nothing now
        let apps = try AppsJSON.encode(totals.apps)
        let before = try Row.fetchOne(cached: db, sql: """
            SELECT zone, learning_seconds, reward_seconds, points, apps FROM days WHERE family = ? AND device_id = ? AND day = ?
            """, arguments: [item.family, item.deviceId, item.day])
        if let before, !totals.isEmpty, before["zone"] as String == zone, before["learning_seconds"] as Int64 == totals.learningSeconds,
           before["reward_seconds"] as Int64 == totals.rewardSeconds, before["points"] as Int64 == totals.points, before["apps"] as String == apps {
            return false
        }
        if before == nil && totals.isEmpty { return false }
        for app in totals.apps where app.blocked == true && app.seconds > 0 {
            try Alerts.blockedAppUsed(family: item.family, deviceId: item.deviceId, day: item.day, app: app.app, seconds: app.seconds, db)
        }
        if totals.isEmpty {
            try db.execute(cached: "DELETE FROM days WHERE family = ? AND device_id = ? AND day = ?", arguments: [item.family, item.deviceId, item.day])
        } else {
            try db.execute(cached: """
                INSERT INTO days(family, device_id, day, zone, learning_seconds, reward_seconds, points, apps) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(family, device_id, day) DO UPDATE SET zone = excluded.zone, learning_seconds = excluded.learning_seconds,
                    reward_seconds = excluded.reward_seconds, points = excluded.points, apps = excluded.apps
                """, arguments: [item.family, item.deviceId, item.day, zone, totals.learningSeconds, totals.rewardSeconds, totals.points, apps])
        }
        try db.execute(cached: """
            INSERT INTO summary_outbox(family, device_id, day, zone, version) VALUES (?, ?, ?, ?, 1)
            ON CONFLICT(family, device_id, day) DO UPDATE SET zone = excluded.zone, version = version + 1
            """, arguments: [item.family, item.deviceId, item.day, zone])
        return true
    }
}

/// A UsageRecord's fields, checked: nil when it cannot be counted (no app, no device, an
/// end not after its start). A session longer than a day counts as its first 24 hours.
/// Its times are the server's: the device's, less how far the device's clock was ahead.
struct Session {
    static let longest: Int64 = 86_400_000

    var app: String
    var bundleId: String?
    var category: String?
    var deviceId: String
    var start: Date
    var end: Date
    /// How far the device's clock was ahead of the server's when it sent the session
    /// (written by the store); the session is placed by the server's time.
    var clockOffsetSeconds: Int64

    /// Read by the typed record's field names without decoding it: every usage record of a
    /// batch passes here.
    init?(_ fields: [String: JSONValue]) {
        guard let app = fields[UsageRecord.Field.logicalID]?.stringValue, let device = fields[UsageRecord.Field.deviceID]?.stringValue,
              let start = fields[UsageRecord.Field.sessionStart]?.stringValue.flatMap(StoreDates.parse),
              let end = fields[UsageRecord.Field.sessionEnd]?.stringValue.flatMap(StoreDates.parse), end > start
        else { return nil }
        self.app = app
        self.bundleId = fields[UsageRecord.Field.bundleId]?.stringValue
        self.category = fields[UsageRecord.Field.category]?.stringValue
        let offset = fields[UsageRecord.Field.clockOffsetSeconds]?.intValue ?? 0
        self.clockOffsetSeconds = offset
        self.deviceId = device
        self.start = start.addingTimeInterval(-Double(offset))
        self.end = min(end, start.addingTimeInterval(Double(Self.longest) / 1000)).addingTimeInterval(-Double(offset))
    }
}

/// How each app of a family counts, from the parents' rules: a device's AppConfiguration
/// (by logical id) first, then the family's AppRule (by bundle id), then the category the
/// session itself names with the default points per minute.
/// The family's rules over time: for each device ('' for the family's AppRules, by bundle
/// id) and app, the rule in force from each moment on. Usage counts at the rule in force
/// when it was used: a change applies from its save on, and what was earned before stays.
/// An app's first rule applies to all its usage (before it, the app was not rated at all).
struct Ratings {
    struct Period {
        var from: Int64
        /// nil: the rule names no category (the usage's own counts); `Ratings.noRule`: the
        /// rule was deleted at `from`.
        var category: String?
        var pointsPerMinute: Int?
        var blocked: Bool
    }

    static let noRule = ""

    /// Periods by device id (`''`: the family's rules, `@<child>`: a child's), then app.
    var byDevice: [String: [String: [Period]]]
    /// Each device's child (`child-emma`).
    var children: [String: String] = [:]
    let defaultPointsPerMinute: Int

    /// The key of a child's rules among the devices'.
    static func childKey(_ childRecordName: String) -> String { "@" + childRecordName }

    static func load(family: String, defaultPointsPerMinute: Int, _ db: Database) throws -> Ratings {
        var byDevice: [String: [String: [Period]]] = [:]
        for row in try Row.fetchAll(cached: db, sql: """
            SELECT device_id, app, from_ms, category, points_per_minute, blocked FROM rule_history WHERE family = ? ORDER BY from_ms
            """, arguments: [family]) {
            byDevice[row["device_id"], default: [:]][row["app"], default: []].append(
                Period(from: row["from_ms"], category: row["category"], pointsPerMinute: row["points_per_minute"], blocked: row["blocked"]))
        }
        var ratings = Ratings(byDevice: byDevice, defaultPointsPerMinute: defaultPointsPerMinute)
        if byDevice.keys.contains(where: { $0.hasPrefix("@") }) {
            for row in try Row.fetchAll(cached: db, sql: "SELECT device_id, child_ref FROM devices WHERE family = ? AND device_id IS NOT NULL AND child_ref IS NOT NULL",
                                         arguments: [family]) {
                ratings.children[row["device_id"]] = row["child_ref"]
            }
        }
        return ratings
    }

    /// The child's rules for the app on this device.
    private func childPeriods(device: String, bundleId: String) -> [Period]? {
        self.children[device].flatMap { self.byDevice[Self.childKey($0)]?[bundleId] }
    }

    /// The app's rule on the device at `at`: the device's own, else its child's, else the
    /// family's, else (an app not rated yet then) the first rule it got later, which reaches
    /// back for its category and rate but never blocks what came before it.
    private func rule(device: String, app: String, bundleId: String?, at: Int64) -> Period? {
        func inForce(_ periods: [Period]?) -> Period? {
            guard let period = periods?.last(where: { $0.from <= at }) else { return nil }
            return period.category == Self.noRule ? nil : period
        }
        func reachingBack(_ periods: [Period]?) -> Period? {
            guard var first = periods?.first, first.category != Self.noRule else { return nil }
            first.blocked = false
            return first
        }
        let own = self.byDevice[device]?[app], family = self.byDevice[""]?[bundleId ?? app]
        let child = self.childPeriods(device: device, bundleId: bundleId ?? app)
        return inForce(own) ?? inForce(child) ?? inForce(family) ?? reachingBack(family) ?? reachingBack(child) ?? reachingBack(own)
    }

    func rate(device: String, app: String, bundleId: String?, recorded: String?, at: Int64) -> AppRating {
        let rule = self.rule(device: device, app: app, bundleId: bundleId, at: at)
        let blocked = rule?.blocked ?? false
        let categoryName = rule?.category ?? recorded
        guard let categoryName, let category = Category(rawValue: categoryName) else { return AppRating(category: nil, pointsPerMinute: 0, blocked: blocked) }
        return AppRating(category: category, pointsPerMinute: rule?.pointsPerMinute ?? self.defaultPointsPerMinute, blocked: blocked)
    }

    /// The moments after `start` and before `end` at which the app's rule changes (not the
    /// start of the family's first rule: it reaches back; a device's own first rule, and its
    /// child's, replace the family's from their save).
    func changes(device: String, app: String, bundleId: String?, from start: Int64, to end: Int64) -> [Int64] {
        let periods = (self.byDevice[device]?[app] ?? []) + (self.childPeriods(device: device, bundleId: bundleId ?? app) ?? [])
            + (self.byDevice[""]?[bundleId ?? app] ?? []).dropFirst()
        return Set(periods.map(\.from).filter { $0 > start && $0 < end }).sorted()
    }
}

/// A day's apps as stored.
enum AppsJSON {
    /// Keys sorted: the same apps always give the same text, which is how a day that did
    /// not change is told from one that did.
    static func encode(_ apps: [AppUsage]) throws -> String {
        String(decoding: try RPCJSON.encodeSorted(apps), as: UTF8.self)
    }

    static func decode(_ text: String) throws -> [AppUsage] {
        try JSONValueDecoding.decode([AppUsage].self, from: try JSONParser.parse(text))
    }
}
