import AggregatorAPI
import Foundation
import DurableSQLite
import GRDB
import RPCCore

/// The parents' alerts, decided in the ingest transaction (or the periodic check) and
/// queued for push: each fires once per crossing of its threshold and is re-armed when
/// the value goes back under it.
///
/// - `rewardToday`: a child's reward time in a local day over `Family.alertRewardMinutesPerDay`;
/// - `balanceExhausted`: a child's earned time ran out (`Family.alertOnBalanceExhausted`);
/// - `noData`: a device's newest usage ends more than `Family.alertNoDataHours` ago;
/// - `blockedApp`: an app its rule blocks was used on a device (the shield was bypassed or
///   not applied yet), once per device, app and local day;
/// - `clockOff`: a device's clock is more than `clockTolerance` off the server's (by the
///   sessions it sends), once until it is right again.
enum Alerts {
    enum Kind: String, CaseIterable {
        case rewardToday, balanceExhausted, noData, blockedApp, clockOff
    }

    /// How far a device's clock may be off before the parents hear of it (seconds).
    static let clockTolerance = DeviceConfigurationState.clockTolerance

    /// The clock offset a device's session came with (sent at `at`): kept for the parents'
    /// device list, and alerted on when it is over `clockTolerance`. Only the newest
    /// session sent counts (one replayed or recomputed from before does not).
    static func noteClock(family: String, deviceId: String, offsetSeconds: Int64, at: Int64, _ db: Database) throws {
        try db.execute(cached: "UPDATE devices SET clock_offset_s = ?, clock_at_ms = ? WHERE family = ? AND device_id = ? AND clock_at_ms <= ?",
                       arguments: [offsetSeconds, at, family, deviceId, at])
        guard db.changesCount > 0 else { return }
        try Self.crossing(.clockOff, family: family, subject: deviceId, day: "", over: abs(offsetSeconds) > Self.clockTolerance, db) {
            let device = DeviceNaming(family: family, deviceId: deviceId, db)
            let deviceName = device.name ?? "A child's device"
            var data: [String: JSONValue] = ["deviceId": .string(deviceId), "deviceName": .string(deviceName), "clockOffsetSeconds": .int(offsetSeconds)]
            if let child = device.child { data["child"] = .string(Self.name(child)) }
            return ("\(deviceName)'s clock is \(DeviceConfigurationState.clockWords(offsetSeconds))",
                    "Its usage is placed by the server's time, so its days and limits stay right. Setting the date and time to automatic fixes it.", data)
        }
    }

    /// A blocked app's usage on a device that day (computed again); it earned and spent nothing.
    static func blockedAppUsed(family: String, deviceId: String, day: String, app: String, seconds: Int64, _ db: Database) throws {
        try Self.crossing(.blockedApp, family: family, subject: "\(deviceId) \(app)", day: day, over: true, db) {
            let appName = (try? String.fetchOne(cached: db, sql: """
                SELECT display_name FROM app_rules WHERE family = ? AND app = ? AND device_id IN (?, '') AND display_name IS NOT NULL ORDER BY device_id DESC LIMIT 1
                """, arguments: [family, app, deviceId])) ?? nil
            let device = DeviceNaming(family: family, deviceId: deviceId, db)
            let deviceName = device.name ?? "a child's device"
            let minutes = max(1, (seconds + 30) / 60)
            var data: [String: JSONValue] = ["app": .string(app), "appName": .string(appName ?? app), "deviceId": .string(deviceId),
                                             "deviceName": .string(deviceName), "day": .string(day), "seconds": .int(seconds)]
            if let child = device.child { data["child"] = .string(Self.name(child)) }
            return ("\(appName ?? app) was used for \(minutes) min while blocked on \(deviceName)",
                    "On \(day). It earned no points and used no earned time; check that the device still applies the family's rules.", data)
        }
    }

    /// Checks the reward time of the child-days just computed again.
    static func checkRewardDays(_ days: [EarnedTime.Child: Set<String>], _ db: Database) throws {
        for (child, childDays) in days {
            guard let minutes = try Int64.fetchOne(cached: db, sql: "SELECT alert_reward_minutes FROM families WHERE family = ?", arguments: [child.family]) else { continue }
            for day in childDays {
                let reward = try Int64.fetchOne(cached: db, sql: """
                    SELECT coalesce(sum(d.reward_seconds), 0) FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
                    WHERE d.family = ? AND v.child_ref = ? AND d.day = ?
                    """, arguments: [child.family, child.child, day]) ?? 0
                let name = try Self.name(child, db)
                try Self.crossing(.rewardToday, family: child.family, subject: child.child, day: day, over: reward > minutes * 60, db) {
                    ("\(name): \(reward / 60) min of reward apps on \(day)", "Over the \(minutes == 1 ? "1 minute" : "\(minutes) minutes") a day you set.",
                     ["child": .string(Self.name(child.child)), "childName": .string(name), "day": .string(day), "rewardSeconds": .int(reward), "limitMinutes": .int(minutes)])
                }
            }
        }
    }

