import AggregatorAPI
import Foundation
import PairingAPI
import RPCCore
import StoreAPI

/// What the pages show, read as the browser's parent device: the family's records in the
/// store and its devices in the pairing service.
extension BrowserDevice {
    /// The Family record's time zone (UTC when unset).
    func clock() async throws(RPCError) -> FamilyClock {
        FamilyClock(timeZone: try await self.settings()?.timeZone)
    }

    func devices() async throws(RPCError) -> [DeviceInfo] {
        try await self.call(PairingMethods.listDevices, Empty()).devices
    }

    /// Every record of a type in a zone, following the query's cursor (records whose fields
    /// do not read as the type are left out).
    func all<F: RecordFields>(_ type: F.Type, zone: String, filters: [QueryFilter]? = nil, sort: QuerySort? = nil, limit: Int = 2000) async throws(RPCError) -> [TypedRecord<F>] {
        try await QueryParams(family: self.family, zone: zone, recordType: F.recordType, filters: filters, sort: sort, limit: QueryParams.maximumLimit)
            .allRecords(atMost: limit) { (params) async throws(RPCError) in try await self.call(StoreMethods.query, params) }
            .compactMap { try? TypedRecord<F>($0) }
    }

    /// One record of a type, by name; nil when there is none (or it is another type).
    func fetch<F: RecordFields>(_ type: F.Type, _ recordName: String, zone: String = StoreNames.defaultZone) async throws(RPCError) -> F? {
        try await self.call(StoreMethods.fetch, FetchParams(family: self.family, zone: zone, recordNames: [recordName])).records.first?.fields(as: F.self)
    }

    /// The children: their ChildContext records (a child exists from its first invitation).
    func children() async throws(RPCError) -> [(id: String, name: String)] {
        try await self.all(ChildContext.self, zone: StoreNames.defaultZone).map { record in
            (record.fields.childOpaqueId, record.fields.displayName ?? record.fields.childOpaqueId)
        }.sorted { $0.name.localizedCaseInsensitiveCompare($1.name) == .orderedAscending }
    }

    /// The Overview's cards: each child's day so far, points, balance, shield, last sync.
    func overview(_ clock: FamilyClock) async throws(RPCError) -> [[String: Any]] {
        let devices = try await self.devices()
        var cards: [[String: Any]] = []
        for child in try await self.children() {
            let own = devices.filter { $0.role == .child && $0.childId == child.id }
            var learning: Int64 = 0, reward: Int64 = 0, earnedToday: Int64 = 0
            var lastSync: Date?
            for device in own {
                if let seen = device.lastSeenAt, seen > (lastSync ?? .distantPast) { lastSync = seen }
                // A child's day is what happened on any of its devices, removed ones too
                // (as Reports, the CSV, `summary` and the balance count it).
                guard let zone = device.zone else { continue }
                guard let summary = try await self.fetch(DailySummary.self, "\(device.deviceId)_\(clock.today)", zone: zone) else { continue }
                learning += summary.totalLearningSeconds ?? 0
                reward += summary.totalRewardSeconds ?? 0
                earnedToday += summary.totalPointsEarned ?? 0
                if let updated = summary.lastUpdated, updated > (lastSync ?? .distantPast) { lastSync = updated }
            }
            let balance = try await self.fetch(EarnedTimeBalance.self, "balance-child-\(child.id)")
            let balanceSeconds = balance?.balanceSeconds
            let shielded = balance?.shielded ?? false
            var card: [String: Any] = [
                "id": child.id, "name": child.name,
                "learning": FamilyClock.duration(learning), "reward": FamilyClock.duration(reward),
                "pointsToday": earnedToday, "points": balance?.pointsBalance ?? 0,
                "balance": balanceSeconds.map(FamilyClock.duration) ?? "none yet",
                // One relation, the same on every view: the points are worth so much reward
                // time, what was used is taken off, the rest is left.
                "worth": FamilyClock.duration((balanceSeconds ?? 0) + (balance?.rewardSecondsUsed ?? 0)),
                "used": FamilyClock.duration(balance?.rewardSecondsUsed ?? 0),
                "shielded": shielded, "shieldWords": Self.shieldWords(balance, clock), "activeDevices": own.filter { $0.status == .active }.count,
                "hasDevices": !own.isEmpty,
            ]
            if let lastSync {
                card["lastSync"] = clock.ago(lastSync)
                card["lastSyncTime"] = clock.time(lastSync)
                card["lastSyncISO"] = StoreDates.format(lastSync)
            }
            cards.append(card)
        }
        return cards
    }

