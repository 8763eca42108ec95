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

    private struct PendingWeek: FetchableRecord {
        var family: String
        var child: String
        var week: String
        var version: Int64
        var timeZone: String
        var days = Tally()
        var redeemed: Int64
        var adjusted: Int64
        var ledgerEntries: Int64
        var usageRecords: Int64

        enum Columns {
            static let family = Column("family"), child = Column("child"), week = Column("week"), version = Column("version")
            static let timeZone = Column("time_zone"), redeemed = Column("redeemed"), adjusted = Column("adjusted")
            static let ledgerEntries = Column("ledger_entries"), usageRecords = Column("usage_records")
        }

        init(row: Row) {
            self.family = row[Columns.family]
            self.child = row[Columns.child]
            self.week = row[Columns.week]
            self.version = row[Columns.version]
            self.timeZone = row[Columns.timeZone]
            self.redeemed = row[Columns.redeemed]
            self.adjusted = row[Columns.adjusted]
            self.ledgerEntries = row[Columns.ledgerEntries]
            self.usageRecords = row[Columns.usageRecords]
        }
    }

    private func writeWeeks() async throws -> Int {
        let pending = try await self.pendingWeeks(limit: 200)
        guard !pending.isEmpty else { return 0 }
        for group in Dictionary(grouping: pending, by: \.family).values {
            let family = group[0].family
            let saves = try group.map { item in
                let week = WeeklySummary(
                    childRef: .inDefaultZone(item.child), weekStart: LocalDays(timeZone: item.timeZone)?.bounds(of: item.week)?.start ?? Date(),
                    totalLearningSeconds: item.days.learning, totalRewardSeconds: item.days.reward, pointsAccrued: item.days.points,
                    pointsRedeemed: item.redeemed, pointsAdjusted: item.adjusted, usageRecordsPruned: item.usageRecords, ledgerEntriesPruned: item.ledgerEntries,
                    appsUsedJSON: try RPCJSON.encodeText(item.days.top()), lastUpdated: Date())
                return try RecordSave.record(week, named: "week-\(item.child)-\(item.week)")
            }
            if let error = await self.store.write(ModifyParams(family: family, zone: StoreNames.defaultZone, saves: saves, savePolicy: .allKeys), logger: self.logger) {
                guard error.code == .notFound else { throw error }
                self.logger.info("weekly summaries dropped: the family is gone", metadata: ["family": "\(family)"])
            }
        }
        try await self.database.pool.write { db in
            for item in pending {
                let outbox = WeekOutbox.Columns.self
                try WeekOutbox.filter(outbox.family == item.family && outbox.child == item.child && outbox.week == item.week && outbox.version == item.version)
                    .deleteAll(db)
            }
        }
        self.logger.debug("weekly summaries written", metadata: ["count": "\(pending.count)"])
        return pending.count
    }

    /// The weeks to write, each with its days (as reports read them) and carried ledger.
    private func pendingWeeks(limit: Int) async throws -> [PendingWeek] {
        var weeks = try await self.database.pool.read { db in
            try PendingWeek.fetchAll(db, sql: """
                SELECT o.family, o.child, o.week, o.version, coalesce(f.time_zone, 'UTC') AS time_zone,
                    coalesce(c.redeemed, 0) AS redeemed, coalesce(c.adjusted, 0) AS adjusted,
                    coalesce(c.ledger_entries, 0) AS ledger_entries, coalesce(c.usage_records, 0) AS usage_records
                FROM week_outbox o
                LEFT JOIN families f ON f.family = o.family
                LEFT JOIN carried c ON c.family = o.family AND c.child = o.child AND c.week = o.week
                ORDER BY o.family LIMIT ?
                """, arguments: [limit])
        }
        for index in weeks.indices {
            let week = weeks[index]
            let last = LocalDays(timeZone: week.timeZone)?.day(week.week, plus: 6) ?? week.week
            let devices = try await self.database.devices(ofChild: week.child, family: week.family)
            for day in try await self.database.days(family: week.family, devices: devices, from: week.week, to: last) { weeks[index].days.add(day) }
        }
        return weeks
    }

    private func prune() async throws -> Int {
        let pending = try await self.database.pool.read { db in
            let outbox = PruneOutbox.Columns.self
            return try Row.fetchAll(db, PruneOutbox.select(outbox.family, outbox.zone, outbox.recordName).order(outbox.family, outbox.zone).limit(400))
                .map { (family: $0[outbox.family] as String, zone: $0[outbox.zone] as String, name: $0[outbox.recordName] as String) }
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
                let outbox = PruneOutbox.Columns.self
                try PruneOutbox.filter(outbox.family == item.family && outbox.zone == item.zone && outbox.recordName == item.name).deleteAll(db)
            }
        }
        self.logger.info("records pruned from the store", metadata: ["count": "\(pending.count)"])
        return pending.count
    }
}
