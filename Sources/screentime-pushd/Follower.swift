import Foundation
import Logging
import PushAPI
import RPCClient
import RPCCore
import ServiceKit
import ServiceLifecycle
import StoreAPI
import Synchronization

/// Follows the store's `store.watch` from the saved position: each batch of changes is
/// queued and the position moved in one transaction, then handed to live listeners. A
/// store that goes away is retried with backoff; on shutdown every listener is ended.
struct Follower: Service {
    let store: RPCClient
    let database: PushDatabase
    let fanout: Fanout
    let dispatch: Dispatch
    let registry: SubscriptionRegistry
    let hub: Hub
    let access: AccessCache
    let logger: Logger

    func run() async throws {
        var backoff = Duration.milliseconds(250)
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await self.follow() }
                backoff = .milliseconds(250)
            } catch let error as RPCError where error.code == .changeTokenExpired {
                // The store purged changes this service never saw (it was away longer than
                // the store's --tombstone-grace): carry on from what is left.
                guard case .int(let horizon)? = error.data?["horizon"] else { throw error }
                self.logger.warning("changes were purged from the store before push saw them; skipping to what is left", metadata: ["horizon": "\(horizon)"])
                _ = try await self.database.enqueue([], position: horizon)
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                self.logger.warning("following the store failed; retrying", metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
                let wait = backoff
                do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) } } catch { break }
                backoff = min(backoff * 2, .seconds(30))
            }
        }
        self.hub.closeAll()
    }

    /// One `store.watch` from the saved position until it fails or is cancelled. Changes
    /// arriving while a batch is being written make up the next batch.
    private func follow() async throws {
        let position = try self.database.position()
        self.logger.info("following the store", metadata: ["after": "\(position)"])
        let pending = Backlog<ChangeEvent>()
        let (signal, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { wake.finish() }
                for try await event in self.store.stream(StoreMethods.watch, WatchParams(after: position, watcher: "push")) {
                    guard case .item(let change) = event else { continue }
                    pending.append(change)
                    wake.yield()
                }
            }
            group.addTask {
                for await _ in signal {
                    while true {
                        let batch = pending.take(512)
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
        let outcome = try await self.fanout.process(batch)
        let matched = ContinuousClock.now
        let queued = try await self.dispatch.queue(outcome.drafts, removing: outcome.fired, position: batch.last?.seq)
        self.registry.remove(outcome.fired)
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

/// Every `interval`: drops expired notifications, and checks again the credentials of
/// families with listeners (a revoked parent's stream ends within a minute or so).
struct Maintenance: Service {
    let database: PushDatabase
    let follower: Follower
    let access: AccessCache
    let interval: Duration
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let interval = self.interval
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) } } catch { return }
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
}