    /// Called when a child's balance crosses zero, either way.
    static func balanceCrossed(_ child: EarnedTime.Child, exhausted: Bool, balanceSeconds: Int64, _ db: Database) throws {
        let enabled = try FamilyEntry.row(child.family).select(FamilyEntry.Columns.alertExhausted, as: Bool.self).fetchOne(db) ?? true
        guard enabled else { return }
        let name = try Self.name(child, db)
        try Self.crossing(.balanceExhausted, family: child.family, subject: child.child, day: "", over: exhausted, db) {
            ("\(name) has used up their earned time", "Reward apps are shielded until more is earned.",
             ["child": .string(Self.name(child.child)), "childName": .string(name), "balanceSeconds": .int(balanceSeconds)])
        }
    }

    /// The periodic check of devices gone quiet; returns how many alerts it queued and how
    /// many it re-armed (the device sent usage again).
    @discardableResult
    static func checkSilentDevices(now: Date, _ db: Database) throws -> (queued: Int, rearmed: Int) {
        var queued = 0, rearmed = 0
        let rows = try Row.fetchAll(cached: db, sql: """
            SELECT f.family, f.alert_no_data_hours AS hours, s.device_id, max(s.end_ms) AS last,
                (SELECT v.child_name FROM devices v WHERE v.family = f.family AND v.device_id = s.device_id AND v.child_name IS NOT NULL) AS child_name
            FROM families f JOIN sessions s ON s.family = f.family
            WHERE f.alert_no_data_hours IS NOT NULL GROUP BY f.family, s.device_id
            """)
        for row in rows {
            let family: String = row["family"], device: String = row["device_id"], hours: Int64 = row["hours"], last: Int64 = row["last"]
            let childName: String? = row["child_name"]
            let subject = childName.map { "\($0)'s device \(device)" } ?? device
            let silent = Millis.of(now) - last > hours * 3_600_000
            let before = try Self.hasFired(.noData, family: family, subject: device, day: "", db)
            try Self.crossing(.noData, family: family, subject: device, day: "", over: silent, db) {
                ("No usage from \(subject) for over \(hours) h", "Its last session ended \(Self.ago(now, last)) ago. Is it paired and online?",
                 ["deviceId": .string(device), "lastUsageEnd": .date(Millis.date(last)), "limitHours": .int(hours)])
            }
            if silent && !before { queued += 1 }
            if !silent && before { rearmed += 1 }
        }
        return (queued, rearmed)
    }

    /// Fires when `over` and not fired yet; re-arms when not `over`.
    private static func crossing(_ kind: Kind, family: String, subject: String, day: String, over: Bool, _ db: Database,
                                 message: () -> (title: String, body: String, data: [String: JSONValue])) throws {
        let fired = try Self.hasFired(kind, family: family, subject: subject, day: day, db)
        if over && !fired {
            try db.execute(cached: "INSERT INTO alerts_fired(family, kind, subject, day) VALUES (?, ?, ?, ?)", arguments: [family, kind.rawValue, subject, day])
            let (title, body, data) = message()
            var payload = data
            payload["alert"] = .string(kind.rawValue)
            try db.execute(cached: "INSERT INTO alert_outbox(family, kind, title, body, data) VALUES (?, ?, ?, ?, ?)",
                           arguments: [family, kind.rawValue, title, body, try RPCJSON.encodeText(JSONValue.object(payload))])
        } else if !over && fired {
            try db.execute(cached: "DELETE FROM alerts_fired WHERE family = ? AND kind = ? AND subject = ? AND day = ?", arguments: [family, kind.rawValue, subject, day])
        }
    }

    private static func hasFired(_ kind: Kind, family: String, subject: String, day: String, _ db: Database) throws -> Bool {
        // On the ingest path (each session's clock, each child-day counted again): cached.
        try Bool.fetchOne(cached: db, sql: "SELECT EXISTS (SELECT 1 FROM alerts_fired WHERE family = ? AND kind = ? AND subject = ? AND day = ?)",
                          arguments: [family, kind.rawValue, subject, day]) ?? false
    }

    /// The child's name as the parent gave it when inviting (its zones' MonitoringSession),
    /// else its record's.
    static func name(_ child: EarnedTime.Child, _ db: Database) throws -> String {
        // For each child-day counted again, before it is known whether an alert fires: cached.
        try String.fetchOne(cached: db, sql: "SELECT child_name FROM devices WHERE family = ? AND child_ref = ? AND child_name IS NOT NULL LIMIT 1",
                            arguments: [child.family, child.child]) ?? Self.name(child.child)
    }

    /// `child-emma` → `emma`.
    static func name(_ childRecord: String) -> String {
        childRecord.hasPrefix("child-") ? String(childRecord.dropFirst(6)) : childRecord
    }

    private static func ago(_ now: Date, _ last: Int64) -> String {
        let hours = (Millis.of(now) - last) / 3_600_000
        return hours >= 48 ? "\(hours / 24) days" : "\(hours) h"
    }
}

/// How alerts name a child's device: its own name, else "<child>'s device"; and its child.
private struct DeviceNaming {
    var name: String?
    var child: String?

    init(family: String, deviceId: String, _ db: Database) {
        let device = DeviceEntry.Columns.self
        let row = try? Row.fetchOne(db, DeviceEntry.filter(device.family == family && device.deviceId == deviceId)
            .select(device.deviceName, device.childName, device.childRef))
        self.name = (row?[device.deviceName] as String?) ?? (row?[device.childName] as String?).map { "\($0)'s device" }
        self.child = row?[device.childRef]
    }
}
