import Logging
import RPCClient
import RPCCore
import ServiceLifecycle
import StoreAPI
import Synchronization

/// Follows the store's `store.watch` for a service that derives state from it (push, the
/// aggregator): from the position the service saved, in batches, retrying with backoff
/// while the store is away. The service applies each batch and saves the new position in
/// one transaction of its own, so a crash replays from the old position and nothing is
/// applied twice.
///
/// Memory stays bounded however far behind the service is: it catches up a page at a time
/// (`store.watch` with a `limit`, ending at each page), and only then follows live, where
/// changes arriving while a batch is applied make up the next one. A live backlog that
/// grows past ``maximumBacklog`` (the store commits faster than the service applies) ends
/// the live stream; the service applies what it holds and catches up in pages again from
/// its saved position.
public struct ChangeFeed: Sendable {
    public let store: RPCClient
    /// The watcher's name: the store does not wake a service while it follows.
    public let watcher: String
    public let recordTypes: [String]?
    public let batchSize: Int
    /// Changes in a catch-up page.
    public let pageSize: Int
    /// Changes held while following live, at most.
    public let maximumBacklog: Int
    public let logger: Logger

    public init(store: RPCClient, watcher: String, recordTypes: [String]? = nil, batchSize: Int, pageSize: Int? = nil,
                maximumBacklog: Int? = nil, logger: Logger) {
        self.store = store
        self.watcher = watcher
        self.recordTypes = recordTypes
        self.batchSize = batchSize
        self.pageSize = pageSize ?? 4 * batchSize
        self.maximumBacklog = maximumBacklog ?? 8 * batchSize
        self.logger = logger
    }

    /// The live backlog passed ``maximumBacklog``.
    struct FellBehind: Error {}

    /// Runs until cancelled or shut down gracefully. `position` reads the saved position;
    /// `apply` applies a batch (and saves its last `seq`); `skip` is called with the store's
    /// horizon when changes after the position were purged before this service saw them.
    public func run(
        position: @escaping @Sendable () async throws -> Int64,
        apply: @escaping @Sendable ([ChangeEvent]) async throws -> Void,
        skip: @escaping @Sendable (Int64) async throws -> Void
    ) async {
        var backoff = Duration.milliseconds(250)
        let streak = FailureStreak()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown {
                    let caughtUp = try await self.catchUp(from: try await position(), apply: apply)
                    streak.reset()
                    try await self.follow(from: caughtUp, apply: apply)
                }
                backoff = .milliseconds(250)
            } catch is FellBehind {
                self.logger.info("the live change feed ran ahead of this service; catching up in pages",
                                 metadata: ["backlog_limit": "\(self.maximumBacklog)"])
            } catch let error as RPCError where error.code == .changeTokenExpired {
                guard case .int(let horizon)? = error.data?["horizon"] else {
                    self.logger.error("the store refused the change feed", metadata: ["error": "\(error)"])
                    return
                }
                do { try await skip(horizon) } catch { self.logger.error("cannot skip to the store's horizon", metadata: ["error": "\(error)"]) }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                self.logger.log(level: streak.level(after: error), "following the store failed; retrying",
                                metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
                let wait = backoff
                do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) } } catch { break }
                backoff = min(backoff * 2, .seconds(30))
            }
        }
    }

    /// Pages of changes after `position` until a page ends short; returns where the last
    /// one ended.
    private func catchUp(from position: Int64, apply: @escaping @Sendable ([ChangeEvent]) async throws -> Void) async throws -> Int64 {
        var position = position
        while true {
            var page: [ChangeEvent] = []
            page.reserveCapacity(self.pageSize)
            var end = position
            let params = WatchParams(after: position, recordTypes: self.recordTypes, follow: false, limit: self.pageSize)
            for try await event in self.store.stream(StoreMethods.watch, params) {
                switch event {
                case .item(let change): page.append(change)
                case .end(let last): end = last.lastSeq
                }
            }
            var rest = page[...]
            while !rest.isEmpty {
                try await apply(Array(rest.prefix(self.batchSize)))
                rest = rest.dropFirst(self.batchSize)
            }
            // Past the last change applied when the page scanned changes it filters out.
            position = max(position, end)
            if page.count < self.pageSize { return position }
            self.logger.debug("caught up a page", metadata: ["changes": "\(page.count)", "through_seq": "\(position)"])
        }
    }

    private func follow(from position: Int64, apply: @escaping @Sendable ([ChangeEvent]) async throws -> Void) async throws {
        self.logger.info("following the store", metadata: ["after": "\(position)"])
        let pending = Backlog<ChangeEvent>()
        let (signal, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // How the live stream ended: nil while it runs, then the error it ended with (none
        // for an end of the store's). Its changes are read on the store connection's event
        // loop as they come, with no task or stream per change.
        let ending = Mutex<Ending?>(nil)
        // The stream, once open: stopped on the store as soon as it falls behind.
        let opened = Mutex<RelayedStream?>(nil)
        let (limit, batchSize) = (self.maximumBacklog, self.batchSize)
        let params = WatchParams(after: position, recordTypes: self.recordTypes, watcher: self.watcher)
        let stream = try await self.store.streamOnLoop(StoreMethods.watch, params) { event in
            let end: Ending?
            switch event {
            case .success(.item(let item)):
                guard ending.withLock({ $0 == nil }) else { return }  // ended here already: dropped
                do {
                    let change = try ResultDecoding.decode(ChangeEvent.self, from: item)
                    end = pending.append(change) > limit ? Ending(error: FellBehind()) : nil
                } catch {
                    end = Ending(error: RPCError(.internal, "the store sent a change this service cannot read: \(error)"))
                }
            case .success(.end):
                end = Ending(error: nil)
            case .failure(let error):
                end = Ending(error: error)
            }
            guard let end else {
                wake.yield()
                return
            }
            ending.withLock { if $0 == nil { $0 = end } }
            wake.finish()
            opened.withLock { $0 }?.cancel()
        }
        opened.withLock { $0 = stream }
        defer { stream.cancel() }
        // Ends when the stream has ended (and been drained) or this task is cancelled.
        for await _ in signal {
            try await Self.drain(pending, batchSize, apply)
        }
        try Task.checkCancellation()
        try await Self.drain(pending, batchSize, apply)
        if let error = ending.withLock({ $0?.error }) { throw error }
    }

    /// Why the live stream ended.
    private struct Ending: Sendable {
        var error: (any Error)?
    }

    private static func drain(_ pending: Backlog<ChangeEvent>, _ batchSize: Int, _ apply: @Sendable ([ChangeEvent]) async throws -> Void) async throws {
        while true {
            let batch = pending.take(batchSize)
            if batch.isEmpty { return }
            try await apply(batch)
        }
    }
}
