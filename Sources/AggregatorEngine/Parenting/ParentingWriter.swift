import Foundation
import GRDB
import Logging
import PushAPI
import RPCClient
import RPCCore
import StoreAPI

/// Writes what parenting actions queued: records to the store (requests, ledger entries,
/// audit entries; in order, each record's last save of a batch), and notifications to push.
struct ParentingWriter: Sendable {
    let store: RPCClient
    let push: RPCClient
    let database: AggregatorDatabase
    let logger: Logger

    func flushRecords() async throws -> Int {
        let pending = try await self.database.pool.read { db in
            try RecordOutboxRow.order(RecordOutboxRow.Columns.id).limit(ModifyParams.maximumItems).fetchAll(db)
        }
        guard !pending.isEmpty else { return 0 }
        // One call per family and zone, in the order they were queued; a record saved twice
        // in the batch (a request asked, then answered) is saved as it was last.
        var groups: [(family: String, zone: String, rows: [RecordOutboxRow])] = []
        for row in pending {
            if let last = groups.indices.last, groups[last].family == row.family, groups[last].zone == row.zone {
                groups[last].rows.removeAll { $0.recordName == row.recordName }
                groups[last].rows.append(row)
            } else {
                groups.append((row.family, row.zone, [row]))
            }
        }
        for group in groups {
            let saves = group.rows.map { row in
                let fields = (try? RPCJSON.decode(JSONValue.self, from: row.fields))?.objectValue ?? [:]
                return RecordSave(recordType: row.recordType, recordName: row.recordName, fields: fields)
            }
            let params = ModifyParams(family: group.family, zone: group.zone, saves: saves, savePolicy: .allKeys)
            if let error = await self.store.write(params, logger: self.logger) {
                guard error.code == .notFound else { throw error }
                self.logger.info("parenting records dropped: the family is gone", metadata: ["family": "\(group.family)"])
            }
        }
        let last = pending.compactMap(\.id).max() ?? 0
        _ = try await self.database.pool.write { db in try RecordOutboxRow.filter(RecordOutboxRow.Columns.id <= last).deleteAll(db) }
        return pending.count
    }

    func flushNotifications() async throws -> Int {
        let pending = try await self.database.pool.read { db in
            try NotifyOutboxRow.order(NotifyOutboxRow.Columns.id).limit(100).fetchAll(db)
        }
        for row in pending {
            guard let params = try? RPCJSON.decode(NotifyParams.self, from: row.params) else { continue }
            if let error = await self.notify(params) {
                // Push is away: the notification waits in the outbox. Refused: it never will be sent.
                guard error.code == .notFound || error.code == .invalidParams else { throw error }
                self.logger.warning("notification dropped: push refused it", metadata: ["family": "\(row.family)", "error": "\(error)"])
            }
            _ = try await self.database.pool.write { db in try NotifyOutboxRow.deleteOne(db, key: row.id) }
        }
        return pending.count
    }

    private func notify(_ params: NotifyParams) async -> RPCError? {
        do {
            _ = try await self.push.call(PushMethods.notify, params)
            return nil
        } catch {
            return error
        }
    }
}
