import AggregatorAPI
import Foundation
import GRDB
import Logging
import RPCClient
import RPCCore
import ServiceKit
import StoreAPI
import UsageModel

/// Writes what retention decided: first each rolled-up week as a WeeklySummary
/// (`week-<childRecordName>-<Monday>` in the default zone), then the deletions of the
/// pruned records, so the store never lacks both the detail and its summary.
struct RetentionWriter: Sendable {
    let store: RPCClient
    let database: AggregatorDatabase
    let logger: Logger

    func flush() async throws -> Int {
        try await self.writeWeeks() + self.prune()
    }

    private struct PendingWeek {
        var family: String
        var child: String
        var week: String
        var version: Int64
        var timeZone: String
        var learning: Int64
        var reward: Int64
        var accrued: Int64
        var apps: [AppUsage]
        var redeemed: Int64
        var adjusted: Int64
        var ledgerEntries: Int64
        var usageRecords: Int64
    }

    private func writeWeeks() async throws -> Int {
        let pending = try await self.database.pool.read { db in try Self.pendingWeeks(limit: 200, db) }
        guard !pending.isEmpty else { return 0 }
        for group in Dictionary(grouping: pending, by: \.family).values {
            let family = group[0].family
            let saves = try group.map { item in
                var fields: [String: JSONValue] = [
                    "childRef": .reference(item.child, zone: StoreNames.defaultZone),
                    "totalLearningSeconds": .int(item.learning), "totalRewardSeconds": .int(item.reward), "pointsAccrued": .int(item.accrued),
                    "pointsRedeemed": .int(item.redeemed), "pointsAdjusted": .int(item.adjusted),
                    "usageRecordsPruned": .int(item.usageRecords), "ledgerEntriesPruned": .int(item.ledgerEntries),
                    "appsUsedJSON": .string(try AppsJSON.encode(item.apps)), "lastUpdated": .date(Date()),
                ]
                fields["weekStart"] = LocalDays(timeZone: item.timeZone)?.bounds(of: item.week).map { .date($0.start) } ?? .date(Date())
                return RecordSave(recordType: "WeeklySummary", recordName: "week-\(item.child)-\(item.week)", fields: fields)
            }
            if let error = await self.store.write(ModifyParams(family: family, zone: StoreNames.defaultZone, saves: saves, savePolicy: .allKeys), logger: self.logger) {
                guard error.code == .notFound else { throw error }
                self.logger.info("weekly summaries dropped: the family is gone", metadata: ["family": "\(family)"])
            }
        }
        try await self.database.pool.write { db in
            for item in pending {
                try db.execute(sql: "DELETE FROM week_outbox WHERE family = ? AND child = ? AND week = ? AND version = ?",
                               arguments: [item.family, item.child, item.week, item.version])
            }
        }
        self.logger.debug("weekly summaries written", metadata: ["count": "\(pending.count)"])
        return pending.count
    }

    private static func pendingWeeks(limit: Int, _ db: Database) throws -> [PendingWeek] {
        try Row.fetchAll(db, sql: """
            SELECT o.family, o.child, o.week, o.version, coalesce(f.time_zone, 'UTC') AS time_zone,
                coalesce(c.redeemed, 0) AS redeemed, coalesce(c.adjusted, 0) AS adjusted,
                coalesce(c.ledger_entries, 0) AS ledger_entries, coalesce(c.usage_records, 0) AS usage_records
            FROM week_outbox o
            LEFT JOIN families f ON f.family = o.family
            LEFT JOIN carried c ON c.family = o.family AND c.child = o.child AND c.week = o.week
            ORDER BY o.family LIMIT ?
            """, arguments: [limit]).map { row in
            var week = PendingWeek(
                family: row["family"], child: row["child"], week: row["week"], version: row["version"], timeZone: row["time_zone"],
                learning: 0, reward: 0, accrued: 0, apps: [], redeemed: row["redeemed"], adjusted: row["adjusted"],
                ledgerEntries: row["ledger_entries"], usageRecords: row["usage_records"])
            let days = LocalDays(timeZone: week.timeZone) ?? LocalDays(timeZone: "UTC")!
            let last = days.day(week.week, plus: 6) ?? week.week
            var apps: [String: AppUsage] = [:]
            for day in try Row.fetchAll(db, sql: """
                SELECT d.learning_seconds, d.reward_seconds, d.points, d.apps FROM days d
                JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
                WHERE d.family = ? AND v.child_ref = ? AND d.day BETWEEN ? AND ?
                """, arguments: [week.family, week.child, week.week, last]) {
                week.learning += day["learning_seconds"]
                week.reward += day["reward_seconds"]
                week.accrued += day["points"]
                for app in (try? AppsJSON.decode(day["apps"])) ?? [] {
                    var merged = apps[app.app] ?? AppUsage(app: app.app, category: app.category, seconds: 0, points: 0)
                    merged.seconds += app.seconds
                    merged.points += app.points
                    apps[app.app] = merged
                }
            }
            week.apps = apps.values.sorted { ($0.seconds, $1.app) > ($1.seconds, $0.app) }
            return week
        }
    }

