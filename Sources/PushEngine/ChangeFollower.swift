import Foundation
import Logging
import PushAPI
import RPCClient
import RPCCore
import ChangeFeed
import ServiceKit
import ServiceLifecycle
import StoreAPI
import Synchronization

/// Follows the store's change feed from the saved position: each batch of changes is
/// queued and the position moved in one transaction, then handed to live listeners. On
/// shutdown every listener is ended.
struct ChangeFollower: Service {
    let store: RPCClient
    let database: PushDatabase
    let fanout: Fanout
    let dispatch: Dispatch
    let registry: SubscriptionRegistry
    let hub: Hub
    let access: AccessCache
    let metrics: PushMetrics
    let logger: Logger

    func run() async throws {
        let database = self.database
        let feed = ChangeFeed(store: self.store, watcher: "push", batchSize: 512, logger: self.logger)
        await feed.run(
            position: { try await database.position() },
            apply: { batch in try await self.apply(batch) },
            skip: { horizon in
                // The store purged changes this service never saw (it was away longer than
                // the store's --tombstone-grace): carry on from what is left.
                self.logger.warning("changes were purged from the store before push saw them; skipping to what is left", metadata: ["horizon": "\(horizon)"])
                _ = try await database.enqueue([], position: horizon)
            })
        self.hub.closeAll()
    }

    private func apply(_ batch: [ChangeEvent]) async throws {
        let started = ContinuousClock.now
        let outcome = try await self.fanout.process(batch)
        let matched = ContinuousClock.now
        let queued = try await self.dispatch.queueChanges(outcome.drafts, removing: outcome.fired, position: batch.last?.seq)
        self.registry.remove(outcome.fired)
        if !queued.isEmpty, let newest = batch.last?.at { self.metrics.changeToListener.record(.seconds(max(0, Date().timeIntervalSince(newest)))) }
        if !queued.isEmpty {
            self.logger.debug("notifications queued", metadata: [
                "count": "\(queued.count)", "changes": "\(batch.count)", "through_seq": "\(batch.last?.seq ?? 0)",
                "match_us": "\((matched - started).microseconds)", "queue_and_deliver_us": "\((ContinuousClock.now - matched).microseconds)",
            ])
        }
        for family in outcome.accessChanged { await self.recheckListeners(family) }
    }

    /// Ends the listeners of devices revoked meanwhile.
    func recheckListeners(_ family: String) async {
        guard self.hub.listeningFamilies.contains(family) else { return }
        do {
            let access = try await self.access.access(family)
            self.hub.cut(family: family, where: access.isRevoked)
        } catch {
            self.logger.warning("cannot check a family's access", metadata: ["family": "\(family)", "error": "\(error)"])
        }
    }
}

/// Every `interval`: drops expired notifications, and, while the credential table does not
/// follow the store, checks again the credentials of families with listeners.
struct Maintenance {
    let database: PushDatabase
    let follower: ChangeFollower
    let access: AccessCache
    let logger: Logger

    func run() async {
        do {
            let dropped = try await self.database.purgeExpired(now: Date())
            if dropped > 0 { self.logger.info("expired notifications dropped", metadata: ["count": "\(dropped)"]) }
        } catch {
            self.logger.error("purging expired notifications failed", metadata: ["error": "\(error)"])
        }
        for family in self.access.stale() {
            self.access.invalidate(family)
            await self.follower.recheckListeners(family)
        }
    }
}
