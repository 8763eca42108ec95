import NIOCore
import RPCCore
import Synchronization

/// Why a request was cancelled, which decides its final reply.
enum CancelReason: Sendable {
    /// `rpc.cancel` from the client: reply `cancelled`.
    case requested
    /// The service is stopping: reply `unavailable`, so the client reconnects and retries.
    case shutdown
    /// The peer closed its side: nobody to reply to.
    case peerGone
}

/// The requests in flight on one connection.
final class ConnectionState: Sendable {
    let id: UInt64
    private let limit: Int
    private let state = Mutex(Requests())

    private struct Requests {
        var nextToken: UInt64 = 0
        var tasks: [UInt64: Running] = [:]
        var tokensByID: [RequestID: UInt64] = [:]
        var unary = 0
    }

    private struct Running {
        var task: Task<Void, Never>
        var id: RequestID?
        var isStream: Bool
        var reason: CancelReason?
    }

    enum StartOutcome {
        case started
        case tooMany
        case duplicateID
    }

    /// Where the connection's requests run (its event loop); nil: Swift's global pool.
    let executor: (any TaskExecutor)?
    private let channel: (any Channel)?
    /// The connection stopped reading requests until earlier replies are out; a unary
    /// request finishing asks for a read again (the connection's handler decides).
    let readHeld = Atomic<Bool>(false)

    init(id: UInt64, limit: Int, executor: (any TaskExecutor)? = nil, channel: (any Channel)? = nil) {
        self.id = id
        self.limit = limit
        self.executor = executor
        self.channel = channel
    }

    /// Stops reading requests (shutdown); those read already are still served.
    func stopReading() {
        guard let channel = self.channel else { return }
        // A connection not active yet checks for shutdown itself when it becomes active
        // (NIO does not allow closing the input of a channel before that).
        channel.eventLoop.execute {
            if channel.isActive { channel.close(mode: .input, promise: nil) }
        }
    }

    /// Starts `body` as the request `id`, unless the connection is at its limit or that id
    /// is still in flight. `body` gets the token to pass to ``finish(_:)``.
    func start(id: RequestID?, isStream: Bool, _ body: @escaping @Sendable (UInt64) async -> Void) -> StartOutcome {
        self.state.withLock { requests in
            guard requests.tasks.count < self.limit else { return .tooMany }
            if let id, requests.tokensByID[id] != nil { return .duplicateID }
            let token = requests.nextToken
            requests.nextToken += 1
            let task = Task(executorPreference: self.executor) { await body(token) }
            requests.tasks[token] = Running(task: task, id: id, isStream: isStream)
            if !isStream { requests.unary += 1 }
            if let id { requests.tokensByID[id] = token }
            return .started
        }
    }

    /// Forgets a finished request; returns why it was cancelled, if it was.
    @discardableResult
    func finish(_ token: UInt64) -> CancelReason? {
        let (reason, wasUnary): (CancelReason?, Bool) = self.state.withLock { requests in
            guard let running = requests.tasks.removeValue(forKey: token) else { return (nil, false) }
            if let id = running.id { requests.tokensByID[id] = nil }
            if !running.isStream { requests.unary -= 1 }
            // An idle connection keeps no tables: ten thousand of them add up.
            if requests.tasks.isEmpty { requests.tasks = [:]; requests.tokensByID = [:] }
            return (running.reason, !running.isStream)
        }
        if wasUnary && self.readHeld.load(ordering: .relaxed) { self.channel?.read() }
        return reason
    }

    /// Why the request was cancelled, while it still runs.
    func reason(_ token: UInt64) -> CancelReason? {
        self.state.withLock { $0.tasks[token]?.reason }
    }

    /// Cancels the request `id`; false when none is in flight.
    func cancel(_ id: RequestID, reason: CancelReason) -> Bool {
        self.state.withLock { requests in
            guard let token = requests.tokensByID[id], var running = requests.tasks[token] else { return false }
            running.reason = running.reason ?? reason
            requests.tasks[token] = running
            running.task.cancel()
            return true
        }
    }