    /// The family's app rules, filtered by a search text and a category.
    /// The names parents gave apps (their rules' `displayName`), by bundle id.
    func appNames() async throws(RPCError) -> [String: String] {
        Dictionary(try await self.all(AppRule.self, zone: StoreNames.defaultZone).compactMap { rule in
            guard let name = rule.fields.displayName, !name.isEmpty else { return nil }
            return (rule.fields.bundleId, name)
        }, uniquingKeysWith: { first, _ in first })
    }

    func appRules(search: String, category: String) async throws(RPCError) -> [[String: Any]] {
        let rules = try await self.all(AppRule.self, zone: StoreNames.defaultZone)
        let overrides = try await self.overridesByApp()
        return rules.compactMap { rule -> [String: Any]? in
            let fields = rule.fields
            let bundleId = fields.bundleId
            let name = fields.displayName ?? bundleId
            let classification = fields.classification
            if !search.isEmpty, !name.localizedCaseInsensitiveContains(search), !bundleId.localizedCaseInsensitiveContains(search) { return nil }
            if !category.isEmpty, classification != category { return nil }
            return [
                "bundleId": bundleId, "name": name, "key": rule.recordName,
                "learning": classification == "learning", "reward": classification == "reward", "category": classification,
                "pointsPerMinute": fields.pointsPerMinute ?? 1, "enabled": fields.isEnabled ?? true, "blocked": fields.blockingEnabled ?? false,
                // The slider reaches 20, or further for a rule set higher elsewhere.
                "pointsMax": max(20, fields.pointsPerMinute ?? 1),
                "overrides": overrides[bundleId] ?? [], "hasOverrides": overrides[bundleId] != nil,
            ]
        }.sorted { ($0["name"] as! String).localizedCaseInsensitiveCompare($1["name"] as! String) == .orderedAscending }
    }

    /// Saves the family's rule for an app (what a parent's app does; `screentimectl apps set`
    /// the same); the server sends each child device the family's configuration. Returns how
    /// many active child devices get it.
    func saveAppRule(bundleId: String, category: String, pointsPerMinute: Int, enabled: Bool, blocked: Bool, displayName: String?) async throws(RPCError) -> Int {
        // An empty name leaves the rule's name as it was (a `changedKeys` save of the others).
        let rule = AppRule(familyRef: .inDefaultZone(self.family), bundleId: bundleId, classification: category, source: "override",
                           pointsPerMinute: Int64(pointsPerMinute), isEnabled: enabled, blockingEnabled: blocked,
                           displayName: displayName?.isEmpty == false ? displayName : nil)
        let saved = try await self.call(StoreMethods.modify, ModifyParams(
            family: self.family, zone: StoreNames.defaultZone, saves: [try .record(rule, named: "app-\(bundleId)")], savePolicy: .changedKeys, atomic: true))
        guard saved.saved.first?.record != nil else { throw RPCError(.internal, "the rule was not saved") }
        return try await self.devices().filter { $0.role == .child && $0.status == .active }.count
    }

