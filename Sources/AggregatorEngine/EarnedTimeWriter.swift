import DurableSQLite
import Foundation
import Logging
import RPCClient
import RPCCore
import StoreAPI
import Synchronization
import UsageModel

/// Writes children's points and earned time to the store, in the family's default zone:
/// the aggregator's ledger entries (`accrual-<child>-<YYYY-MM-DD>-<n>`, each written once,
/// its idempotency key the same), the EarnedTimeBalance (`balance-<child>`), and on each shield
/// crossing a ConfigurationCommand to every device of the child (`shield-<n>`, in the
/// device's zone).
struct EarnedTimeWriter: Sendable {
    let store: RPCClient
    let database: AggregatorDatabase
    let logger: Logger

    static let shieldCommand = "shieldRewardApps"
    static let unshieldCommand = "unshieldRewardApps"

    func flush() async throws -> Int {
        try await self.flushAccruals() + self.flushBalances()
    }

    /// The ledger's new entries: each saved once with what it will always say (saved again
    /// after a crash, the same content is no change).
    private func flushAccruals() async throws -> Int {
        // 200: an entry may carry a delete (the earlier naming's), and a call holds at most 400 items.
        let pending = try await self.database.pendingAccruals(limit: ModifyParams.maximumItems / 2)
        guard !pending.isEmpty else { return 0 }
        var adopted: [(family: String, record: StoreAPI.Record)] = []
        for group in Dictionary(grouping: pending, by: \.family).values {
            let family = group[0].family
            let saves = try group.map { entry throws(RPCError) in
                // An entry that replaces a day's single entry of the earlier naming keeps its date.
                let at = entry.replaces == nil ? nil : LocalDays(timeZone: entry.timeZone)?.bounds(of: entry.day)?.start
                let ledgerEntry = PointsLedgerEntry(
                    familyRef: .inDefaultZone(family), childRef: .inDefaultZone(entry.child), type: entry.type, amount: entry.amount,
                    timestamp: at ?? Millis.date(entry.atMillis),
                    reason: entry.type == "reversal" ? "learning on \(entry.day) counted again: fewer points" : "learning on \(entry.day)",
                    idempotencyKey: entry.recordName)
                return try RecordSave.record(ledgerEntry, named: entry.recordName)
            }
            let deletes = group.compactMap(\.replaces).map { RecordDelete(recordName: $0) }
            let params = ModifyParams(family: family, zone: StoreNames.defaultZone, saves: saves, deletes: deletes, savePolicy: .allKeys)
            // An entry of that name already in the store, saying something else (written
            // before this database was made again from the store's history): the store's
            // is the record. It is adopted (EarnedTime.adoptEntry), and the day's
            // difference entered anew.
            let found = Mutex<[StoreAPI.Record]>([])
            if let error = await self.store.write(params, logger: self.logger, accepting: { outcome in
                guard outcome.error?.code == .conflict, let record = outcome.error?.serverRecord, record.recordType == RecordTypes.pointsLedgerEntry else { return false }
                self.logger.info("a ledger entry of that name is already in the store; the store's is kept", metadata: ["family": "\(family)", "record_name": "\(outcome.recordName)"])
                found.withLock { $0.append(record) }
                return true
            }) {
                guard error.code == .notFound else { throw error }
                self.logger.info("ledger entries dropped: the family is gone", metadata: ["family": "\(family)"])
            }
            adopted += found.withLock { $0 }.map { (family, $0) }
        }
        try await self.database.accrualsWritten(pending)
        try await self.adopt(adopted)
        return pending.count
    }

    /// The store's own entries where this database's differed: taken as the record, each
    /// day's difference entered again (written at the next flush).
    private func adopt(_ records: [(family: String, record: StoreAPI.Record)]) async throws {
        guard !records.isEmpty else { return }
        try await self.database.pool.write { db in
            var days: [EarnedTime.Child: Set<String>] = [:]
            for (family, record) in records {
                let change = Ingest.Change(deleted: false, family: family, zone: StoreNames.defaultZone, recordType: record.recordType,
                                           recordName: record.recordName, fields: record.fields, at: record.modifiedAt)
                let calendar = try Ingest.localDays(of: family, db)
                if let adopted = try EarnedTime.adoptEntry(change, seal: try Retention.seal(of: family, days: calendar, db), db) {
                    days[adopted.child, default: []].insert(adopted.day)
                }
            }
            try EarnedTime.enterDifferences(days, now: Millis.of(Date()), calendar: { try Ingest.localDays(of: $0, db) }, db)
        }
    }

