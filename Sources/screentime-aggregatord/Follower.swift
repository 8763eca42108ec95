import Foundation
import Logging
import RPCClient
import RPCCore
import ServiceKit
import ServiceLifecycle
import StoreAPI

/// Follows the store's `store.watch` (watcher `aggregator`) from the saved position: each
/// batch of changes is applied and the position moved in one transaction, then the
/// summary writer is woken. A store that goes away is retried with backoff.
struct Follower: Service {
    let store: RPCClient
    let database: AggregatorDatabase
    let ingest: Ingest
    let summaries: Wakeup
    let logger: Logger

    func run() async throws {
        var backoff = Duration.milliseconds(250)
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await self.follow() }
                backoff = .milliseconds(250)
            } catch let error as RPCError where error.code == .changeTokenExpired {
                guard case .int(let horizon)? = error.data?["horizon"] else { throw error }
                self.logger.error("changes were purged from the store before the aggregator saw them; skipping to what is left (aggregator.recompute rebuilds a child from its records)",
                                  metadata: ["horizon": "\(horizon)"])
                try await self.database.pool.write { db in try AggregatorDatabase.setPosition(db, horizon) }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                self.logger.warning("following the store failed; retrying", metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
                let wait = backoff
                do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) } } catch { break }
                backoff = min(backoff * 2, .seconds(30))
            }
        }
    }

    private func follow() async throws {
        let position = try self.database.position()
        self.logger.info("following the store", metadata: ["after": "\(position)"])
        let pending = Backlog<ChangeEvent>()
        let (signal, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { wake.finish() }
                let params = WatchParams(after: position, recordTypes: Ingest.recordTypes, watcher: "aggregator")
                for try await event in self.store.stream(StoreMethods.watch, params) {
                    guard case .item(let change) = event else { continue }
                    pending.append(change)
                    wake.yield()
                }
            }
            group.addTask {
                for await _ in signal {
                    while true {
                        let batch = pending.take(2000)
                        if batch.isEmpty { break }
                        try await self.apply(batch)
                    }
                }
            }
            try await group.waitForAll()
        }
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
                changes.append(Ingest.Change(deleted: false, family: event.family, zone: event.zone, recordType: type, recordName: name, fields: fields))
            case .recordDeleted:
                changes.append(Ingest.Change(deleted: true, family: event.family, zone: event.zone, recordType: type, recordName: name, fields: event.deletedFields ?? [:]))
            default:
                continue
            }
        }
        let ingest = self.ingest
        let through = batch.last?.seq
        let applied = changes
        let recomputed = try await self.database.pool.write { db in
            let count = try ingest.apply(applied, db)
            if let through { try AggregatorDatabase.setPosition(db, through) }
            return count
        }
        if recomputed > 0 { self.summaries.signal() }
        self.logger.debug("changes applied", metadata: [
            "changes": "\(batch.count)", "days_computed": "\(recomputed)", "through_seq": "\(through ?? 0)",
            "duration_us": "\((ContinuousClock.now - started).microseconds)",
        ])
    }
}
