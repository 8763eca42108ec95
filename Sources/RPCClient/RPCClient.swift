import Foundation
import Logging
import NIOCore
import NIOPosix
import RPCCore
import Synchronization

/// How a client connects and how long it waits.
public struct ClientConfiguration: Sendable {
    /// The service's socket, e.g. `/run/screentime/store.sock`.
    public var socketPath: String
    /// Default deadline of one call (streams have none).
    public var callTimeout: Duration
    /// How long to keep retrying to connect (with backoff) before giving up with `unavailable`.
    public var connectTimeout: Duration
    /// The largest reply accepted.
    public var maximumFrameSize: Int
    /// Device credentials sent with every request.
    public var auth: Auth?
    /// Unary calls in flight at once; more wait for a slot. Below the services' default
    /// per-connection limit (128), which refuses the excess with `limit_exceeded`.
    public var maximumInFlight: Int

    public init(
        socketPath: String,
        callTimeout: Duration = .seconds(30),
        connectTimeout: Duration = .seconds(2),
        maximumFrameSize: Int = 16 << 20,
        auth: Auth? = nil,
        maximumInFlight: Int = 100
    ) {
        self.socketPath = socketPath
        self.callTimeout = callTimeout
        self.connectTimeout = connectTimeout
        self.maximumFrameSize = maximumFrameSize
        self.auth = auth
        self.maximumInFlight = maximumInFlight
    }
}

/// One event of a stream: an item (`"continues": true`) or the final result.
public enum StreamEvent<Item: Sendable, End: Sendable>: Sendable {
    case item(Item)
    case end(End)
}

/// An async client of one service. Safe to share: calls from many tasks are pipelined on
/// one connection and matched by id. A lost connection is re-established (with backoff) by
/// the next call. Every failure is an ``RPCError``: the service's own code and message, or
/// `unavailable` / `timeout` from the client side.
public final class RPCClient: Sendable {
    public let configuration: ClientConfiguration
    private let group: any EventLoopGroup
    private let link = Mutex<Link>(.idle)
    let gate: CallGate

    private enum Link {
        case idle
        case connecting(Task<ClientConnection, any Error>)
        case connected(ClientConnection)
    }

    public init(configuration: ClientConfiguration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.configuration = configuration
        self.group = eventLoopGroup
        self.gate = CallGate(slots: configuration.maximumInFlight)
    }

    public convenience init(socketPath: String) {
        self.init(configuration: ClientConfiguration(socketPath: socketPath))
    }

    // MARK: Calls

    /// Calls a unary method with typed parameters and result. With `actingFor`, the call
    /// carries those credentials instead of the configuration's: a service passing on
    /// its own caller's token, so the store decides what that caller may do.
    public func call<P, R>(_ spec: MethodSpec<P, R>, _ params: P, timeout: Duration? = nil, actingFor caller: Auth? = nil) async throws(RPCError) -> R {
        let reply = try await self.roundTrip(spec.name, params, timeout: timeout, auth: caller ?? self.configuration.auth)
        do {
            return try ResultDecoding.decode(R.self, from: reply)
        } catch {
            throw RPCError(.invalidJSON, "the reply of \(spec.name) does not have the declared result type: \(error)")
        }
    }

    /// Calls any method with JSON parameters; returns the JSON `result`.
    public func call(_ method: String, params: JSONValue = [:], timeout: Duration? = nil) async throws(RPCError) -> JSONValue {
        let reply = try await self.roundTrip(method, params, timeout: timeout, auth: self.configuration.auth)
        do {
            return try ResultDecoding.decode(JSONValue.self, from: reply)
        } catch {
            throw RPCError(.invalidJSON, "the reply of \(method) has no result: \(error)")
        }
    }

    /// Sends a one-way request (no `id`): the service runs it and sends no reply.
    public func notify(_ method: String, params: JSONValue = [:]) async throws(RPCError) {
        let connection = try await self.connection()
        let payload = try Self.encodeRequest(id: nil, method: method, params: params, auth: self.configuration.auth)
        try await connection.send(payload)
    }

    /// Calls a streaming method with typed items and end result.
    public func stream<P, I, E>(_ spec: StreamSpec<P, I, E>, _ params: P) -> AsyncThrowingStream<StreamEvent<I, E>, any Error> {
        self.openStream(spec.name, params, item: I.self, end: E.self)
    }

