import Foundation
import DurableSQLite
import GRDB
import Logging
import RPCClient
import RPCCore
import AggregatorAPI
import StoreAPI

/// The server's distribution of configuration to child devices: each active device's zone
/// holds one ConfigurationCommand, `configuration`, whose payload is a
/// ``ConfigurationSnapshot`` (every rule of the family and the child's shield now). It is
/// written again when the family's rules or shield policy change (whoever saved them), when
/// a device is confirmed, and when a device asks (`aggregator.resync`): a new or returning
/// device gets the current state as one snapshot, never a replay of each change.
enum Configuration {
    /// The family's rules or shield policy changed: a new version, for every active device.
    static func changed(family: String, _ db: Database) throws {
        try db.execute(cached: """
            INSERT INTO families(family, time_zone, config_version) VALUES (?, 'UTC', 1)
            ON CONFLICT(family) DO UPDATE SET config_version = config_version + 1
            """, arguments: [family])
        // Ingested a change at a time (a rule or shield policy saved): cached, as the rest of ingest.
        for zone in try String.fetchAll(cached: db, sql: "SELECT zone FROM devices WHERE family = ? AND status = 'active' AND device_id IS NOT NULL",
                                         arguments: [family]) {
            try Self.queue(family: family, zone: zone, db)
        }
    }

    /// Queues the snapshot for one device's zone.
    static func queue(family: String, zone: String, _ db: Database) throws {
        try db.execute(cached: """
            INSERT INTO config_outbox(family, zone, version) VALUES (?, ?, 1)
            ON CONFLICT(family, zone) DO UPDATE SET version = version + 1
            """, arguments: [family, zone])
    }

    /// A device marked its configuration command executed: it has that version now.
    static func noteExecuted(_ change: Ingest.Change, _ db: Database) throws {
        guard !change.deleted, change.recordName == ConfigurationSnapshot.recordName, let command = change.record(ConfigurationCommand.self),
              command.status == "executed", let snapshot = command.configuration
        else { return }
        let at = command.executedAt.map(Millis.of) ?? Millis.of(Date())
        try db.execute(cached: """
            UPDATE devices SET applied_version = max(applied_version, ?), applied_at_ms = ? WHERE family = ? AND zone = ?
            """, arguments: [snapshot.version, at, change.family, change.zone])
    }
}

extension AggregatorDatabase {
    /// A device's snapshot to write.
    struct PendingConfiguration: Sendable, FetchableRecord {
        var family: String
        var zone: String
        var version: Int64
        var deviceId: String?
        var child: String?
        var status: String?
        var configVersion: Int64
        var shielded: Bool
        var shieldReason: String?
        var downtimeUntil: Int64?
        var alwaysAllowed: [String]

        init(row: Row) {
            self.family = row["family"]
            self.zone = row["zone"]
            self.version = row["version"]
            self.deviceId = row["device_id"]
            self.child = row["child_ref"]
            self.status = row["status"]
            self.configVersion = row["config_version"] ?? 0
            self.shielded = row["shielded"] ?? false
            self.shieldReason = row["shield_reason"]
            self.downtimeUntil = row["downtime_until_ms"]
            self.alwaysAllowed = (row["always_allowed"] as String?).flatMap { try? RPCJSON.decode([String].self, from: $0) } ?? []
        }
    }

    func pendingConfigurations(limit: Int) async throws -> [PendingConfiguration] {
        try await self.pool.read { db in
            try PendingConfiguration.fetchAll(db, sql: """
                SELECT o.family, o.zone, o.version, v.device_id, v.child_ref, v.status, f.config_version, c.shielded, c.shield_reason,
                    c.downtime_until_ms, d.always_allowed
                FROM config_outbox o
                LEFT JOIN devices v ON v.family = o.family AND v.zone = o.zone
                LEFT JOIN families f ON f.family = o.family
                LEFT JOIN children c ON c.family = o.family AND c.child = v.child_ref
                LEFT JOIN downtime d ON d.family = o.family AND d.child = v.child_ref
                ORDER BY o.family LIMIT ?
                """, arguments: [limit])
        }
    }

