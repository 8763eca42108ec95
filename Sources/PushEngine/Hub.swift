import Foundation
import MemoryReturn
import NIOCore
import RPCCore
import RPCServer
import ServiceMetrics
import Synchronization

/// The devices listening right now, each with a bounded buffer: fan-out never waits for
/// a listener; one that falls `limits.notifications` notifications or `limits.bytes` bytes
/// behind is cut off and resumes from its queue when it listens again, as is one whose
/// connection's listeners hold `limits.connectionBytes` together. A device holds at most
/// `limits.perDevice` listeners, a connection at most `limits.perConnection`.
///
/// A listener buffers while its backlog is sent; then it goes direct: each notification
/// is written to its connection from the connection's event loop, grouped per loop, with
/// no task woken per listener (what ten thousand listeners of one change cost most).
final class Hub: Sendable {
    struct DeviceKey: Hashable, Sendable {
        var family: String
        var deviceId: String
    }

    struct Limits: Sendable {
        /// Notifications waiting for one listener's socket (buffered, or written and not
        /// yet taken by the socket) before it is cut off.
        var notifications: Int
        /// The same in bytes of notifications: what a stalled listener may cost.
        var bytes: Int
        /// The same for all the listeners of one connection together: what a stalled
        /// connection may cost, however many devices' streams it carries (the gateway's
        /// carry dozens).
        var connectionBytes: Int
        var perDevice: Int
        var perConnection: Int
    }

    /// Bytes waiting for the listeners of one connection, together.
    final class ConnectionBudget: Sendable {
        let limit: Int
        private let pending = Atomic<Int>(0)

        init(limit: Int) { self.limit = limit }

        /// Counts `size` more bytes, unless that passes the limit while others wait (a
        /// single notification larger than the limit still goes when nothing else waits).
        func reserve(_ size: Int) -> Bool {
            var pending = self.pending.load(ordering: .relaxed)
            while pending == 0 || pending + size <= self.limit {
                let (exchanged, now) = self.pending.compareExchange(expected: pending, desired: pending + size, ordering: .relaxed)
                if exchanged { return true }
                pending = now
            }
            return false
        }

        /// Bytes counted now (tests).
        var pendingBytes: Int { self.pending.load(ordering: .relaxed) }

        func release(_ size: Int) {
            self.pending.wrappingSubtract(size, ordering: .relaxed)
        }
    }

    enum Ending: Sendable {
        case fellBehind
        /// Its connection's listeners together fell `limits.connectionBytes` behind.
        case connectionFellBehind
        case revoked
        case shutdown
    }

    final class Listener: Sendable {
        enum Offer {
            case buffered
            /// Reserved for a direct write: call ``write(_:to:)`` on the sink's loop.
            case direct(StreamSink)
            case refused
        }

        private enum Mode {
            case buffering([Outgoing])
            case direct(StreamSink)
            case ended

            var sink: StreamSink? {
                guard case .direct(let sink) = self else { return nil }
                return sink
            }
        }

        private struct State {
            var mode = Mode.buffering([])
            var ending: Ending?
            /// Notifications buffered, or direct writes handed out and not yet on their way
            /// to the peer, and their bytes.
            var pending = 0
            var pendingBytes = 0
            /// The most bytes ever pending: a listener that held much has memory to give back.
            var peakBytes = 0
            var returnedMemory = false
            /// The last number written.
            var last: Int64 = 0
            var waiter: CheckedContinuation<Void, Never>?

            /// Ended, and nothing of it left in the service's buffers: true once, for a
            /// listener that held enough to be worth giving the memory back to the system.
            mutating func drained() -> Bool {
                guard case .ended = self.mode, self.pendingBytes == 0, !self.returnedMemory, self.peakBytes >= MemoryReturn.worthwhile else { return false }
                self.returnedMemory = true
                return true
            }
        }

        private let state = Mutex(State())
        let limits: Limits
        let budget: ConnectionBudget

        /// Counts each notification written (``PushMetrics``).
        let delivered: Counter

        init(limits: Limits, budget: ConnectionBudget, delivered: Counter) {
            self.limits = limits
            self.budget = budget
            self.delivered = delivered
        }

        /// What a notification costs while it waits: its JSON and the reply around it.
        static func size(_ notification: Outgoing) -> Int { notification.json.bytes.count + 64 }