    /// Calls any streaming method with JSON parameters.
    public func stream(_ method: String, params: JSONValue = [:]) -> AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error> {
        self.openStream(method, params, item: JSONValue.self, end: JSONValue.self)
    }

    /// Closes the connection; calls in flight fail with `unavailable`.
    public func close() async {
        let current: ClientConnection? = self.link.withLock { link in
            defer { link = .idle }
            if case .connected(let connection) = link { return connection }
            return nil
        }
        try? await current?.channel.close()
    }

    // MARK: Internals

    func roundTrip<P: Encodable & Sendable>(_ method: String, _ params: P, timeout: Duration?, auth: Auth?, from: String? = nil) async throws(RPCError) -> ReplyHead {
        await self.gate.enter()
        defer { self.gate.leave() }
        switch try await self.attempt(method, params, timeout: timeout, auth: auth, from: from) {
        case .success(let reply):
            return reply
        case .failure(let unsent):
            // The request never reached the service: the connection was gone before it
            // went out (a restarted service whose old connection this client had not yet
            // seen close). Once more, on a new connection; a second such failure stands.
            switch try await self.attempt(method, params, timeout: timeout, auth: auth, from: from) {
            case .success(let reply): return reply
            case .failure: throw unsent.error
            }
        }
    }

    /// One try of a call: its reply, or that its request was never sent (other failures
    /// are thrown).
    private func attempt<P: Encodable & Sendable>(_ method: String, _ params: P, timeout: Duration?, auth: Auth?, from: String?) async throws(RPCError) -> Result<ReplyHead, UnsentRequest> {
        let connection = try await self.connection()
        let id = connection.makeID()
        let payload = try Self.encodeRequest(id: id, method: method, params: params, auth: auth, from: from)
        let deadline = timeout ?? self.configuration.callTimeout
        // The timer and the write are scheduled on the connection's event loop, not as
        // tasks: a call then costs no task creation and no extra thread hop.
        let timer = connection.channel.eventLoop.scheduleTask(in: TimeAmount(deadline)) {
            connection.fail(id, with: RPCError(.timeout, "\(method) did not answer within \(deadline)"))
        }
        defer { timer.cancel() }
        do {
            return .success(try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    do throws(RPCError) {
                        try connection.register(id, .unary(continuation))
                    } catch {
                        // Closed already: nothing was sent.
                        continuation.resume(throwing: UnsentRequest(error: error))
                        return
                    }
                    connection.sendTracked(payload, id: id)
                }
            } onCancel: {
                connection.fail(id, with: RPCError(.cancelled, "the call was cancelled"))
            })
        } catch let unsent as UnsentRequest {
            return .failure(unsent)
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError(.internal, "\(error)")
        }
    }

    private func openStream<P: Encodable & Sendable, I: Decodable & Sendable, E: Decodable & Sendable>(
        _ method: String, _ params: P, item: I.Type, end: E.Type
    ) -> AsyncThrowingStream<StreamEvent<I, E>, any Error> {
        let (events, continuation) = AsyncThrowingStream<StreamEvent<I, E>, any Error>.makeStream()
        let opened = Task {
            do throws(RPCError) {
                let connection = try await self.connection()
                let id = connection.makeID()
                let payload = try Self.encodeRequest(id: id, method: method, params: params, auth: self.configuration.auth)
                try connection.register(id, .stream { reply in
                    switch reply {
                    case .failure(let error):
                        continuation.finish(throwing: error)
                    case .success(let head):
                        do {
                            if head.continues == true {
                                continuation.yield(.item(try ResultDecoding.decode(I.self, from: head)))
                            } else {
                                continuation.yield(.end(try ResultDecoding.decode(E.self, from: head)))
                                continuation.finish()
                            }
                        } catch {
                            continuation.finish(throwing: RPCError(.invalidJSON, "a reply of \(method) does not have the declared type: \(error)"))
                        }
                    }
                })
                continuation.onTermination = { termination in
                    guard case .cancelled = termination else { return }
                    // The consumer stopped listening: tell the service to stop the stream.
                    connection.forget(id)
                    Task {
                        let cancel = try? Self.encodeRequest(id: nil, method: Builtin.cancel.name, params: CancelParams(id: id), auth: nil)
                        if let cancel { try? await connection.send(cancel) }
                    }
                }
                try await connection.send(payload)
            } catch {
                continuation.finish(throwing: error)
            }
        }
        _ = opened
        return events
    }

    static func encodeRequest<P: Encodable>(id: RequestID?, method: String, params: P, auth: Auth?, from: String? = nil) throws(RPCError) -> Data {
        do {
            return try ReplyEncoding.request(id: id, method: method, params: params, auth: auth, from: from)
        } catch {
            throw RPCError(.invalidParams, "the parameters of \(method) could not be encoded: \(error)")
        }
    }

    /// The connection, if one is open and usable now (no waiting, no connecting).
    func connectionAtHand() -> ClientConnection? {
        self.link.withLock { link in
            if case .connected(let connection) = link, connection.isUsable { return connection }
            return nil
        }
    }

    /// The current connection, or a new one.
    func connection() async throws(RPCError) -> ClientConnection {
        // Connected (every call but the first few): no task to wait on.
        enum Next {
            case ready(ClientConnection)
            case wait(Task<ClientConnection, any Error>)
        }
        let next: Next = self.link.withLock { link in
            switch link {
            case .connected(let connection) where connection.isUsable:
                return .ready(connection)
            case .connecting(let task):
                return .wait(task)
            default:
                let task = Task { try await self.connectWithBackoff() }
                link = .connecting(task)
                return .wait(task)
            }
        }
        let task: Task<ClientConnection, any Error>
        switch next {
        case .ready(let connection): return connection
        case .wait(let connecting): task = connecting
        }
        // A caller cancelled while connecting (its service shutting down, say) stops waiting
        // at once; the attempt goes on for the others waiting on it.
        guard let result = await ConnectWait.result(of: task) else {
            throw RPCError(.cancelled, "cancelled while connecting to \(self.configuration.socketPath)")
        }
        switch result {
        case .success(let connection):
            self.link.withLock { link in
                if case .connecting(let current) = link, current == task { link = .connected(connection) }
            }
            return connection
        case .failure(let error):
            self.link.withLock { link in
                if case .connecting(let current) = link, current == task { link = .idle }
            }
            throw error as? RPCError ?? RPCError.connectionFailed("\(error)")
        }
    }

    private func connectWithBackoff() async throws -> ClientConnection {
        let path = self.configuration.socketPath
        let giveUp = ContinuousClock.now + self.configuration.connectTimeout
        var delay = Duration.milliseconds(20)
        while true {
            do {
                return try await self.connectOnce()
            } catch {
                // A socket this user may not open stays so: no retry.
                let denied = (error as? IOError)?.errnoCode == EACCES
                if denied || ContinuousClock.now + delay > giveUp {
                    throw RPCError.connectionFailed("cannot connect to \(path): \(Self.describe(error))", socket: path, permissionDenied: denied)
                }
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .milliseconds(500))
            }
        }
    }

    private func connectOnce() async throws -> ClientConnection {
        let maximumFrameSize = self.configuration.maximumFrameSize
        let channel = try await ClientBootstrap(group: self.group)
            .connect(unixDomainSocketPath: self.configuration.socketPath)
            .get()
        let connection = ClientConnection(channel: channel)
        try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.addFrameCodec(maximumFrameSize: maximumFrameSize)
            try channel.pipeline.syncOperations.addHandler(ReplyRouter(connection: connection))
        }.get()
        return connection
    }

    private static func describe(_ error: any Error) -> String {
        if let io = error as? IOError {
            return String(cString: strerror(io.errnoCode))
        }
        return "\(error)"
    }
}

/// One caller's wait for the shared connect attempt, which it can leave when it is
/// cancelled without cancelling the attempt (other callers may be waiting on it).
private final class ConnectWait<T: Sendable>: Sendable {
    private let waiter = Mutex<CheckedContinuation<Result<T, any Error>?, Never>?>(nil)

    /// The attempt's result, or nil when the calling task was cancelled first.
    static func result(of task: Task<T, any Error>) async -> Result<T, any Error>? {
        let wait = ConnectWait<T>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                wait.waiter.withLock { $0 = continuation }
                if Task.isCancelled { wait.resume(nil) }
                Task { wait.resume(await task.result) }
            }
        } onCancel: {
            wait.resume(nil)
        }
    }

    /// The first of the result and the cancellation ends the wait; the other finds it over.
    private func resume(_ result: Result<T, any Error>?) {
        self.waiter.withLock { $0.take() }?.resume(returning: result)
    }
}