    /// The newest commands sent to the children's devices, and where each stands.
    func recentCommands(_ clock: FamilyClock, limit: Int = 12) async throws(RPCError) -> [[String: Any]] {
        var commands: [(Date, [String: Any])] = []
        for device in try await self.devices() where device.role == .child {
            guard let zone = device.zone, device.status != .revoked else { continue }
            let records = try await self.all(ConfigurationCommand.self, zone: zone, sort: QuerySort(ConfigurationCommand.Field.createdAt, descending: true), limit: limit)
            for record in records.prefix(limit) {
                let fields = record.fields
                let created = fields.createdAt ?? record.createdAt ?? Date()
                let payload = fields.payloadJSON.flatMap { try? JSONParser.parse($0) }
                let status = fields.status
                var what = fields.commandType
                if let snapshot = fields.configuration {
                    what = "The family's rules (\(snapshot.rules.count == 1 ? "1 app" : "\(snapshot.rules.count) apps"))"
                } else if what == "updateAppRule", // written by clients before the server sent configurations
                           let app = payload?["displayName"]?.stringValue ?? payload?["bundleId"]?.stringValue { what = "Rule for \(app)" }
                else if what == "shieldRewardApps" { what = "Shield reward apps" }
                else if what == "unshieldRewardApps" { what = "Unshield reward apps" }
                var item: [String: Any] = [
                    "id": record.recordName, "what": what, "device": device.deviceName ?? device.deviceId, "status": status,
                    "executed": status == "executed", "failed": status == "failed", "pending": status == "pending",
                    "created": clock.time(created),
                ]
                if let executed = fields.executedAt { item["executedAt"] = clock.time(executed) }
                if let error = fields.errorMessage { item["error"] = error }
                commands.append((created, item))
            }
        }
        return commands.sorted { $0.0 > $1.0 }.prefix(limit).map(\.1)
    }

    /// The devices page's rows.
    /// The devices page's rows: signed-out browsers (revoked browser sessions) left out
    /// unless `all`, and how many were.
    func deviceRows(_ clock: FamilyClock, all: Bool) async throws(RPCError) -> (rows: [[String: Any]], hiddenBrowsers: Int, admin: Bool) {
        let devices = try await self.devices()
        let admin = devices.first { $0.deviceId == self.deviceId }?.role == .admin
        let shown = devices.filter { all || !($0.isBrowserSession && $0.status == .revoked) }
        // Whether each child device has the family's rules, as the aggregator knows it
        // (left blank when the aggregator cannot say).
        let configurations = (try? await self.call(AggregatorMethods.devices, Empty()).devices) ?? []
        let states = Dictionary(configurations.map { ($0.deviceId, $0) }, uniquingKeysWith: { first, _ in first })
        let connected = self.gateway.credentialWatch.connected(family: self.family)
        let rows = shown.sorted { ($0.role.rawValue, $0.deviceName ?? $0.deviceId) < ($1.role.rawValue, $1.deviceName ?? $1.deviceId) }.map { device in
            var row: [String: Any] = [
                "deviceId": device.deviceId, "name": device.deviceName ?? device.deviceId,
                "role": device.role == .child ? "Child" : device.role == .admin ? "Parent (admin)" : "Parent",
                "status": device.status.rawValue, "active": device.status == .active, "revoked": device.status == .revoked,
                "child": device.childId ?? "", "paired": clock.time(device.pairedAt),
                "browser": device.isBrowserSession, "me": device.deviceId == self.deviceId,
                "revocable": device.status != .revoked && device.deviceId != self.deviceId,
            ]
            if let seen = device.lastSeenAt {
                row["lastSeen"] = clock.ago(seen)
                row["lastSeenTime"] = clock.time(seen)
            }
            // Its app holds a connection to this gateway now (a phone with the app open).
            if connected.contains(device.deviceId) && device.status == .active { row["connected"] = true }
            if let version = states[device.deviceId]?.appVersion { row["appVersion"] = version }
            if device.status == .active, let clockOff = states[device.deviceId]?.clockOff { row["clockOff"] = clockOff }
            if device.role == .child, device.status == .active, let state = states[device.deviceId] {
                row["rules"] = state.summary.prefix(1).uppercased() + state.summary.dropFirst()
            }
            return row
        }
        return (rows, devices.count - shown.count, admin)
    }


