import Foundation
import GRDB
import Logging
import RPCCore
import StoreAPI
import Synchronization

/// A `store.modify` batch waiting in the offline queue.
public struct QueuedBatch: Sendable, Hashable {
    /// Its place in the queue: batches are sent in this order.
    public var seq: Int64
    /// Sent with every attempt, so the store applies the batch once however often it is
    /// sent (docs/protocol.md, "Batches").
    public var requestId: String
    public var params: ModifyParams
    /// What the app called it (`usage`, `command-status`), for its own bookkeeping.
    public var label: String?
    public var createdAt: Date
    public var attempts: Int
    /// Why the last attempt failed; for a `failed` batch, why it was set aside.
    public var lastError: RPCError?
    /// True when the store refused it for good (not a connection problem): kept, reported,
    /// never sent again unless ``SyncQueue/retry(requestId:)`` says so.
    public var failed: Bool
}

/// What the queue did with a batch.
public enum QueueEvent: Sendable {
    /// It is being sent now (each attempt); an `applied`, `failed` or `willRetry` follows.
    case sending(QueuedBatch)
    /// The store applied it (`result.replayed` is true when an earlier attempt had already
    /// applied it and this one only fetched the stored result).
    case applied(QueuedBatch, ModifyResult)
    /// The store refused it for good: it stays in the queue as failed.
    case failed(QueuedBatch, RPCError)
    /// It could not be sent now; the queue tries again after `after`.
    case willRetry(QueuedBatch, RPCError, after: Duration)
    /// The server removed this device from the family (`device_revoked`): the batch stays
    /// queued, and nothing is sent.
    case held(QueuedBatch, RPCError)
}

/// The offline queue: writes are persisted first (SQLite on the
/// device), then sent in order, each batch with the same request id every time, so a replay
/// after a lost reply, a reconnect or a crash never applies twice. A batch that cannot be
/// sent (the server unreachable, a timeout, a device not confirmed yet) is retried with
/// backoff when the connection returns; one the store refuses (invalid, forbidden, a
/// conflict) is set aside as failed and reported, never dropped. A device removed from
/// its family (`device_revoked`) keeps its queue, unsent (``QueueEvent/held(_:_:)``); its
/// batches name the old pairing's zone, so once paired again the store refuses them and
/// they are set aside as failed.
public final class SyncQueue: Sendable {
    private let store: LocalStore
    private let session: Session
    private let backoff: Backoff
    private let logger: Logger
    /// The device's wall clock.
    private let clock: @Sendable () -> Date
    private let listeners = Mutex<[Int: AsyncStream<QueueEvent>.Continuation]>([:])
    private let nextListener = Atomic<Int>(0)
    private let wake = Mutex<[CheckedContinuation<Void, Never>]>([])
    private let worker = Mutex<Task<Void, Never>?>(nil)
    private let drained = Mutex<[CheckedContinuation<Void, Never>]>([])
    /// For batches queued by this process: the device's clock then, and the system's
    /// uptime (a clock nobody can set). See ``deviceClock(for:)``.
    private let queuedAt = Mutex<[String: (clock: Date, uptime: TimeInterval)]>([:])

    init(store: LocalStore, session: Session, backoff: Backoff, clock: @escaping @Sendable () -> Date = { Date() }, logger: Logger) {
        self.store = store
        self.session = session
        self.backoff = backoff
        self.clock = clock
        self.logger = logger
    }

    // MARK: Writing

    /// Queues batches in one local transaction (all or none), each with its own request id
    /// (kept if the batch has one); returns the request ids. Batches are atomic unless they
    /// say otherwise, so one refused item fails the batch visibly rather than half-applying.
    @discardableResult
    public func enqueue(_ batches: [ModifyParams], label: String? = nil) throws(RPCError) -> [String] {
        var ids: [String] = []
        do {
            try self.store.database.write { db in
                for var batch in batches {
                    let id = batch.requestId ?? "kit-\(UUID().uuidString.lowercased())"
                    batch.requestId = id
                    if batch.atomic == nil { batch.atomic = true }
                    let params = String(decoding: try RPCJSON.makeEncoder().encode(batch), as: UTF8.self)
                    try OutboxRow(requestId: id, family: batch.family, zone: batch.zone, params: params, label: label, createdAt: Date().timeIntervalSince1970)
                        .insert(db)
                    ids.append(id)
                    let stamp = (self.clock(), ProcessInfo.processInfo.systemUptime)
                    self.queuedAt.withLock { $0[id] = stamp }
                }
            }
        } catch {
            throw RPCError(.internal, "the offline queue could not store the write: \(error)")
        }
        self.signal()
        return ids
    }