    /// Done with these, unless they were queued again meanwhile (a newer version waits).
    func configurationsWritten(_ written: [PendingConfiguration]) async throws {
        try await self.pool.write { db in
            for item in written {
                try db.execute(cached: "DELETE FROM config_outbox WHERE family = ? AND zone = ? AND version = ?",
                               arguments: [item.family, item.zone, item.version])
            }
        }
    }

    /// `aggregator.resync`: queues the device's snapshot; the family's version, or nil when
    /// the aggregator does not know the device (yet).
    func resync(family: String, deviceId: String) async throws -> Int64? {
        try await self.pool.write { db in
            guard let zone = try DeviceEntry.filter(DeviceEntry.Columns.family == family && DeviceEntry.Columns.deviceId == deviceId && DeviceEntry.Columns.status == "active")
                .select(DeviceEntry.Columns.zone, as: String.self).fetchOne(db)
            else { return nil }
            try Configuration.queue(family: family, zone: zone, db)
            return try FamilyEntry.configVersion(family, db)
        }
    }

    /// The names parents gave the family's apps (their rules' `displayName`) and its child
    /// devices (their RegisteredDevice), by id.
    func names(family: String) async throws -> (apps: [String: String], devices: [String: String]) {
        try await self.pool.read { db in
            let apps = try AppNames.of(family: family, db)
            var devices: [String: String] = [:]
            let device = DeviceEntry.Columns.self
            for row in try Row.fetchAll(db, DeviceEntry.paired(family).select(device.deviceId, device.deviceName).filter(device.deviceName != nil)) {
                devices[row[device.deviceId]] = row[device.deviceName]
            }
            return (apps, devices)
        }
    }

    /// Each child device's configuration state, for a parent (`aggregator.devices`).
    func configurationStates(family: String) async throws -> [DeviceConfigurationState] {
        try await self.pool.read { db in
            let version = try FamilyEntry.configVersion(family, db)
            let device = DeviceEntry.Columns.self
            let request = DeviceEntry.paired(family)
                .select(device.deviceId, device.appliedVersion, device.appliedAtMillis, device.appVersion, device.clockOffsetSeconds)
                .order(device.deviceId)
            return try Row.fetchAll(db, request).map { row in
                let applied: Int64 = row[device.appliedVersion]
                var state = DeviceConfigurationState(deviceId: row[device.deviceId], appliedVersion: applied, currentVersion: version,
                                                     appliedAt: (row[device.appliedAtMillis] as Int64?).map(Millis.date))
                state.appVersion = row[device.appVersion]
                let offset: Int64 = row[device.clockOffsetSeconds]
                state.clockOffsetSeconds = offset == 0 ? nil : offset
                return state
            }
        }
    }
}

/// Writes the queued snapshots: the family's rules as the store holds them now (one query
/// per family), each device's child's shield, as the `configuration` command of each
/// device's zone, `pending` again.
struct ConfigurationWriter: Sendable {
    let store: RPCClient
    let database: AggregatorDatabase
    let logger: Logger

    func flush() async throws -> Int {
        let pending = try await self.database.pendingConfigurations(limit: 200)
        guard !pending.isEmpty else { return 0 }
        for group in Dictionary(grouping: pending, by: \.family).values {
            let family = group[0].family
            let active = group.filter { $0.status == "active" && $0.deviceId != nil }
            guard !active.isEmpty else { continue }
            let familyRules = try await self.rules(family: family)
            let childRules = try await self.childRules(family: family)
            for item in active {
                let rules = Self.effective(familyRules, child: childRules[item.child ?? ""] ?? [:])
                let targets = try await self.database.shieldTargets(family: family, child: item.child ?? "")
                let downtime = item.shielded && item.shieldReason == "downtime"
                let open = downtime ? Set(item.alwaysAllowed) : []
                let shield = ConfigurationSnapshot.Shield(
                    shielded: item.shielded, rewardApps: targets.apps.filter { !open.contains($0) }, rewardCategories: targets.categories,
                    reason: item.shielded ? item.shieldReason : nil, alwaysAllowed: downtime ? item.alwaysAllowed : nil,
                    downtimeUntil: downtime ? item.downtimeUntil.map(Millis.date) : nil)
                let snapshot = ConfigurationSnapshot(version: item.configVersion, rules: rules, shield: shield)
                let payload = try RPCJSON.encodeText(snapshot)
                let params = try ModifyParams(family: family, zone: item.zone, saves: [
                    .record(ConfigurationCommand(commandID: ConfigurationSnapshot.recordName, targetDeviceID: item.deviceId!,
                                                 commandType: ConfigurationSnapshot.commandType, payloadJSON: payload, createdAt: Date(), status: "pending"),
                            named: ConfigurationSnapshot.recordName),
                ], savePolicy: .allKeys)
                if let error = await self.store.write(params, logger: self.logger), error.code != .notFound { throw error }
                self.logger.info("configuration sent", metadata: [
                    "family": "\(family)", "device_id": "\(item.deviceId!)", "version": "\(item.configVersion)", "rules": "\(rules.count)",
                ])
            }
        }
        try await self.database.configurationsWritten(pending)
        return pending.count
    }

