import NIOCore
import RPCCore
import Synchronization

/// Why a request was cancelled, which decides its final reply.
enum CancelReason: Sendable {
    /// `rpc.cancel` from the client: reply `cancelled`.
    case requested
    /// The connection stopped carrying requests (the client half-closed it, or its framing
    /// was lost): its streams end with `cancelled`.
    case inputEnded
    /// The service is stopping: reply `unavailable`, so the client reconnects and retries.
    case shutdown
    /// The peer closed the connection: nobody to reply to.
    case peerGone
}

/// The requests in flight on one connection.
final class ConnectionState: Sendable {
    let id: UInt64
    /// Where the connection's requests run (its event loop); nil: Swift's global pool.
    let executor: (any TaskExecutor)?
    private let limit: Int
    private let channel: (any Channel)?
    private let state = Mutex(Requests())

    private struct Requests {
        var nextToken: UInt64 = 0
        var tasks: [UInt64: Running] = [:]
        var tokensByID: [RequestID: UInt64] = [:]
        var unary = 0
        /// Set when the connection's streams were ended: a stream started later (from a
        /// frame read before) ends at once, the same way.
        var streamsEnded: CancelReason?
        /// Run once no request is in flight.
        var whenDrained: [@Sendable () -> Void] = []
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

    /// Whether a request may be answered at once, with no task: the connection is under its
    /// limit and no request in flight has its `id` (else ``start(id:isStream:_:)`` refuses it
    /// as it refuses any other).
    func mayAnswerAtOnce(id: RequestID?) -> Bool {
        self.state.withLock { requests in
            requests.tasks.count < self.limit && (id.map { requests.tokensByID[$0] == nil } ?? true)
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
            var running = Running(task: task, id: id, isStream: isStream)
            if isStream, let ended = requests.streamsEnded {
                running.reason = ended
                task.cancel()
            }
            requests.tasks[token] = running
            if !isStream { requests.unary += 1 }
            if let id { requests.tokensByID[id] = token }
            return .started
        }
    }

    /// Forgets a finished request; returns why it was cancelled, if it was.
    @discardableResult
    func finish(_ token: UInt64) -> CancelReason? {
        let (reason, drained): (CancelReason?, [@Sendable () -> Void]) = self.state.withLock { requests in
            guard let running = requests.tasks.removeValue(forKey: token) else { return (nil, []) }
            if let id = running.id { requests.tokensByID[id] = nil }
            if !running.isStream { requests.unary -= 1 }
            guard requests.tasks.isEmpty else { return (running.reason, []) }
            // An idle connection keeps no tables: ten thousand of them add up.
            requests.tasks = [:]
            requests.tokensByID = [:]
            defer { requests.whenDrained = [] }
            return (running.reason, requests.whenDrained)
        }
        for body in drained { body() }
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

    /// Cancels every request still running (the shutdown deadline).
    func cancelAll(reason: CancelReason) {
        self.state.withLock { requests in
            for (token, var running) in requests.tasks {
                running.reason = running.reason ?? reason
                requests.tasks[token] = running
                running.task.cancel()
            }
        }
    }

    /// The shutdown's deadline: once its requests have ended (they are being cancelled),
    /// the connection closes, even with replies not yet sent to a peer that does not read
    /// them, instead of waiting for them to be.
    func closeWhenDrained() {
        guard let channel = self.channel else { return }
        self.whenDrained { channel.close(promise: nil) }
    }

    /// The connection's end of reading, or of the channel: its streams end now, and so
    /// does any stream started later. The first reason given decides each final reply.
    func endStreams(reason: CancelReason) {
        self.state.withLock { requests in
            requests.streamsEnded = requests.streamsEnded ?? reason
            for (token, var running) in requests.tasks where running.isStream {
                running.reason = running.reason ?? reason
                requests.tasks[token] = running
                running.task.cancel()
            }
        }
    }

    /// Runs `body` once no request is in flight: at once if none is, else when the last
    /// one finishes (on that request's thread).
    func whenDrained(_ body: @escaping @Sendable () -> Void) {
        let now: Bool = self.state.withLock { requests in
            guard !requests.tasks.isEmpty else { return true }
            requests.whenDrained.append(body)
            return false
        }
        if now { body() }
    }

    var inFlight: Int { self.state.withLock { $0.tasks.count } }
    /// Requests in flight that are not streams: those whose replies are still to come.
    var unaryInFlight: Int { self.state.withLock { $0.unary } }
}