    /// Cancels every stream (or every request) still running.
    func cancelAll(streamsOnly: Bool, reason: CancelReason) {
        self.state.withLock { requests in
            for (token, var running) in requests.tasks where running.isStream || !streamsOnly {
                running.reason = running.reason ?? reason
                requests.tasks[token] = running
                running.task.cancel()
            }
        }
    }

    /// The connection's end (of reading, or of the channel): its streams end now, with
    /// `unavailable` if the service is stopping, silently if the peer has gone.
    func endStreams(stopping: Bool) {
        self.cancelAll(streamsOnly: true, reason: stopping ? .shutdown : .peerGone)
    }

    /// Runs `body` once every request started so far has finished: at once when none
    /// runs (no task for the usual idle connection), else from a task that waits.
    func whenDrained(_ body: @escaping @Sendable () -> Void) {
        guard self.inFlight > 0 else { return body() }
        Task(executorPreference: self.executor) {
            await self.drain()
            body()
        }
    }

    /// Waits until every request started so far has finished.
    func drain() async {
        while let next = self.state.withLock({ $0.tasks.values.first?.task }) {
            await next.value
            // A finished task removes itself; yield so it can.
            await Task.yield()
        }
    }

    var inFlight: Int { self.state.withLock { $0.tasks.count } }
    /// Requests in flight that are not streams: those whose replies are still to come.
    var unaryInFlight: Int { self.state.withLock { $0.unary } }
}

/// Process-wide bookkeeping: connections, accept counters for idle exit, shutdown phase.
final class ServerState: Sendable {
    private let state = Mutex(Counters())

    private struct Counters {
        var accepted = 0
        var received = 0
        var nextConnectionID: UInt64 = 1
        var connections: [UInt64: ConnectionState] = [:]
        var idleSince: ContinuousClock.Instant? = .now
        var shuttingDown = false
        var requestsServed: UInt64 = 0
    }

    func noteAccepted() { self.state.withLock { $0.accepted += 1 } }

    /// A connection is being set up. Returns nil if the connection limit is reached.
    func open(limit: Int, inFlightLimit: Int, executor: (any TaskExecutor)? = nil, channel: (any Channel)? = nil) -> ConnectionState? {
        self.state.withLock { counters in
            counters.received += 1
            guard counters.connections.count < limit else { return nil }
            let connection = ConnectionState(id: counters.nextConnectionID, limit: inFlightLimit, executor: executor, channel: channel)
            counters.nextConnectionID += 1
            counters.connections[connection.id] = connection
            counters.idleSince = nil
            return connection
        }
    }

    func close(_ connection: ConnectionState) {
        self.state.withLock { counters in
            counters.connections[connection.id] = nil
            if counters.connections.isEmpty { counters.idleSince = .now }
        }
    }

    func noteServed() { self.state.withLock { $0.requestsServed += 1 } }

    /// When the last connection closed, or nil while any is open.
    var idleSince: ContinuousClock.Instant? { self.state.withLock { $0.idleSince } }

    /// True when no connection is open and none is on its way from the kernel.
    var isQuiet: Bool {
        self.state.withLock { $0.connections.isEmpty && $0.accepted == $0.received }
    }

    func beginShutdown() { self.state.withLock { $0.shuttingDown = true } }
    var isShuttingDown: Bool { self.state.withLock { $0.shuttingDown } }

    /// Waits until no connection is open or on its way (after the listeners closed).
    func waitUntilQuiet() async {
        while !self.isQuiet {
            do { try await Task.sleep(for: .milliseconds(10)) } catch { return }  // cancelled: give up waiting
        }
    }

    /// Every connection stops reading requests (shutdown).
    func stopReadingAll() {
        let connections = self.state.withLock { Array($0.connections.values) }
        for connection in connections { connection.stopReading() }
    }

    func cancelEverything(reason: CancelReason) {
        let connections = self.state.withLock { Array($0.connections.values) }
        for connection in connections { connection.cancelAll(streamsOnly: false, reason: reason) }
    }

    var summary: (connections: Int, inFlight: Int, served: UInt64) {
        let (connections, served) = self.state.withLock { (Array($0.connections.values), $0.requestsServed) }
        return (connections.count, connections.reduce(0) { $0 + $1.inFlight }, served)
    }
}
