import NIOCore
import Synchronization

/// Process-wide bookkeeping: the server's phase, its connections (for limits, idle exit
/// and draining) and what it has served.
final class ServerState: Sendable {
    /// running → draining (SIGTERM, idle exit: nothing new is read) → stopped.
    enum Phase: Sendable, Equatable {
        case running
        case draining
        case stopped
    }

    private let state = Mutex(State())

    private struct State {
        var phase = Phase.running
        /// Connections a listener has accepted whose pipeline is not set up yet (on their
        /// own event loop): on their way, so not quiet.
        var arriving = 0
        var nextConnectionID: UInt64 = 1
        var connections: [UInt64: ConnectionState] = [:]
        var idleSince: ContinuousClock.Instant? = .now
        var requestsServed: UInt64 = 0
        var nextWaiter = 0
        var quietWaiters: [Int: CheckedContinuation<Void, Never>] = [:]

        var isQuiet: Bool { self.connections.isEmpty && self.arriving == 0 }

        /// The waiters to resume, if the server has just become quiet.
        mutating func takeWaitersIfQuiet() -> [CheckedContinuation<Void, Never>] {
            guard self.isQuiet, !self.quietWaiters.isEmpty else { return [] }
            defer { self.quietWaiters = [:] }
            return Array(self.quietWaiters.values)
        }
    }

    /// A listener accepted a connection.
    func noteAccepted() { self.state.withLock { $0.arriving += 1 } }

    /// A connection is being set up. Returns nil if the connection limit is reached.
    func open(limit: Int, inFlightLimit: Int, executor: (any TaskExecutor)? = nil, channel: (any Channel)? = nil) -> ConnectionState? {
        let (connection, waiters): (ConnectionState?, [CheckedContinuation<Void, Never>]) = self.state.withLock { state in
            state.arriving = max(0, state.arriving - 1)
            guard state.connections.count < limit else { return (nil, state.takeWaitersIfQuiet()) }
            let connection = ConnectionState(id: state.nextConnectionID, limit: inFlightLimit, executor: executor, channel: channel)
            state.nextConnectionID += 1
            state.connections[connection.id] = connection
            state.idleSince = nil
            return (connection, [])
        }
        for waiter in waiters { waiter.resume() }
        return connection
    }

    /// The connection has closed and its requests have finished.
    func close(_ connection: ConnectionState) {
        let waiters = self.state.withLock { state in
            state.connections[connection.id] = nil
            if state.connections.isEmpty { state.idleSince = .now }
            return state.takeWaitersIfQuiet()
        }
        for waiter in waiters { waiter.resume() }
    }

    func noteServed() { self.state.withLock { $0.requestsServed += 1 } }

    /// When the last connection closed, or nil while any is open.
    var idleSince: ContinuousClock.Instant? { self.state.withLock { $0.idleSince } }

    /// True when no connection is open and none is on its way from the kernel.
    var isQuiet: Bool { self.state.withLock { $0.isQuiet } }

    var phase: Phase { self.state.withLock { $0.phase } }
    /// Draining or stopped.
    var isShuttingDown: Bool { self.phase != .running }

    /// running → draining; false if the server was not running.
    @discardableResult
    func beginShutdown() -> Bool {
        self.state.withLock { state in
            guard state.phase == .running else { return false }
            state.phase = .draining
            return true
        }
    }

    func stopped() { self.state.withLock { $0.phase = .stopped } }

    /// Waits until no connection is open or on its way (after the listeners closed);
    /// returns early if the task is cancelled.
    func waitUntilQuiet() async {
        let id = self.state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = self.state.withLock { state in
                    guard !state.isQuiet, !Task.isCancelled else { return true }
                    state.quietWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.state.withLock { $0.quietWaiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Every connection stops reading requests (shutdown).
    func stopReadingAll() {
        let connections = self.state.withLock { Array($0.connections.values) }
        for connection in connections { connection.stopReading() }
    }

    /// The shutdown's deadline: every request still running is cancelled, and every
    /// connection closes once they have ended.
    func cancelEverything(reason: CancelReason) {
        let connections = self.state.withLock { Array($0.connections.values) }
        for connection in connections {
            connection.cancelAll(reason: reason)
            connection.closeWhenDrained()
        }
    }

    var summary: (connections: Int, inFlight: Int, served: UInt64) {
        let (connections, served) = self.state.withLock { (Array($0.connections.values), $0.requestsServed) }
        return (connections.count, connections.reduce(0) { $0 + $1.inFlight }, served)
    }
}