    private func flushBalances() async throws -> Int {
        let pending = try await self.database.pendingChildWrites(limit: 400)
        guard !pending.isEmpty else { return 0 }
        for group in Dictionary(grouping: pending, by: \.family).values {
            let family = group[0].family
            let saves = try group.compactMap { item throws(RPCError) -> RecordSave? in
                guard let balance = item.balance else { return nil }
                let record = EarnedTimeBalance(childRef: .inDefaultZone(item.child), balanceSeconds: balance.balanceSeconds, updatedAt: Date(),
                                               pointsBalance: balance.points, rewardSecondsUsed: balance.rewardSeconds, shielded: balance.shielded,
                                               shieldReason: balance.shieldReason, pausedSince: balance.pause?.since, pausedUntil: balance.pause?.until,
                                               pausedBy: balance.pause?.by, rewardSecondsToday: balance.rewardToday, downtimeUntil: balance.downtimeUntil)
                return try RecordSave.record(record, named: "balance-\(item.child)")
            }
            let params = ModifyParams(family: family, zone: StoreNames.defaultZone, saves: saves, savePolicy: .allKeys)
            if let error = await self.store.write(params, logger: self.logger) {
                guard error.code == .notFound else { throw error }
                self.logger.info("children's balances dropped: the family is gone", metadata: ["family": "\(family)"])
            }
            for item in group {
                if let balance = item.balance, balance.shieldVersion > balance.commandsVersion {
                    try await self.sendShieldCommands(family: family, child: item.child, balance: balance)
                }
            }
        }
        try await self.database.childWritesDone(pending)
        return pending.count
    }

    /// One command per device of the child, named by the crossing's number, so writing it
    /// again after a crash replaces rather than repeats it.
    private func sendShieldCommands(family: String, child: String, balance: AggregatorDatabase.PendingChildWrite.Balance) async throws {
        let targets = try await self.database.shieldTargets(family: family, child: child)
        // The command's payload is its own contract with the child's app (docs/protocol.md,
        // "Shield commands"), not record fields: its keys stay spelt out here.
        // Downtime leaves its always-allowed apps open.
        let open = balance.shieldReason == "downtime" ? Set(balance.alwaysAllowed) : []
        var payload: [String: JSONValue] = [
            "rewardApps": .array(targets.apps.filter { !open.contains($0) }.map(JSONValue.string)),
            "rewardCategories": .array(targets.categories.map(JSONValue.string)), "balanceSeconds": .int(balance.balanceSeconds),
        ]
        if let reason = balance.shieldReason { payload["reason"] = .string(reason) }
        if let until = balance.pause?.until { payload["pausedUntil"] = .date(until) }
        if balance.shieldReason == "downtime" {
            payload["alwaysAllowed"] = .array(balance.alwaysAllowed.map(JSONValue.string))
            if let until = balance.downtimeUntil { payload["downtimeUntil"] = .date(until) }
        }
        let payloadText = try RPCJSON.encodeText(JSONValue.object(payload))
        let kind = balance.shielded ? Self.shieldCommand : Self.unshieldCommand
        for device in targets.devices {
            let name = "shield-\(balance.shieldVersion)"
            let params = try ModifyParams(family: family, zone: device.zone, saves: [
                .record(ConfigurationCommand(commandID: name, targetDeviceID: device.deviceId, commandType: kind, payloadJSON: payloadText,
                                             createdAt: Date(), status: "pending"), named: name),
            ], savePolicy: .allKeys)
            if let error = await self.store.write(params, logger: self.logger), error.code != .notFound { throw error }
        }
        try await self.database.shieldCommandsWritten(family: family, child: child, version: balance.shieldVersion)
        self.logger.notice(balance.shielded ? "reward apps shielded" : "reward apps unshielded", metadata: [
            "reason": "\(balance.shieldReason ?? "time to spend")",
            "family": "\(family)", "child": "\(child)", "balance_seconds": "\(balance.balanceSeconds)", "devices": "\(targets.devices.count)",
        ])
    }
}
