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

        func end(_ why: Ending) {
            self.ending.withLock { if $0 == nil { $0 = why } }
            self.continuation.finish()
        }
    }

    let capacity: Int
    private let listeners = Mutex<(byDevice: [DeviceKey: [Int: Listener]], next: Int, closed: Bool)>(([:], 0, false))

    init(capacity: Int) { self.capacity = capacity }

    /// Registers a listener before its backlog is read, so nothing queued meanwhile is missed.
    func register(_ key: DeviceKey) -> (stream: AsyncStream<Outgoing>, listener: Listener, unregister: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream<Outgoing>.makeStream(bufferingPolicy: .bufferingOldest(self.capacity))
        let listener = Listener(continuation)
        let id: Int? = self.listeners.withLock { state in
            guard !state.closed else { return nil }
            state.next += 1
            state.byDevice[key, default: [:]][state.next] = listener
            return state.next
        }
        if id == nil { listener.end(.shutdown) }
        let unregister: @Sendable () -> Void = { [weak self] in
            guard let id else { return }
            self?.listeners.withLock { state in
                state.byDevice[key]?.removeValue(forKey: id)
                if state.byDevice[key]?.isEmpty == true { state.byDevice.removeValue(forKey: key) }
            }
        }
        return (stream, listener, unregister)
    }

    /// Hands a queued notification to the device's listeners, without waiting.
    func deliver(_ notification: Outgoing, to key: DeviceKey) {
        guard let targets = self.listeners.withLock({ $0.byDevice[key].map { Array($0.values) } }) else { return }
        for listener in targets {
            if case .dropped = listener.continuation.yield(notification) { listener.end(.fellBehind) }
        }
    }

    /// Ends the listeners of devices `revoked` says are revoked.
    func cut(family: String, where revoked: (String) -> Bool) {
        let targets = self.listeners.withLock { state in
            state.byDevice.filter { $0.key.family == family && revoked($0.key.deviceId) }.flatMap { $0.value.values }
        }
        for listener in targets { listener.end(.revoked) }
    }

    /// Ends every listener (shutdown); later ones end at once.
    func closeAll() {
        let all = self.listeners.withLock { state in
            state.closed = true
            return state.byDevice.values.flatMap { $0.values }
        }
        for listener in all { listener.end(.shutdown) }
    }

    func isListening(_ key: DeviceKey) -> Bool { self.listeners.withLock { $0.byDevice[key] != nil } }

    /// The families with someone listening now.
    var listeningFamilies: Set<String> { self.listeners.withLock { Set($0.byDevice.keys.map(\.family)) } }
}
