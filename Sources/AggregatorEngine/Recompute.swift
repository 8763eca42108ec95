import AggregatorAPI
import Foundation
import GRDB
import RPCClient
import RPCCore
import ServiceKit
import StoreAPI

/// `aggregator.recompute`: rebuilds one child from the store's records (its devices'
/// UsageRecords and the parents' ledger entries), as if every record had just arrived,
/// and says what differed from what the incremental path had computed.
struct Recompute: Sendable {
    let store: RPCClient
    let database: AggregatorDatabase
    let ingest: Ingest
    let writeback: Wakeup

    func run(_ params: RecomputeParams, auth: Auth?) async throws -> RecomputeResult {
        guard auth == nil else { throw RPCError(.forbidden, "aggregator.recompute is for local administration") }
        let child = "child-\(params.child)"
        let zones = try await self.database.pool.read { db in
            let device = DeviceEntry.Columns.self
            return try Row.fetchAll(db, DeviceEntry.filter(device.family == params.family && device.childRef == child).select(device.zone, device.deviceId))
                .map { (zone: $0[device.zone] as String, deviceId: $0[device.deviceId] as String?) }
        }
        guard !zones.isEmpty else {
            throw RPCError(.notFound, "family \(params.family) has no child \(params.child) with a paired device", data: ["child": .string(params.child)])
        }
        // Everything the store holds for the child, read before the transaction (accruals
        // are the aggregator's own output, not an input).
        var usage: [Ingest.Change] = []
        for zone in zones {
            for record in try await self.all(family: params.family, zone: zone.zone, type: RecordTypes.usageRecord) {
                usage.append(Ingest.Change(deleted: false, family: params.family, zone: zone.zone, recordType: RecordTypes.usageRecord, recordName: record.recordName,
                                           fields: record.fields, at: record.modifiedAt))
            }
        }
        let ledger = try await self.all(family: params.family, zone: StoreNames.defaultZone, type: RecordTypes.pointsLedgerEntry).filter {
            guard let entry = $0.fields(as: PointsLedgerEntry.self) else { return false }
            return entry.childRef.recordName == child && EarnedTime.parentsEntryTypes.contains(entry.type)
        }.map { Ingest.Change(deleted: false, family: params.family, zone: StoreNames.defaultZone, recordType: RecordTypes.pointsLedgerEntry, recordName: $0.recordName, fields: $0.fields) }

        let ingest = self.ingest
        let family = params.family
        let records = usage
        let result = try await self.database.pool.write { db -> RecomputeResult in
            let devices = zones.compactMap(\.deviceId)
            let before = try Self.snapshot(family: family, devices: devices, child: child, db)
            // Forget what was known of the child and apply the store's records afresh, as one
            // batch: days and balances are computed once, at the end, so no state in between
            // (everything forgotten) fires a shield command or an alert.
            var forget: [Ingest.Change] = []
            for zone in zones {
                let session = SessionEntry.Columns.self
                for name in try SessionEntry.filter(session.family == family && session.zone == zone.zone).select(session.recordName, as: String.self).fetchAll(db) {
                    forget.append(Ingest.Change(deleted: true, family: family, zone: zone.zone, recordType: RecordTypes.usageRecord, recordName: name, fields: [:]))
                }
            }
            let entry = LedgerEntry.Columns.self
            for name in try LedgerEntry.filter(entry.family == family && entry.child == child).select(entry.recordName, as: String.self).fetchAll(db) {
                forget.append(Ingest.Change(deleted: true, family: family, zone: StoreNames.defaultZone, recordType: RecordTypes.pointsLedgerEntry, recordName: name, fields: [:]))
            }
            try ingest.apply(forget + records + ledger, db)
            let after = try Self.snapshot(family: family, devices: devices, child: child, db)
            let changed = Set(before.days.keys).union(after.days.keys).filter { before.days[$0] != after.days[$0] }
            return RecomputeResult(
                family: family, child: params.child, usageRecords: records.count, ledgerEntries: ledger.count, days: after.days.count,
                daysChanged: changed.sorted(), balanceSecondsBefore: before.balance, balanceSeconds: after.balance)
        }
        self.writeback.signal()
        return result
    }

    private func all(family: String, zone: String, type: String) async throws -> [StoreAPI.Record] {
        try await self.store.records(family: family, zone: zone, type: type)
    }

    private struct Snapshot {
        var days: [String: [Int64]]
        var balance: Int64?
    }

    private static func snapshot(family: String, devices: [String], child: String, _ db: Database) throws -> Snapshot {
        var days: [String: [Int64]] = [:]
        for device in devices {
            let day = DayEntry.Columns.self
            let request = DayEntry.filter(day.family == family && day.deviceId == device).select(day.day, day.learningSeconds, day.rewardSeconds, day.points)
            for row in try Row.fetchAll(db, request) {
                days["\(device) \(row[day.day] as String)"] = [row[day.learningSeconds], row[day.rewardSeconds], row[day.points]]
            }
        }
        let balance = try ChildEntry.filter(ChildEntry.Columns.family == family && ChildEntry.Columns.child == child)
            .select(ChildEntry.Columns.balanceSeconds, as: Int64.self).fetchOne(db)
        return Snapshot(days: days, balance: balance)
    }
}