    private func prune() async throws -> Int {
        let pending = try await self.database.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT family, zone, record_name FROM prune_outbox ORDER BY family, zone LIMIT 400")
                .map { (family: $0["family"] as String, zone: $0["zone"] as String, name: $0["record_name"] as String) }
        }
        guard !pending.isEmpty else { return 0 }
        for group in Dictionary(grouping: pending, by: { [$0.family, $0.zone] }).values {
            let params = ModifyParams(family: group[0].family, zone: group[0].zone, deletes: group.map { RecordDelete(recordName: $0.name) })
            if let error = await self.store.write(params, logger: self.logger) {
                guard error.code == .notFound else { throw error }
            }
        }
        try await self.database.pool.write { db in
            for item in pending {
                try db.execute(sql: "DELETE FROM prune_outbox WHERE family = ? AND zone = ? AND record_name = ?", arguments: [item.family, item.zone, item.name])
            }
        }
        self.logger.info("records pruned from the store", metadata: ["count": "\(pending.count)"])
        return pending.count
    }
}

/// Rolls up every family on a timer, and on `aggregator.rollUp`.
struct RollUps: Sendable {
    let database: AggregatorDatabase
    let retentionDays: Int
    let writeback: Wakeup
    let logger: Logger

    func run(_ params: RollUpParams, auth: Auth?) async throws -> RollUpResult {
        guard auth == nil else { throw RPCError(.forbidden, "aggregator.rollUp is for local administration") }
        if let asOf = params.asOf {
            guard LocalDays.parse(asOf) != nil else { throw RPCError.invalidParams("params.asOf", "must be a date written YYYY-MM-DD, such as 2026-11-22") }
        }
        return try await self.rollUp(family: params.family, asOf: params.asOf)
    }

    /// The periodic check.
    func check() async {
        do {
            let result = try await self.rollUp(family: nil, asOf: nil)
            let sealed = result.families.filter { !$0.weeks.isEmpty }
            if !sealed.isEmpty { self.logger.info("retention rolled up weeks", metadata: ["families": "\(sealed.count)"]) }
        } catch {
            self.logger.warning("retention roll-up failed; trying again later", metadata: ["error": "\(error)"])
        }
    }

    private func rollUp(family: String?, asOf: String?) async throws -> RollUpResult {
        let retentionDays = self.retentionDays
        let now = Date()
        let result = try await self.database.pool.write { db -> RollUpResult in
            let known = try Retention.families(db)
            if let family, !known.contains(family) {
                throw RPCError(.notFound, "the aggregator knows no family \(family)", data: ["family": .string(family)])
            }
            let families = family.map { [$0] } ?? known
            var rolled: [FamilyRollUp] = []
            for family in families {
                let today = try Ingest.localDays(of: family, db).day(containing: now)
                if let asOf, asOf < today {
                    throw RPCError.invalidParams("params.asOf", "must not be before today (\(today) in the family's time zone): retention only moves forward")
                }
                guard let done = try Retention.rollUp(family: family, today: max(asOf ?? today, today), retentionDays: retentionDays, db) else { continue }
                rolled.append(done)
                if !done.weeks.isEmpty {
                    self.logger.info("weeks rolled up", metadata: [
                        "family": "\(family)", "sealed_before": "\(done.sealedBefore)", "weeks": "\(done.weeks.count)",
                        "usage_records": "\(done.usageRecordsPruned)", "ledger_entries": "\(done.ledgerEntriesPruned)",
                    ])
                }
            }
            return RollUpResult(families: rolled)
        }
        if result.families.contains(where: { !$0.weeks.isEmpty || $0.usageRecordsPruned + $0.ledgerEntriesPruned > 0 }) { self.writeback.signal() }
        return result
    }
}