    /// The Activity page's two lists, from the family's AuditEntry records (newest 200):
    /// the alerts the aggregator sent the parents (`action` `alert.<kind>`, newest 20) and
    /// the audit log of parents' and the server's actions (newest 50).
    func activity(_ clock: FamilyClock) async throws(RPCError) -> (alerts: [[String: Any]], log: [[String: Any]]) {
        let page = try await self.call(StoreMethods.query, QueryParams(
            family: self.family, zone: StoreNames.defaultZone, recordType: RecordTypes.auditEntry, sort: QuerySort(AuditEntry.Field.timestamp, descending: true), limit: 200))
        var alerts: [[String: Any]] = [], log: [[String: Any]] = []
        let names = AuditWords.Names(try await self.devices())
        for record in page.records {
            guard let fields = record.fields(as: AuditEntry.self) else { continue }
            let when = fields.timestamp
            let action = fields.action
            let metadata = fields.metadata.flatMap { try? JSONParser.parse($0) }
            if action.hasPrefix("alert.") {
                guard alerts.count < 20 else { continue }
                alerts.append([
                    "id": record.recordName, "kind": String(action.dropFirst(6)), "when": clock.time(when), "ago": clock.ago(when),
                    "title": metadata?["title"]?.stringValue ?? action, "body": metadata?["body"]?.stringValue ?? "",
                ])
            } else if log.count < 50 {
                log.append([
                    "when": clock.time(when), "ago": clock.ago(when), "action": action,
                    "actor": AuditWords.actor(fields.actor ?? record.createdBy, metadata: AuditWords.trusted(metadata, createdBy: record.createdBy), names),
                    "what": AuditWords.sentence(action: action, target: fields.target ?? "", metadata: AuditWords.trusted(metadata, createdBy: record.createdBy), names),
                ])
            }
        }
        return (alerts, log)
    }

    /// The Family record's settings the Settings page edits.
    func settings() async throws(RPCError) -> Family? {
        try await self.fetch(Family.self, self.family)
    }

    /// Saves the family's time zone, alert thresholds and request settings (only these fields
    /// of the Family record: the aggregator re-counts the days it holds in detail in a new zone).
    func saveSettings(timeZone: String, rewardMinutes: Int?, balanceExhausted: Bool, noDataHours: Int?, requestExpiryMinutes: Int? = nil,
                      maxOpenRequests: Int? = nil, digest: (enabled: Bool, day: String, time: String)? = nil) async throws(RPCError) {
        guard TimeZone(identifier: timeZone) != nil else { throw RPCError.invalidParams("timeZone", "is not an IANA time zone, such as Europe/Paris") }
        if let digest {
            guard Weekday(rawValue: digest.day) != nil else { throw RPCError.invalidParams("digestDay", "is a day of the week") }
            guard DowntimeWindow.minutes(digest.time) != nil else { throw RPCError.invalidParams("digestTime", "is a time of day such as 18:00") }
        }
        // A threshold left empty is cleared (null), not kept.
        var fields: [Family.CodingKeys: JSONValue] = [
            .timeZone: .string(timeZone), .alertOnBalanceExhausted: .bool(balanceExhausted),
            .alertRewardMinutesPerDay: rewardMinutes.map { .int(Int64($0)) } ?? .null, .alertNoDataHours: noDataHours.map { .int(Int64($0)) } ?? .null,
            // Left empty: the defaults (120 minutes, 3 requests).
            .requestExpiryMinutes: .int(Int64(requestExpiryMinutes ?? 120)), .maxOpenRequests: .int(Int64(maxOpenRequests ?? 3)),
        ]
        if let digest {
            fields[.digestEnabled] = .bool(digest.enabled)
            fields[.digestDay] = .string(digest.day)
            fields[.digestTime] = .string(String(digest.time.prefix(5)))
        }
        let settings: RecordSave = .changes(Family.self, named: self.family, fields)
        _ = try await self.call(StoreMethods.modify, ModifyParams(
            family: self.family, zone: StoreNames.defaultZone, saves: [settings], savePolicy: .changedKeys, atomic: true))
    }
}