    /// The family's rules with the child's own in their place (and those the family has none of).
    static func effective(_ family: [ConfigurationSnapshot.Rule], child: [String: ConfigurationSnapshot.Rule]) -> [ConfigurationSnapshot.Rule] {
        guard !child.isEmpty else { return family }
        var rules = family.map { rule in
            child[rule.bundleId].map { own in
                var merged = own
                merged.displayName = rule.displayName
                return merged
            } ?? rule
        }
        let named = Set(family.map(\.bundleId))
        rules += child.values.filter { !named.contains($0.bundleId) }
        return rules.sorted { $0.bundleId < $1.bundleId }
    }

    /// Each child's own rules (ChildAppRule), by child record name, then bundle id.
    private func childRules(family: String) async throws -> [String: [String: ConfigurationSnapshot.Rule]] {
        var rules: [String: [String: ConfigurationSnapshot.Rule]] = [:]
        for record in try await self.store.records(family: family, zone: StoreNames.defaultZone, type: RecordTypes.childAppRule) {
            guard let rule = record.fields(as: ChildAppRule.self) else { continue }
            rules[rule.childRef.recordName, default: [:]][rule.bundleId] = ConfigurationSnapshot.Rule(
                bundleId: rule.bundleId, classification: rule.classification, pointsPerMinute: rule.pointsPerMinute, isEnabled: rule.isEnabled,
                blockingEnabled: rule.blockingEnabled, childOverride: true)
        }
        return rules
    }

    /// Every AppRule of the family, by bundle id.
    private func rules(family: String) async throws -> [ConfigurationSnapshot.Rule] {
        try await self.store.records(family: family, zone: StoreNames.defaultZone, type: RecordTypes.appRule).compactMap { record in
            record.fields(as: AppRule.self).map { rule in
                ConfigurationSnapshot.Rule(bundleId: rule.bundleId, classification: rule.classification, pointsPerMinute: rule.pointsPerMinute,
                                           isEnabled: rule.isEnabled, blockingEnabled: rule.blockingEnabled, displayName: rule.displayName)
            }
        }.sorted { $0.bundleId < $1.bundleId }
    }
}

/// The names parents gave the family's apps, by the app as sessions name it (their logical
/// id): the family's rule names it by bundle id, a device's own rule by the logical id (that
/// one wins).
enum AppNames {
    static func of(family: String, _ db: Database) throws -> [String: String] {
        var apps: [String: String] = [:]
        for row in try Row.fetchAll(db, sql: """
            SELECT DISTINCT s.app, r.display_name FROM sessions s
            JOIN app_rules r ON r.family = s.family AND r.device_id = '' AND r.app = coalesce(s.bundle_id, s.app)
            WHERE s.family = ? AND r.display_name IS NOT NULL
            """, arguments: [family]) {
            apps[row["app"]] = row["display_name"]
        }
        let rule = AppRuleEntry.Columns.self
        for row in try Row.fetchAll(db, AppRuleEntry.select(rule.app, rule.displayName)
            .filter(rule.family == family && rule.deviceId != "" && rule.displayName != nil)) {
            apps[row[rule.app]] = row[rule.displayName]
        }
        return apps
    }
}