        /// Takes one notification: buffered until the listener goes direct, then reserved
        /// for a direct write. A listener that would fall `limits.notifications` or
        /// `limits.bytes` behind is cut off (a single notification larger than the byte
        /// bound still goes when nothing else waits), as is one whose connection's budget
        /// it would pass.
        func offer(_ notification: Outgoing) -> Offer {
            let size = Self.size(notification)
            let (offer, cut): (Offer, Ending?) = self.state.withLock { state in
                if case .ended = state.mode { return (.refused, nil) }
                guard state.pending < self.limits.notifications, state.pending == 0 || state.pendingBytes + size <= self.limits.bytes else {
                    return (.refused, .fellBehind)
                }
                guard self.budget.reserve(size) else { return (.refused, .connectionFellBehind) }
                state.pending += 1
                state.pendingBytes += size
                state.peakBytes = max(state.peakBytes, state.pendingBytes)
                guard case .buffering(var items) = state.mode else { return (state.mode.sink.map(Offer.direct) ?? .refused, nil) }
                state.mode = .ended  // (so the append below does not copy the buffer)
                items.append(notification)
                state.mode = .buffering(items)
                return (.buffered, nil)
            }
            if let cut { self.end(cut) }
            return offer
        }

        /// A pending notification is gone (written to the socket, skipped, or its
        /// connection closed).
        func taken(_ size: Int) {
            let drained = self.state.withLock { state in
                state.pending -= 1
                state.pendingBytes -= size
                return state.drained()
            }
            self.budget.release(size)
            if drained { MemoryReturn.request() }
        }

        /// Whether a notification ``offer(_:)`` reserved is to be written now (on the sink's
        /// event loop): not once the listener has ended, nor one written already or expired.
        /// Takes it as the last written.
        func accepts(_ notification: Outgoing, now: Date) -> Bool {
            self.state.withLock { state in
                guard case .direct = state.mode, notification.seq > state.last, notification.expiresAt > now else { return false }
                state.last = notification.seq
                return true
            }
        }

        /// After the backlog (up to `last`): sends what was buffered after it, in order, and
        /// from then on takes notifications for direct writes. Runs on the sink's loop, so
        /// these writes go before any direct one (which are queued on that loop).
        func goDirect(_ sink: StreamSink, after last: Int64) async {
            let loop = sink.eventLoop
            guard loop.inEventLoop else {
                try? await loop.submit { self.goDirectOnLoop(sink, after: last) }.get()
                return
            }
            self.goDirectOnLoop(sink, after: last)
        }

        private func goDirectOnLoop(_ sink: StreamSink, after last: Int64) {
            // The write skips what the backlog had (up to `last`) and what expired meanwhile.
            // Buffered items stay counted as pending until written.
            let buffered: [Outgoing] = self.state.withLock { state in
                guard case .buffering(let items) = state.mode else { return [] }
                state.mode = .direct(sink)
                state.last = last
                return items
            }
            let written = Hub.write(buffered.map { (self, $0, sink) }, now: Date())
            self.delivered.increment(by: written)
        }

        /// Waits until the listener ends (cut off, revoked, shutdown) or the task is
        /// cancelled; returns why (nil: cancelled) and the last number written.
        func waitForEnd() async -> (ending: Ending?, last: Int64) {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ended = self.state.withLock { state in
                        if case .ended = state.mode { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ended { continuation.resume() }
                }
            } onCancel: {
                self.end(nil)
            }
            return self.state.withLock { ($0.ending, $0.last) }
        }

        /// Ends the listener (`why` nil: its request was cancelled); what it had not
        /// written stays in the device's queue.
        func end(_ why: Ending?) {
            let (waiter, drained, dropped) = self.state.withLock { state in
                if state.ending == nil { state.ending = why }
                var dropped = 0
                if case .buffering(let items) = state.mode {
                    // Dropped with the buffer (direct writes are given back as they complete).
                    dropped = items.reduce(0) { $0 + Self.size($1) }
                    state.pending -= items.count
                    state.pendingBytes -= dropped
                }
                state.mode = .ended
                defer { state.waiter = nil }
                return (state.waiter, state.drained(), dropped)
            }
            self.budget.release(dropped)
            waiter?.resume()
            if drained { MemoryReturn.request() }
        }
    }

    let limits: Limits
    private let state = Mutex(State())