    @discardableResult
    public func enqueue(_ batch: ModifyParams, label: String? = nil) throws(RPCError) -> String {
        try self.enqueue([batch], label: label)[0]
    }

    // MARK: Reading

    /// Batches waiting to be sent, in order.
    public func pending() throws(RPCError) -> [QueuedBatch] { try self.batches(status: "queued") }

    /// Batches the store refused, in order.
    public func failures() throws(RPCError) -> [QueuedBatch] { try self.batches(status: "failed") }

    /// Puts a failed batch back in the queue, in its place (after fixing what made it fail,
    /// e.g. a parent's confirmation).
    public func retry(requestId: String) throws(RPCError) {
        do {
            try self.store.database.write { db in
                _ = try OutboxRow.batch(requestId).updateAll(db, OutboxRow.Columns.status.set(to: "queued"), OutboxRow.Columns.attempts.set(to: 0))
            }
        } catch { throw RPCError(.internal, "the offline queue could not be updated: \(error)") }
        self.signal()
    }

    /// Removes a batch the app has decided to give up (the only way one leaves unapplied).
    public func discard(requestId: String) throws(RPCError) {
        do {
            try self.store.database.write { db in _ = try OutboxRow.batch(requestId).deleteAll(db) }
        } catch { throw RPCError(.internal, "the offline queue could not be updated: \(error)") }
    }

