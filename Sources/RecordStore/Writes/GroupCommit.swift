import DurableSQLite
import GRDB
import Logging
import ServiceMetrics
import RPCCore
import Synchronization

/// Batches concurrent writes into shared transactions (group commit).
///
/// The batch commits once, with one fsync (`synchronous=FULL`), and only then does any
/// caller get its result. While a batch commits, new writes queue up for the next one, so
/// the number of fsyncs per second stays flat as writers are added and saves per second
/// grow with them.
///
/// A write that throws must leave nothing behind, and must not take the others down with
/// it. A savepoint per write would do that, but costs a copy of every page the write
/// touches; so a batch first runs without savepoints, and only when one of its writes
/// throws is that attempt rolled back and the batch run again with a savepoint per write.
/// Writes are functions of the database alone, so running one twice is safe.
final class GroupCommit: Sendable {
    private let pool: DatabasePool
    private let notifier: ChangeNotifier
    private let metrics: StoreMetrics
    private let logger: Logger
    private let state = Mutex(State())
    private let counters = Mutex((writes: Int64(0), commits: Int64(0)))
    /// Writes per transaction at most, to bound how long one batch holds the writer.
    private let maximumBatch = 512

    private struct State {
        var pending: [Job] = []
        var draining = false
    }

    /// A write: applies itself inside the batch transaction (in a savepoint of its own, or
    /// not) and returns what to do once the transaction committed (resume its caller with the
    /// result), or nil when it threw outside a savepoint. `fail`: the commit failed.
    struct Job: Sendable {
        var apply: @Sendable (Database, _ isolated: Bool) -> Outcome?
        var fail: @Sendable (any Error) -> Void
    }

    struct Outcome: Sendable {
        var committed: @Sendable () -> Void
    }

    init(pool: DatabasePool, notifier: ChangeNotifier, metrics: StoreMetrics, logger: Logger) {
        self.pool = pool
        self.notifier = notifier
        self.metrics = metrics
        self.logger = logger
    }

    /// Runs `body` in the next batch; returns once its batch is durable.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = Job(
                apply: { db, isolated in
                    do {
                        let result: T
                        if isolated {
                            var value: T?
                            try db.inSavepoint {
                                value = try body(db)
                                return .commit
                            }
                            result = value!
                        } else {
                            result = try body(db)
                        }
                        return Outcome(committed: { continuation.resume(returning: result) })
                    } catch {
                        if !isolated { return nil }
                        return Outcome(committed: { continuation.resume(throwing: error) })
                    }
                },
                fail: { continuation.resume(throwing: $0) }
            )
            let start = self.state.withLock { state -> Bool in
                state.pending.append(job)
                if state.draining { return false }
                state.draining = true
                return true
            }
            // The batch runs on a database thread, synchronously: GRDB's asynchronous write
            // hopped from a Swift task to the writer's dispatch queue and back, two more
            // thread wake-ups per batch than this (the hand-off here, the reply's hop back
            // to the caller's loop).
            if start { DatabaseThreads.execute { self.drain() } }
        }
    }

    /// Writes and commits since start.
    var totals: (writes: Int64, commits: Int64) { self.counters.withLock { $0 } }

    private func drain() {
        while true {
            let batch = self.state.withLock { state -> [Job] in
                let batch = Array(state.pending.prefix(self.maximumBatch))
                state.pending.removeFirst(batch.count)
                if batch.isEmpty { state.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            self.commit(batch)
        }
    }

    private func commit(_ batch: [Job]) {
        let queued = ContinuousClock.now
        do {
            let (outcomes, head, applied, started) = try self.pool.writeWithoutTransaction { db -> ([Outcome], Int64, ContinuousClock.Instant, ContinuousClock.Instant) in
                let started = ContinuousClock.now
                var outcomes: [Outcome] = []
                var head: Int64 = 0
                var applied = started
                for isolated in [false, true] {
                    // BEGIN and COMMIT from the statement cache: GRDB's inTransaction
                    // compiles both for every batch, which for a lone save was a tenth of
                    // the writer's time.
                    try db.execute(cached: "BEGIN IMMEDIATE")
                    do {
                        outcomes = []
                        outcomes.reserveCapacity(batch.count)
                        for job in batch {
                            guard let outcome = job.apply(db, isolated) else { break }
                            outcomes.append(outcome)
                        }
                        if outcomes.count == batch.count {
                            head = try StoreDatabase.head(db)
                            applied = .now
                            try db.execute(cached: "COMMIT")
                            break
                        }
                        try db.execute(cached: "ROLLBACK")
                    } catch {
                        // A failed COMMIT (disk full, I/O error) may leave the transaction
                        // open: nothing of the batch stays.
                        if db.isInsideTransaction { try? db.execute(cached: "ROLLBACK") }
                        throw error
                    }
                }
                return (outcomes, head, applied, started)
            }
            let committed = ContinuousClock.now
            self.counters.withLock {
                $0.writes += Int64(batch.count)
                $0.commits += 1
            }
            self.notifier.advance(to: head)
            for outcome in outcomes { outcome.committed() }
            self.metrics.commits.increment()
            self.metrics.writesPerCommit.record(batch.count)
            self.metrics.commitDuration.record(committed - applied)
            self.logger.trace("write batch committed", metadata: [
                "writes": "\(batch.count)",
                "wait_us": "\((started - queued).microseconds)",
                "apply_us": "\((applied - started).microseconds)",
                "commit_us": "\((committed - applied).microseconds)",
            ])
        } catch {
            // The commit itself failed (disk full, I/O error): nothing of the batch is applied.
            self.logger.error("write batch failed", metadata: ["error": "\(error)", "writes": "\(batch.count)"])
            for job in batch { job.fail(StoreErrors.storage(error)) }
        }
    }
}

/// Wakes `store.watch` streams when new changes commit.
final class ChangeNotifier: Sendable {
    private let state: Mutex<(head: Int64, subscribers: [Int: AsyncStream<Int64>.Continuation], next: Int)>
    /// The newest change that may be a credential's: noted inside its transaction, so before
    /// the commit moves ``head`` past it (a write rolled back leaves it too high, which only
    /// costs a watcher one read).
    private let credentials: Mutex<Int64>

    init(head: Int64) {
        self.state = Mutex((head, [:], 0))
        // What came before this process: any of it may be.
        self.credentials = Mutex(head)
    }

    var head: Int64 { self.state.withLock { $0.head } }

    /// Read after ``head``: when it is not past a watcher's position, no change up to that
    /// head is a credential's.
    var credentialHead: Int64 { self.credentials.withLock { $0 } }

    func noteCredentialChange(at seq: Int64) {
        self.credentials.withLock { $0 = max($0, seq) }
    }

    func advance(to head: Int64) {
        let subscribers = self.state.withLock { state -> [AsyncStream<Int64>.Continuation] in
            guard head > state.head else { return [] }
            state.head = head
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(head) }
    }

    /// A stream of new heads; subscribe before reading, so no commit goes unnoticed.
    func subscribe() -> (stream: AsyncStream<Int64>, cancel: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream<Int64>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = self.state.withLock { state -> Int in
            state.next += 1
            state.subscribers[state.next] = continuation
            return state.next
        }
        let cancel: @Sendable () -> Void = { [weak self] in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
            continuation.finish()
        }
        return (stream, cancel)
    }
}