    private struct State {
        var byDevice: [DeviceKey: [Int: Listener]] = [:]
        /// Listeners per connection (by the runtime's connection id).
        var byConnection: [UInt64: Int] = [:]
        /// Each connection's budget, for as long as a listener holds it: an ended listener's
        /// writes may still wait in the connection, and one that listens again on it gets
        /// the same budget, not a fresh one.
        var budgets: [UInt64: WeakBudget] = [:]
        var next = 0
        var closed = false
        /// Delivered batches not yet committed, by batch: a listener that starts meanwhile
        /// finds them in neither the queue nor its live stream. Kept as delivered (one
        /// batch may hold ten thousand devices); a registration looks through them.
        var inFlight: [Int: [(key: DeviceKey, outgoing: Outgoing)]] = [:]
        var nextBatch = 0

        mutating func budget(of connection: UInt64, limit: Int) -> ConnectionBudget {
            if let budget = self.budgets[connection]?.budget { return budget }
            if self.budgets.count > 2 * self.byConnection.count + 64 {
                self.budgets = self.budgets.filter { $0.value.budget != nil }
            }
            let budget = ConnectionBudget(limit: limit)
            self.budgets[connection] = WeakBudget(budget: budget)
            return budget
        }
    }

    struct WeakBudget {
        weak var budget: ConnectionBudget?
    }

    /// Counts each notification written to a listener (``PushMetrics``).
    let delivered: Counter

    init(limits: Limits, delivered: Counter = PushMetrics.none.delivered) {
        self.limits = limits
        self.delivered = delivered
    }

    /// Registers a listener before its backlog is read, so nothing queued meanwhile is
    /// missed; `inFlight` is what was delivered and is not committed yet, in order (send
    /// it after the backlog, skipping what the backlog had). Refused with `limit_exceeded`
    /// when the device or the connection holds its most listeners already.
    func register(_ key: DeviceKey, connection: UInt64) throws(RPCError) -> (listener: Listener, inFlight: [Outgoing], unregister: @Sendable () -> Void) {
        let limits = self.limits
        let registered: Result<(id: Int?, listener: Listener, inFlight: [Outgoing]), RPCError> = self.state.withLock { state in
            guard !state.closed else { return .success((nil, Listener(limits: limits, budget: ConnectionBudget(limit: limits.connectionBytes), delivered: self.delivered), [])) }
            if state.byDevice[key, default: [:]].count >= limits.perDevice {
                return .failure(RPCError(.limitExceeded, "this device has \(limits.perDevice) push.listen streams open already, the most allowed (--max-listeners-per-device); end one (rpc.cancel, or close its connection) first",
                                         data: ["limit": .int(Int64(limits.perDevice))]))
            }
            if state.byConnection[connection, default: 0] >= limits.perConnection {
                return .failure(RPCError(.limitExceeded, "this connection carries \(limits.perConnection) push.listen streams already, the most allowed (--max-listeners-per-connection); end one or use another connection",
                                         data: ["limit": .int(Int64(limits.perConnection))]))
            }
            // Only for a listener that is taken: a refused one leaves no budget behind.
            let listener = Listener(limits: limits, budget: state.budget(of: connection, limit: limits.connectionBytes), delivered: self.delivered)
            state.next += 1
            state.byDevice[key, default: [:]][state.next] = listener
            state.byConnection[connection, default: 0] += 1
            return .success((state.next, listener, state.inFlight.values.flatMap { batch in batch.lazy.filter { $0.key == key }.map(\.outgoing) }))
        }
        let (id, listener, inFlight) = try registered.get()
        if id == nil { listener.end(.shutdown) }
        let unregister: @Sendable () -> Void = { [weak self] in
            guard let id else { return }
            self?.state.withLock { state in
                state.byDevice[key]?.removeValue(forKey: id)
                if state.byDevice[key]?.isEmpty == true { state.byDevice.removeValue(forKey: key) }
                state.byConnection[connection, default: 1] -= 1
                if state.byConnection[connection] == 0 { state.byConnection.removeValue(forKey: connection) }
            }
            // A listener that ends by its request's end (not cut off) ends here.
            listener.end(nil)
        }
        return (listener, inFlight.sorted { $0.seq < $1.seq }, unregister)
    }

    /// A number for a batch of notifications, to deliver and later settle.
    func newBatch() -> Int {
        self.state.withLock { state in
            state.nextBatch += 1
            return state.nextBatch
        }
    }

