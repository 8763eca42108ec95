import Synchronization

/// The devices listening right now, each with a bounded buffer: fan-out never waits for
/// a listener; one that falls `capacity` notifications behind is cut off and resumes from
/// its queue when it listens again.
final class Hub: Sendable {
    struct DeviceKey: Hashable, Sendable {
        var family: String
        var deviceId: String
    }

    enum Ending: Sendable {
        case fellBehind
        case revoked
        case shutdown
    }

    final class Listener: Sendable {
        let continuation: AsyncStream<Outgoing>.Continuation
        let ending = Mutex<Ending?>(nil)
        init(_ continuation: AsyncStream<Outgoing>.Continuation) { self.continuation = continuation }

        /// Hands one notification to the listener; false when its buffer was full and it
        /// was cut off.
        func offer(_ notification: Outgoing) -> Bool {
            if case .dropped = self.continuation.yield(notification) {
                self.end(.fellBehind)
                return false
            }
            return true
        }

        func end(_ why: Ending) {
            self.ending.withLock { if $0 == nil { $0 = why } }
            self.continuation.finish()
        }
    }

    let capacity: Int
    private let state = Mutex(State())

    private struct State {
        var byDevice: [DeviceKey: [Int: Listener]] = [:]
        var next = 0
        var closed = false
        /// Delivered batches not yet committed, by batch: a listener that starts meanwhile
        /// finds them in neither the queue nor its live stream. Kept as delivered (one
        /// batch may hold ten thousand devices); a registration looks through them.
        var inFlight: [Int: [(key: DeviceKey, outgoing: Outgoing)]] = [:]
        var nextBatch = 0
    }

    init(capacity: Int) { self.capacity = capacity }

    /// Registers a listener before its backlog is read, so nothing queued meanwhile is
    /// missed; `inFlight` is what was delivered and is not committed yet, in order (send
    /// it after the backlog, skipping what the backlog had).
    func register(_ key: DeviceKey) -> (stream: AsyncStream<Outgoing>, listener: Listener, inFlight: [Outgoing], unregister: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream<Outgoing>.makeStream(bufferingPolicy: .bufferingOldest(self.capacity))
        let listener = Listener(continuation)
        let (id, inFlight): (Int?, [Outgoing]) = self.state.withLock { state in
            guard !state.closed else { return (nil, []) }
            state.next += 1
            state.byDevice[key, default: [:]][state.next] = listener
            return (state.next, state.inFlight.values.flatMap { batch in batch.lazy.filter { $0.key == key }.map(\.outgoing) })
        }
        if id == nil { listener.end(.shutdown) }
        let unregister: @Sendable () -> Void = { [weak self] in
            guard let id else { return }
            self?.state.withLock { state in
                state.byDevice[key]?.removeValue(forKey: id)
                if state.byDevice[key]?.isEmpty == true { state.byDevice.removeValue(forKey: key) }
            }
        }
        return (stream, listener, inFlight.sorted { $0.seq < $1.seq }, unregister)
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
        // In order: a listener cut off for falling behind gets nothing more (its stream
        // has ended), and resumes from its queue.
        for (listener, outgoing) in targets { _ = listener.offer(outgoing) }
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

    func isListening(_ key: DeviceKey) -> Bool { self.state.withLock { $0.byDevice[key] != nil } }

    /// The families with someone listening now.
    var listeningFamilies: Set<String> { self.state.withLock { Set($0.byDevice.keys.map(\.family)) } }
}
