import Foundation
import Logging
import RPCClient
import RPCCore
import ChangeFeed
import DurableSQLite
import GRDB
import ServiceKit
import ServiceLifecycle
import StoreAPI

/// Follows the store's change feed (watcher `aggregator`) from the saved position: each
/// batch of changes is applied and the position moved in one transaction, then the
/// summary writer is woken.
struct UsageFollower: Service {
    let store: RPCClient
    let database: AggregatorDatabase
    let ingest: Ingest
    let summaries: Wakeup
    var metrics = AggregatorMetrics.none
    let logger: Logger

    func run() async throws {
        let database = self.database
        // What a database from before the configuration migration lacks, read once from the
        // store (retried while the store cannot be reached) before following its changes.
        var backoff = Duration.seconds(1)
        let streak = FailureStreak()
        while !Task.isCancelled {
            do {
                try await self.refreshFromStore()
                break
            } catch let error as RPCError where [.unavailable, .timeout, .cancelled].contains(error.code) {
                self.logger.log(level: streak.level(after: error), "reading devices and rules from the store failed; retrying",
                                metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(60))
            } catch {
                // Not a passing trouble: following the store's changes matters more; those
                // devices get their configuration at their next MonitoringSession change.
                self.logger.error("reading devices and rules from the store failed; going on without", metadata: ["error": "\(error)"])
                break
            }
        }
        let feed = ChangeFeed(store: self.store, watcher: "aggregator", recordTypes: Ingest.recordTypes, batchSize: 2000, logger: self.logger)
        await feed.run(
            position: { try await database.position() },
            apply: { batch in try await self.apply(batch) },
            skip: { horizon in
                self.logger.error("changes were purged from the store before the aggregator saw them; skipping to what is left (aggregator.recompute rebuilds a child from its records)",
                                  metadata: ["horizon": "\(horizon)"])
                try await database.pool.write { db in try StoreLogPosition.save(db, horizon) }
            })
    }

    /// Whether the store holds a change the aggregator follows after `position` (one it
    /// has not applied), and the store's head: what `aggregator.status` reports as
    /// `caughtUp` and `storeHead`. Nil when the store cannot be asked.
    static func progress(store: RPCClient, after position: Int64) async -> (storeHead: Int64, caughtUp: Bool)? {
        do {
            var pending = false
            var head = position
            let params = WatchParams(after: position, recordTypes: Ingest.recordTypes, follow: false, includeRecords: false, limit: 1)
            for try await event in store.stream(StoreMethods.watch, params) {
                switch event {
                case .item: pending = true
                case .end(let end): head = end.lastSeq  // caught up: the store's head when it looked
                }
            }
            if pending { head = try await store.call(StoreMethods.stats, Empty()).head }
            return (max(head, position), !pending)
        } catch {
            return nil
        }
    }

    /// Devices whose pairing status the aggregator does not know (it kept none before the
    /// configuration migration): their MonitoringSession and RegisteredDevice, and their
    /// families' AppRules, as the store holds them now, applied as changes would be. The
    /// active devices then get their configuration, blocked rules count, alerts name
    /// devices. Nothing to do once every device has a status.
    private func refreshFromStore() async throws {
        let stale = try await self.database.pool.read { db in
            let device = DeviceEntry.Columns.self
            return try Row.fetchAll(db, DeviceEntry.filter(device.status == nil && device.deviceId != nil).select(device.family, device.zone))
                .map { ($0[device.family] as String, $0[device.zone] as String) }
        }
        guard !stale.isEmpty else { return }
        var changes: [Ingest.Change] = []
        for family in Set(stale.map { $0.0 }).sorted() { changes += try await self.records(family, StoreNames.defaultZone, RecordTypes.appRule) }
        for (family, zone) in stale {
            changes += try await self.records(family, zone, RecordTypes.monitoringSession)
            changes += try await self.records(family, zone, RecordTypes.registeredDevice)
        }
        let ingest = self.ingest, read = changes
        try await self.database.pool.write { db in
            _ = try ingest.apply(read, db)
            // A zone whose session the store no longer has: not asked about again.
            let device = DeviceEntry.Columns.self
            try DeviceEntry.filter(device.status == nil && device.deviceId != nil).updateAll(db, device.status.set(to: "unknown"))
        }
        self.summaries.signal()
        self.logger.notice("devices and rules read again from the store", metadata: ["devices": "\(stale.count)", "records": "\(changes.count)"])
    }

    /// A zone's records of a type, as changes (none when the zone is gone).
    private func records(_ family: String, _ zone: String, _ type: String) async throws -> [Ingest.Change] {
        let records: [StoreAPI.Record]
        do {
            records = try await self.store.records(family: family, zone: zone, type: type)
        } catch {
            if error.code == .notFound { return [] }
            throw error
        }
        return records.map { Ingest.Change(deleted: false, family: family, zone: zone, recordType: type, recordName: $0.recordName, fields: $0.fields, at: $0.modifiedAt) }
    }

    private func apply(_ batch: [ChangeEvent]) async throws {
        let started = ContinuousClock.now
        var changes: [Ingest.Change] = []
        for event in batch {
            guard let type = event.recordType, let name = event.recordName else { continue }
            switch event.kind {
            case .recordSaved:
                // Superseded before we saw it: count the record as it is now (a later
                // deletion, if any, follows in the log).
                var fields = event.record?.fields
                if fields == nil {
                    fields = try await self.store.call(StoreMethods.fetch, FetchParams(family: event.family, zone: event.zone, recordNames: [name])).records.first?.fields
                }
                guard let fields else { continue }
                changes.append(Ingest.Change(deleted: false, family: event.family, zone: event.zone, recordType: type, recordName: name, fields: fields, at: event.at,
                                             seq: event.seq, by: event.record?.modifiedBy, created: event.created))
            case .recordDeleted:
                changes.append(Ingest.Change(deleted: true, family: event.family, zone: event.zone, recordType: type, recordName: name, fields: event.deletedFields ?? [:],
                                             at: event.at, seq: event.seq, by: event.deletedBy))
            default:
                continue
            }
        }
        let ingest = self.ingest
        let through = batch.last?.seq
        let applied = changes
        let recomputed = try await self.database.pool.write { db in
            let count = try ingest.apply(applied, db)
            if let through { try StoreLogPosition.save(db, through) }
            return count
        }
        if recomputed > 0 { self.summaries.signal() }
        self.metrics.applied(batch.count, through: through, newest: batch.last?.at)
        self.logger.debug("changes applied", metadata: [
            "changes": "\(batch.count)", "days_computed": "\(recomputed)", "through_seq": "\(through ?? 0)",
            "duration_us": "\((ContinuousClock.now - started).microseconds)",
        ])
    }
}