    /// Hands a batch of numbered notifications to their devices' listeners, without
    /// waiting, and keeps it as in flight until ``settle(_:)``.
    func deliver(_ notifications: [(key: DeviceKey, outgoing: Outgoing)], batch: Int) {
        let targets: [(Listener, Outgoing)] = self.state.withLock { state in
            state.inFlight[batch] = notifications
            var targets: [(Listener, Outgoing)] = []
            for (key, outgoing) in notifications {
                guard let listeners = state.byDevice[key] else { continue }
                for listener in listeners.values { targets.append((listener, outgoing)) }
            }
            return targets
        }
        // In order: a listener cut off for falling behind gets nothing more, and resumes
        // from its queue. Direct writes go out in one job per event loop, grouped by
        // connection (in the order each connection first appears, and each listener's in
        // order): a connection is flushed once its notifications are written, so those of
        // listeners sharing one (as the gateway's do) go in one system call, and the
        // first connection's are on their way while the next one's are written.
        var groups: [[(Listener, Outgoing, StreamSink)]] = []
        var groupOf: [ObjectIdentifier: Int] = [:]
        var last: (connection: ObjectIdentifier, group: Int)?
        for (listener, outgoing) in targets {
            guard case .direct(let sink) = listener.offer(outgoing) else { continue }
            let connection = sink.connection
            // Consecutive notifications mostly go to one connection: no lookup for those.
            let group = last?.connection == connection ? last!.group : groupOf[connection] ?? {
                groupOf[connection] = groups.count
                groups.append([])
                return groups.count - 1
            }()
            last = (connection, group)
            groups[group].append((listener, outgoing, sink))
        }
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, groups: [Int])] = [:]
        for (index, group) in groups.enumerated() {
            let loop = group[0].2.eventLoop
            byLoop[ObjectIdentifier(loop), default: (loop, [])].groups.append(index)
        }
        let (delivered, writes) = (self.delivered, groups)
        for (loop, indices) in byLoop.values {
            loop.execute {
                let now = Date()
                delivered.increment(by: indices.reduce(0) { $0 + Hub.write(writes[$1], now: now) })
            }
        }
    }

    /// Writes notifications ``Listener/offer(_:)`` reserved to one connection and flushes
    /// them, on its event loop; skips (and gives back) what a listener no longer takes.
    /// Each listener's accounting, and so its memory's return, ends as its writes go to
    /// the socket (the connection may outlive the listener): writes complete in order, so
    /// one callback after the last serves them all. Returns how many were written.
    private static func write(_ group: [(Listener, Outgoing, StreamSink)], now: Date) -> Int {
        guard let sink = group.first?.2 else { return 0 }
        var written: [(listener: Listener, size: Int)] = []
        written.reserveCapacity(group.count)
        for (listener, outgoing, sink) in group {
            let size = Listener.size(outgoing)
            guard listener.accepts(outgoing, now: now), sink.write(encoded: outgoing.json) else {
                listener.taken(size)
                continue
            }
            written.append((listener, size))
        }
        sink.whenWritten { [written] in for (listener, size) in written { listener.taken(size) } }
        sink.flush()
        return written.count
    }

    /// The batch is committed (or failed): listeners starting now read it from the queue.
    func settle(_ batch: Int) {
        _ = self.state.withLock { $0.inFlight.removeValue(forKey: batch) }
    }

    /// Ends the listeners of devices `revoked` says are revoked.
    func cut(family: String, where revoked: (String) -> Bool) {
        let targets = self.state.withLock { state in
            state.byDevice.filter { $0.key.family == family && revoked($0.key.deviceId) }.flatMap { $0.value.values }
        }
        for listener in targets { listener.end(.revoked) }
    }

    /// Ends every listener (shutdown); later ones end at once.
    func closeAll() {
        let all = self.state.withLock { state in
            state.closed = true
            return state.byDevice.values.flatMap { $0.values }
        }
        for listener in all { listener.end(.shutdown) }
    }

    /// Listeners open now.
    var listenerCount: Int { self.state.withLock { $0.byDevice.values.reduce(0) { $0 + $1.count } } }

    func isListening(_ key: DeviceKey) -> Bool { self.state.withLock { $0.byDevice[key] != nil } }

    /// A family's devices with a listener now, sorted.
    func listeningDevices(family: String) -> [String] {
        self.state.withLock { $0.byDevice.keys.filter { $0.family == family }.map(\.deviceId) }.sorted()
    }

    /// The families with someone listening now.
    var listeningFamilies: Set<String> { self.state.withLock { Set($0.byDevice.keys.map(\.family)) } }
}
