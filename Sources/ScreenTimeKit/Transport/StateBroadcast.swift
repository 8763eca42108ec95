import Foundation
import Synchronization

/// The current connection state and every listener of its changes. Each listener first
/// gets the state as it is, then each change; repeats are not sent.
final class StateBroadcast: Sendable {
    private struct Listeners {
        var state: ConnectionState
        var next = 0
        var continuations: [Int: AsyncStream<ConnectionState>.Continuation] = [:]
    }

    private let listeners: Mutex<Listeners>

    init(_ initial: ConnectionState) {
        self.listeners = Mutex(Listeners(state: initial))
    }

    var current: ConnectionState { self.listeners.withLock { $0.state } }

    func set(_ state: ConnectionState) {
        let targets: [AsyncStream<ConnectionState>.Continuation] = self.listeners.withLock { listeners in
            guard listeners.state != state else { return [] }
            listeners.state = state
            return Array(listeners.continuations.values)
        }
        for target in targets { target.yield(state) }
    }

    func stream() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream<ConnectionState>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let id: Int = self.listeners.withLock { listeners in
            defer { listeners.next += 1 }
            listeners.continuations[listeners.next] = continuation
            continuation.yield(listeners.state)
            return listeners.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.listeners.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func finish() {
        let targets = self.listeners.withLock { listeners in
            defer { listeners.continuations = [:] }
            return Array(listeners.continuations.values)
        }
        for target in targets { target.finish() }
    }
}