    /// What happens to each batch from now on.
    public func events() -> AsyncStream<QueueEvent> {
        let (stream, continuation) = AsyncStream<QueueEvent>.makeStream()
        let id = self.nextListener.add(1, ordering: .relaxed).newValue
        self.listeners.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.listeners.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    /// Returns once nothing is waiting to be sent (failed batches do not count), or when
    /// the task is cancelled.
    public func waitUntilDrained() async {
        while !Task.isCancelled {
            let empty = ((try? self.pending()) ?? []).isEmpty
            if empty { return }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    self.drained.withLock { $0.append(continuation) }
                    // Re-check after registering: the queue may have drained (or the wait
                    // been cancelled) in between.
                    if Task.isCancelled || ((try? self.pending()) ?? []).isEmpty { self.resumeDrained() }
                }
            } onCancel: {
                self.resumeDrained()
            }
        }
    }

    // MARK: Replay

    /// Starts sending in the background (the kit does this when it opens, unless told not
    /// to; then this starts it, e.g. once the app listens to ``events()``). Idempotent.
    public func start() {
        self.worker.withLock { worker in
            guard worker == nil else { return }
            worker = Task { [weak self] in
                guard let self else { return }
                await self.run()
            }
        }
    }

    /// Stops sending (what is queued stays on disk) and ends every ``events()`` stream once
    /// the events published so far are delivered.
    public func stop() async {
        let task = self.worker.withLock { worker in
            defer { worker = nil }
            return worker
        }
        task?.cancel()
        self.signal()
        await task?.value
        // Finished outside the lock: a finished stream's onTermination takes it again.
        let listeners = self.listeners.withLock { listeners in
            defer { listeners = [:] }
            return Array(listeners.values)
        }
        for continuation in listeners { continuation.finish() }
    }

    private func run() async {
        var attempt = 0
        while !Task.isCancelled {
            guard let next = try? self.batches(status: "queued", limit: 1).first else {
                self.resumeDrained()
                await self.waitForSignal()
                continue
            }
            let state = self.session.transport.state
            if state != .connected && state != .revoked && attempt > 0 {
                // Offline: wait for the connection (or a new write) before trying again.
                // (A revoked transport answers at once, without the network: the batch is
                // marked held below.)
                await self.waitForConnectionOrSignal()
            }
            if Task.isCancelled { return }
            self.publish(.sending(next))
            do {
                // Stamped with this device's clock (see deviceClock(for:)): the server
                // measures how far off it is and places the usage by its own time.
                var params = next.params
                params.deviceClock = self.deviceClock(for: next.requestId)
                let result = try await self.session.call(StoreMethods.modify, params)
                try self.remove(next.requestId)
                attempt = 0
                self.publish(.applied(next, result))
            } catch let error as RPCError {
                if error.code == .deviceRevoked {
                    // Kept, not sent: the transport is `revoked` and connects again only
                    // with a new credential, which the wait below waits for.
                    try? self.recordAttempt(next.requestId, error, failed: false)
                    self.publish(.held(next, error))
                    attempt = max(attempt, 1)
                    await self.waitForConnectionOrSignal()
                } else if Self.isTransient(error) {
                    attempt += 1
                    // Waiting for a parent's confirmation is a matter of seconds: retried
                    // often enough to send soon after it, and to hear a rejection.
                    let delay = error.code == .pairingUnconfirmed
                        ? min(self.backoff.delay(attempt: attempt), Self.unconfirmedRetry) : self.backoff.delay(attempt: attempt)
                    try? self.recordAttempt(next.requestId, error, failed: false)
                    self.publish(.willRetry(next, error, after: delay))
                    self.logger.debug("queued batch not sent", metadata: ["request_id": "\(next.requestId)", "code": "\(error.code)"])
                    try? await Task.sleep(for: delay)
                } else {
                    // Refused for some of its items only (a session that would end in the
                    // future, say): those are set aside, the others go on as a new batch.
                    let refused = (try? self.splitOffRefused(next, error)) ?? nil
                    try? self.recordAttempt(next.requestId, error, failed: true)
                    var failed = next
                    failed.failed = true
                    failed.lastError = error
                    if let refused { failed.params = refused }
                    self.logger.warning("queued batch refused", metadata: ["request_id": "\(next.requestId)", "code": "\(error.code)", "error": "\(error.message)"])
                    self.publish(.failed(failed, error))
                }
            } catch {
                try? await Task.sleep(for: self.backoff.delay(attempt: attempt))
            }
        }
    }

    /// For an atomic batch the store refused because of some of its items (`data.failures`):
    /// keeps only those in the batch (to be reported as failed) and queues the others as a
    /// new batch after it. Returns the refused part; nil when every item failed, or the
    /// error names none.
    private func splitOffRefused(_ batch: QueuedBatch, _ error: RPCError) throws -> ModifyParams? {
        guard case .array(let items)? = error.data?["failures"] else { return nil }
        let failures = try items.map { try JSONValueDecoding.decode(ItemFailure.self, from: $0) }
        let saves = batch.params.saves ?? [], deletes = batch.params.deletes ?? []
        let failedSaves = Set(failures.filter { $0.kind == "save" }.map(\.index))
        let failedDeletes = Set(failures.filter { $0.kind == "delete" }.map(\.index))
        guard !failures.isEmpty, failedSaves.count + failedDeletes.count < saves.count + deletes.count else { return nil }
        var refused = batch.params, rest = batch.params
        refused.saves = saves.enumerated().filter { failedSaves.contains($0.offset) }.map(\.element)
        refused.deletes = deletes.enumerated().filter { failedDeletes.contains($0.offset) }.map(\.element)
        rest.saves = saves.enumerated().filter { !failedSaves.contains($0.offset) }.map(\.element)
        rest.deletes = deletes.enumerated().filter { !failedDeletes.contains($0.offset) }.map(\.element)
        let id = "kit-\(UUID().uuidString.lowercased())"
        rest.requestId = id
        self.queuedAt.withLock { $0[id] = $0[batch.requestId] }
        let encoder = RPCJSON.makeEncoder()
        try self.store.database.write { db in
            try OutboxRow.batch(batch.requestId).updateAll(db, OutboxRow.Columns.params.set(to: String(decoding: try encoder.encode(refused), as: UTF8.self)))
            try OutboxRow(requestId: id, family: rest.family, zone: rest.zone, params: String(decoding: try encoder.encode(rest), as: UTF8.self),
                          label: batch.label, createdAt: batch.createdAt.timeIntervalSince1970).insert(db)
        }
        self.logger.info("queued batch partly refused; the rest goes on", metadata: [
            "request_id": "\(batch.requestId)", "refused": "\(failures.count)", "rest_request_id": "\(id)",
        ])
        return refused
    }

    /// The device's clock as it was when the batch was queued, carried forward by the
    /// system's uptime: a clock set ahead (or back) after the usage was recorded does not
    /// move that usage. For a batch queued by an earlier run of the app (its uptime is of
    /// no use across a restart or a reboot), the clock now.
    private func deviceClock(for requestId: String) -> Date {
        guard let queued = self.queuedAt.withLock({ $0[requestId] }) else { return self.clock() }
        let elapsed = ProcessInfo.processInfo.systemUptime - queued.uptime
        return elapsed >= 0 ? queued.clock.addingTimeInterval(elapsed) : self.clock()
    }

    /// The longest wait between attempts while the device is not confirmed yet.
    static let unconfirmedRetry: Duration = .seconds(2)

    /// Errors that say "not now" rather than "never".
    static func isTransient(_ error: RPCError) -> Bool {
        [.unavailable, .timeout, .cancelled, .rateLimited, .limitExceeded, .internal, .pairingUnconfirmed].contains(error.code)
    }

    private func publish(_ event: QueueEvent) {
        let targets = self.listeners.withLock { Array($0.values) }
        for target in targets { target.yield(event) }
    }

    private func signal() {
        let waiters = self.wake.withLock { waiters in
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func waitForSignal() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                self.wake.withLock { $0.append(continuation) }
                if Task.isCancelled { self.signal() }
            }
        } onCancel: {
            self.signal()
        }
    }

    private func waitForConnectionOrSignal() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.session.transport.waitUntilConnected() }
            group.addTask { await self.waitForSignal() }
            await group.next()
            group.cancelAll()
            self.signal()
        }
    }

    private func resumeDrained() {
        let waiters = self.drained.withLock { waiters in
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Rows

    private func batches(status: String, limit: Int? = nil) throws(RPCError) -> [QueuedBatch] {
        do {
            return try self.store.database.read { db in
                var rows = OutboxRow.filter(OutboxRow.Columns.status == status).order(OutboxRow.Columns.seq)
                if let limit { rows = rows.limit(limit) }
                return try rows.fetchAll(db).map { row in
                    let params = try RPCJSON.makeDecoder().decode(ModifyParams.self, from: Data(row.params.utf8))
                    return QueuedBatch(
                        seq: row.seq ?? 0, requestId: row.requestId, params: params, label: row.label,
                        createdAt: Date(timeIntervalSince1970: row.createdAt), attempts: row.attempts,
                        lastError: row.lastErrorCode.map { RPCError(ErrorCode($0), row.lastErrorMessage ?? "") }, failed: status == "failed")
                }
            }
        } catch {
            throw RPCError(.internal, "the offline queue could not be read: \(error)")
        }
    }

    private func remove(_ requestId: String) throws {
        try self.store.database.write { db in _ = try OutboxRow.batch(requestId).deleteAll(db) }
        _ = self.queuedAt.withLock { $0.removeValue(forKey: requestId) }
    }

    private func recordAttempt(_ requestId: String, _ error: RPCError, failed: Bool) throws {
        try self.store.database.write { db in
            let row = OutboxRow.Columns.self
            try OutboxRow.batch(requestId).updateAll(
                db, row.attempts += 1, row.lastAttemptAt.set(to: Date().timeIntervalSince1970), row.lastErrorCode.set(to: error.code.rawValue),
                row.lastErrorMessage.set(to: error.message), row.status.set(to: failed ? "failed" : "queued"))
        }
    }
}
