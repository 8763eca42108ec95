import Foundation
import GatewayAPI
import Logging
import NIOCore
import NIOPosix
import RPCClient
import RPCCore
import Synchronization

/// One TLS WebSocket to the gateway (`GET /v1/ws`), the server's key pinned from the
/// pairing URI and checked in the TLS handshake (``PinnedWebSocket``): each text message is one envelope, requests are pipelined and matched by
/// id, streams reply with `"continues": true`, `rpc.cancel` ends one. The device's token
/// goes in `Authorization: Bearer` at the upgrade.
///
/// It connects on creation and stays connected: when the connection drops it reconnects
/// with jittered backoff (``Backoff``), pings to keep NATs and the gateway's idle timeout
/// from closing it, and reports its state (`connected`, `reconnecting`, `offline`).
/// Whether a request waits or fails is decided by the state, not by a timer: while the
/// transport is connecting or reconnecting a request waits for the next state change (no
/// polling), bounded only by its own deadline; once the transport is `offline` (its
/// `backoff.attemptsBeforeOffline` attempts in a row failed, or the server's key was refused)
/// a request fails at once with `unavailable` (or `pin_mismatch`), and the offline queue keeps
/// writes for later. A slow handshake under load therefore never fails a call, and a gateway
/// that is down fails calls fast. When the server says the device was removed from the
/// family (`device_revoked`, on a reply or as the gateway closes the socket), the transport
/// is `revoked`: it stops connecting and fails every call with that error at once, until
/// ``credentialsChanged()`` brings a new credential.
public final class WebSocketTransport: Transport {
    public struct Configuration: Sendable {
        /// The gateway's URLs (`https://host:8443`), most preferred first; tried in turn.
        public var urls: [String]
        public var pin: KeyPin
        /// The device's token, read at each connection; none before pairing (enrollment
        /// and acceptance are allowed without one).
        public var token: @Sendable () -> String?
        /// A call's deadline (the wait for a connection included), unless the request has its own.
        public var callTimeout: Duration
        public var backoff: Backoff
        /// Ping interval (the gateway closes idle sockets).
        public var keepAlive: Duration
        public var maximumMessageSize: Int

        public init(urls: [String], pin: KeyPin, token: @escaping @Sendable () -> String? = { nil }, callTimeout: Duration = .seconds(30),
                    backoff: Backoff = Backoff(), keepAlive: Duration = .seconds(25), maximumMessageSize: Int = 16 << 20) {
            self.urls = urls
            self.pin = pin
            self.token = token
            self.callTimeout = callTimeout
            self.backoff = backoff
            self.keepAlive = keepAlive
            self.maximumMessageSize = maximumMessageSize
        }
    }

    public let configuration: Configuration
    private let logger: Logger
    private let broadcast = StateBroadcast(.reconnecting)
    private let link = Mutex(Link())
    private let runner = Mutex<Task<Void, Never>?>(nil)
    /// The connection loop, waiting in `revoked` for a new credential.
    private let revivals = Mutex<[CheckedContinuation<Void, Never>]>([])

    private struct Link {
        var writer: PinnedWebSocket?
        /// Counts connections, so the end of an old one never clears a newer one's writer.
        var generation = 0
        var nextID: Int64 = 1
        var waiters: [RequestID: Waiter] = [:]
        /// Requests being written: the connection's end leaves them to their writer, who
        /// knows whether they went out (``exchange``).
        var writing: Set<RequestID> = []
        /// The gateway closed the last connection saying it read none of its requests.
        var closedUnread = false
        var lastError: RPCError?
        var closed = false
        /// The server's `device_revoked`: no more connections until a new credential.
        var revoked: RPCError?
        /// The app is in the background: no connection until resumed.
        var suspended = false
    }

    private enum Waiter: Sendable {
        case unary(CheckedContinuation<JSONValue, any Error>)
        case stream(AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error>.Continuation)
    }

    public init(configuration: Configuration, logger: Logger = Logger(label: "screentimekit.websocket")) {
        self.configuration = configuration
        self.logger = logger
        let task = Task { [weak self] in
            guard let self else { return }
            await self.run()
        }
        self.runner.withLock { $0 = task }
    }

    public var state: ConnectionState { self.broadcast.current }
    public func states() -> AsyncStream<ConnectionState> { self.broadcast.stream() }

    /// The last connection error (e.g. `pin_mismatch`), if the transport is not connected.
    public var lastError: RPCError? { self.link.withLock { $0.lastError } }

    public func call(_ request: TransportRequest) async throws(RPCError) -> JSONValue {
        try await self.call(request, startingOn: nil)
    }

    /// `call(_:)`, its first attempt on `first` when given (a connection a test closed).
    func call(_ request: TransportRequest, startingOn first: PinnedWebSocket?) async throws(RPCError) -> JSONValue {
        let deadline = request.timeout ?? self.configuration.callTimeout
        let started = ContinuousClock.now
        var retried = false
        var first = first
        while true {
            let writer: PinnedWebSocket
            if let given = first {
                writer = given
                first = nil
            } else {
                writer = try await self.connectedWriter(within: deadline - (ContinuousClock.now - started), for: request.method)
            }
            let cause: any Error
            do {
                return try await self.exchange(request, on: writer, deadline: deadline, started: started)
            } catch {
                switch error {
                case .failed(let error): throw error
                case .unsent(let error): cause = error
                }
            }
            // The connection closed under the request before it went out (the gateway
            // restarting, or closing a connection that stayed silent past its deadline): no
            // part of it reached the gateway, so it goes once more on the next connection.
            guard !retried else { throw self.revokedError ?? RPCError(.unavailable, "could not send \(request.method): \(cause)") }
            retried = true
            self.link.withLock { link in
                if link.writer === writer { link.writer = nil }
            }
            self.logger.debug("a request met a closed connection before it was sent; sending it on the next one",
                              metadata: ["method": "\(request.method)", "error": "\(cause)"])
        }
    }

    /// How one attempt at a request ended without an answer: `unsent` when writing it failed
    /// (nothing of it reached the gateway, so it may be sent again), `failed` otherwise.
    private enum AttemptError: Error {
        case unsent(any Error)
        case failed(RPCError)
    }

    /// Sends `request` on `writer` under a new id and waits for its answer, until the
    /// call's deadline (`started` + `deadline`).
    private func exchange(_ request: TransportRequest, on writer: PinnedWebSocket, deadline: Duration,
                          started: ContinuousClock.Instant) async throws(AttemptError) -> JSONValue {
        let id = self.link.withLock { link in
            defer { link.nextID += 1 }
            return RequestID.int(link.nextID)
        }
        let payload: String
        do { payload = try Self.encode(id: id, request) } catch { throw .failed(error) }
        let remaining = deadline - (ContinuousClock.now - started)
        let timer = Task { [weak self] in
            try? await Task.sleep(for: remaining)
            if !Task.isCancelled { self?.fail(id, RPCError(.timeout, "\(request.method) did not answer within \(deadline)")) }
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    // Registered only on the connection it is written to: one that has
                    // gone already means the request is sent on the next one.
                    let registered = self.link.withLock { link -> Bool in
                        guard link.writer === writer else { return false }
                        link.waiters[id] = .unary(continuation)
                        link.writing.insert(id)
                        return true
                    }
                    guard registered else {
                        if let revoked = self.revokedError {
                            continuation.resume(throwing: revoked)
                        } else {
                            continuation.resume(throwing: Unsent(cause: RPCError(.unavailable, "the connection to the gateway closed")))
                        }
                        return
                    }
                    Task {
                        do {
                            try await writer.send(text: payload)
                            // Written: from now on the connection's end fails it as lost (it
                            // may have reached the gateway). If it ended while this was being
                            // written, the end left it to this.
                            let lost = self.link.withLock { link in
                                link.writing.remove(id)
                                return link.writer !== writer
                            }
                            if lost { self.fail(id, self.revokedError ?? Self.lostError) }
                        } catch {
                            self.link.withLock { _ = $0.writing.remove(id) }
                            // A connection the gateway closed because the device was removed
                            // (its error came first): the call fails as revoked, not unavailable.
                            if let revoked = self.revokedError {
                                self.fail(id, revoked)
                            } else {
                                self.failUnsent(id, error)
                            }
                        }
                    }
                }
            } onCancel: {
                self.fail(id, RPCError(.cancelled, "the call was cancelled"))
            }
        } catch let error as Unsent {
            throw .unsent(error.cause)
        } catch let error as RPCError {
            throw .failed(error)
        } catch {
            throw .failed(RPCError(.internal, "\(error)"))
        }
    }

    public func stream(_ request: TransportRequest) -> AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error> {
        let (events, continuation) = AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error>.makeStream()
        let opened = Task {
            do throws(RPCError) {
                let writer = try await self.connectedWriter(within: self.configuration.callTimeout, for: request.method)
                let id = self.link.withLock { link in
                    defer { link.nextID += 1 }
                    let id = RequestID.int(link.nextID)
                    link.waiters[id] = .stream(continuation)
                    return id
                }
                continuation.onTermination = { [weak self] termination in
                    guard case .cancelled = termination, let self else { return }
                    guard self.link.withLock({ $0.waiters.removeValue(forKey: id) }) != nil else { return }
                    Task { try? await self.send(TransportRequest(method: Builtin.cancel.name, params: ["id": Self.json(id)]), id: nil) }
                }
                do { try await writer.send(text: try Self.encode(id: id, request)) } catch {
                    self.fail(id, self.revokedError ?? RPCError(.unavailable, "could not send \(request.method): \(error)"))
                }
            } catch {
                continuation.finish(throwing: error)
            }
        }
        _ = opened
        return events
    }

    public func close() async {
        let task = self.runner.withLock { $0 }
        let writer = self.link.withLock { link in
            link.closed = true
            return link.writer
        }
        await writer?.close(code: .normalClosure, reason: "client closing")
        task?.cancel()
        self.revive()
        await task?.value
        self.failAll(RPCError(.unavailable, "the transport was closed"))
        self.broadcast.finish()
    }

    /// The device's credential changed (pairing gave it one): connect again with it (a
    /// `revoked` transport starts again).
    public func credentialsChanged() async {
        self.link.withLock { $0.revoked = nil }
        self.revive()
        // Requests from now on wait for the connection with the new credential.
        let writer = self.link.withLock { link in
            defer { link.writer = nil }
            return link.writer
        }
        await writer?.close(code: .normalClosure, reason: "new credential")
    }

    /// What a call gets while the transport is suspended.
    static let suspendedError = RPCError(.unavailable, "the kit is suspended (the app is in the background): resume() connects again")

    public func suspend() async {
        let writer = self.link.withLock { link in
            link.suspended = true
            return link.writer
        }
        // Not connected (between attempts, revoked, or a connection still being made, which
        // closes itself when it finds the transport suspended): nothing to wait for.
        guard let writer else { return }
        // The close handshake: the gateway ends the device's streams as it reads it.
        await writer.close(code: .goingAway, reason: "suspended")
        for await state in self.broadcast.stream() where state != .connected { break }
    }

    public func resume() async {
        self.link.withLock { $0.suspended = false }
        self.revive()
    }

    // MARK: The connection loop

    private func run() async {
        var attempt = 0
        while !Task.isCancelled, !self.link.withLock({ $0.closed }) {
            if self.link.withLock({ $0.suspended }) {
                self.failAll(Self.suspendedError)
                self.broadcast.set(.suspended)
                await self.waitForRevival { !$0.suspended || $0.closed }
                attempt = 0
                continue
            }
            if let revoked = self.link.withLock({ $0.revoked }) {
                // Terminal until the device is paired again: no more connections.
                self.failAll(revoked)
                self.broadcast.set(.revoked)
                await self.waitForRevival { $0.revoked == nil || $0.closed }
                attempt = 0
                continue
            }
            let connected = Locked(false)
            for url in self.configuration.urls {
                do {
                    try await self.connect(url) { connected.set(true) }
                } catch let error as RPCError {
                    self.link.withLock { $0.lastError = error }
                    self.logger.info("gateway connection failed", metadata: ["url": "\(url)", "code": "\(error.code)", "error": "\(error.message)"])
                } catch {
                    self.link.withLock { $0.lastError = RPCError(.unavailable, "\(error)") }
                    self.logger.info("gateway connection failed", metadata: ["url": "\(url)", "error": "\(error)"])
                }
                if let revoked = self.link.withLock({ $0.revoked }) {
                    self.failAll(revoked)
                    break
                }
                self.failAll(Self.lostError, exceptWriting: true, unsent: self.link.withLock { link in
                    defer { link.closedUnread = false }
                    return link.closedUnread
                })
                if connected.get() || Task.isCancelled || self.link.withLock({ $0.suspended }) { break }
            }
            if Task.isCancelled || self.link.withLock({ $0.closed }) { break }
            if self.link.withLock({ $0.revoked != nil || $0.suspended }) { continue }
            attempt = connected.get() ? 0 : attempt + 1
            // The explicit offline decision: enough failed attempts in a row, or a key that is
            // not the pinned one (retrying will not change it). Calls waiting for a connection
            // are woken by this change and fail at once.
            let refused = !connected.get() && self.link.withLock { $0.lastError?.code == .pinMismatch }
            self.broadcast.set(refused || attempt >= self.configuration.backoff.attemptsBeforeOffline ? .offline : .reconnecting)
            try? await Task.sleep(for: self.configuration.backoff.delay(attempt: attempt))
        }
        self.broadcast.set(.offline)
    }

    /// One connection: TLS with the pin checked in its handshake, the WebSocket upgrade on
    /// it (``PinnedWebSocket``), until it closes.
    private func connect(_ url: String, onConnected: @escaping @Sendable () -> Void) async throws {
        guard let components = URLComponents(string: url), let host = components.host, components.scheme == "https" else {
            throw RPCError(.invalidParams, "\(url) is not a gateway URL (https://host:port)")
        }
        let port = components.port ?? 443
        let socket = try await PinnedWebSocket.connect(host: host, port: port, pin: self.configuration.pin, token: self.configuration.token(),
                                                       maximumMessageSize: self.configuration.maximumMessageSize)
        // The writer is set and the suspension read under one lock: a suspend() either sees
        // this connection and closes it, or this sees the suspension and drops it unused.
        let generation: Int? = self.link.withLock { link in
            guard !link.suspended else { return nil }
            link.generation += 1
            link.writer = socket
            link.lastError = nil
            return link.generation
        }
        guard let generation else { return await socket.discard() }
        onConnected()
        self.broadcast.set(.connected)
        defer {
            self.link.withLock { link in
                if link.generation == generation { link.writer = nil }
            }
        }
        let closed: PinnedWebSocket.Closed
        do {
            closed = try await socket.run(keepAlive: self.configuration.keepAlive) { [weak self] text in self?.deliver(Data(text.utf8)) }
        } catch {
            throw RPCError(.unavailable, "the WebSocket to \(host):\(port) failed: \(error)")
        }
        // The gateway says why it closed: a device removed from the family hears it from the
        // close frame too, should the error message before it have been lost.
        // Closed for want of a credential with nothing under way: nothing sent on this
        // connection was carried out, so what waits is sent again on the next one.
        if closed.code == .policyViolation, closed.reason == GatewayCloseReason.noCredential {
            self.link.withLock { $0.closedUnread = true }
        }
        if closed.code == .policyViolation, closed.reason == GatewayCloseReason.deviceRevoked, self.link.withLock({ $0.revoked == nil }) {
            self.markRevoked(RPCError(.deviceRevoked, "this device was removed from the family: its credential was revoked; to use it again, pair it again with a new invitation from a parent"))
        }
    }

    // MARK: Routing

    private func deliver(_ payload: Data) {
        guard let head = try? ReplyHead.parse(payload) else {
            self.logger.warning("the gateway sent a message that is not a reply")
            return
        }
        if let error = head.error, error.code == .deviceRevoked { self.markRevoked(error) }
        guard let id = head.id else {
            // The gateway's word on the connection (why it closes it), answered to no request.
            if let error = head.error { self.logger.info("the gateway closes the connection", metadata: ["code": "\(error.code)", "error": "\(error.message)"]) }
            return
        }
        let waiter: Waiter? = self.link.withLock { link in
            if case .stream = link.waiters[id], head.continues == true { return link.waiters[id] }
            return link.waiters.removeValue(forKey: id)
        }
        switch waiter {
        case .unary(let continuation):
            if let error = head.error {
                continuation.resume(throwing: error)
            } else {
                continuation.resume(returning: head.result)
            }
        case .stream(let continuation):
            if let error = head.error {
                continuation.finish(throwing: error)
            } else if head.continues == true {
                continuation.yield(.item(head.result))
            } else {
                continuation.yield(.end(head.result))
                continuation.finish()
            }
        case nil:
            break
        }
    }

    /// The server removed this device from the family: said once, then the connection loop
    /// stops connecting (``run()``).
    private func markRevoked(_ error: RPCError) {
        let first = self.link.withLock { link -> Bool in
            defer {
                link.revoked = error
                link.lastError = error
            }
            return link.revoked == nil
        }
        if first {
            self.logger.notice("the server removed this device from the family; no more connections until it is paired again",
                               metadata: ["device_id": "\(error.data?["deviceId"]?.stringValue ?? "")"])
        }
    }

    /// Waits, revoked or suspended, until `done` holds (a new credential, a resume, a close).
    private func waitForRevival(until done: @escaping @Sendable (Link) -> Bool) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                self.revivals.withLock { $0.append(continuation) }
                // Re-checked after registering: it may have come in between.
                if Task.isCancelled || self.link.withLock({ done($0) }) { self.revive() }
            }
        } onCancel: {
            self.revive()
        }
    }

    private func revive() {
        let waiters = self.revivals.withLock { waiters in
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The connection requests go on now, if there is one.
    var currentConnection: PinnedWebSocket? { self.link.withLock { $0.writer } }

    /// The server's `device_revoked`, once it said so.
    private var revokedError: RPCError? { self.link.withLock { $0.revoked } }

    private func fail(_ id: RequestID, _ error: RPCError) {
        guard let waiter = self.link.withLock({ $0.waiters.removeValue(forKey: id) }) else { return }
        Self.fail(waiter, error)
    }

    /// A request whose write failed: its caller may send it again (``call(_:)``).
    private struct Unsent: Error {
        var cause: any Error
    }

    private func failUnsent(_ id: RequestID, _ cause: any Error) {
        guard let waiter = self.link.withLock({ $0.waiters.removeValue(forKey: id) }) else { return }
        switch waiter {
        case .unary(let continuation): continuation.resume(throwing: Unsent(cause: cause))
        case .stream(let continuation): continuation.finish(throwing: RPCError(.unavailable, "could not send the request: \(cause)"))
        }
    }

    private static let lostError = RPCError(.unavailable, "the connection to the gateway was lost")

    /// Fails every waiting request with `error`; with `exceptWriting`, not those still being
    /// written (their writer decides: sent again when the write failed, else lost). With
    /// `unsent`, the gateway read none of them: a call is sent again (``call(_:)``).
    private func failAll(_ error: RPCError, exceptWriting: Bool = false, unsent: Bool = false) {
        let waiters = self.link.withLock { link in
            let ending = link.waiters.filter { !exceptWriting || !link.writing.contains($0.key) }
            for id in ending.keys { link.waiters[id] = nil }
            return Array(ending.values)
        }
        for waiter in waiters {
            if unsent, case .unary(let continuation) = waiter {
                continuation.resume(throwing: Unsent(cause: error))
            } else {
                Self.fail(waiter, error)
            }
        }
    }

    private static func fail(_ waiter: Waiter, _ error: RPCError) {
        switch waiter {
        case .unary(let continuation): continuation.resume(throwing: error)
        case .stream(let continuation): continuation.finish(throwing: error)
        }
    }

    private func send(_ request: TransportRequest, id: RequestID?) async throws {
        guard let writer = self.link.withLock({ $0.writer }) else { return }
        try await writer.send(text: try Self.encode(id: id, request))
    }

    /// The current connection's writer. While the transport is connecting it waits for the
    /// next state change (an event, not a poll); it fails at once when the transport is
    /// offline, closed, or the pin was refused; `limit` (the call's deadline) bounds the wait.
    private func connectedWriter(within limit: Duration, for method: String) async throws(RPCError) -> PinnedWebSocket {
        if let revoked = self.link.withLock({ $0.revoked }) { throw revoked }
        if self.link.withLock({ $0.suspended }) {
            throw Self.suspendedError
        }
        if let writer = self.link.withLock({ $0.writer }) { return writer }
        do {
            return try await withThrowingTaskGroup(of: PinnedWebSocket.self) { group in
                group.addTask { try await self.writerWhenConnected() }
                group.addTask {
                    try await Task.sleep(for: limit)
                    throw RPCError(.timeout, "\(method) found no connection to the gateway within \(limit)")
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError(.cancelled, "the call was cancelled")
        }
    }

    private func writerWhenConnected() async throws(RPCError) -> PinnedWebSocket {
        // The stream yields the state now, then each change: the writer is checked after each.
        for await state in self.broadcast.stream() {
            let (writer, closed, lastError, revoked) = self.link.withLock { ($0.writer, $0.closed, $0.lastError, $0.revoked) }
            if let revoked { throw revoked }
            if let writer { return writer }
            if closed { throw RPCError(.unavailable, "the transport was closed") }
            if state == .suspended { throw Self.suspendedError }
            if let lastError, lastError.code == .pinMismatch { throw lastError }
            if state == .offline {
                throw lastError.map { RPCError(.unavailable, "the gateway is unreachable: \($0.message)") }
                    ?? RPCError(.unavailable, "the gateway is unreachable")
            }
            if Task.isCancelled { throw RPCError(.cancelled, "the call was cancelled") }
        }
        // The broadcast finished: the transport was closed.
        if Task.isCancelled { throw RPCError(.cancelled, "the call was cancelled") }
        throw RPCError(.unavailable, "the transport was closed")
    }

    private static func encode(id: RequestID?, _ request: TransportRequest) throws(RPCError) -> String {
        do {
            // Authentication is the connection's (Bearer at the upgrade), not each envelope's.
            return String(decoding: try ReplyEncoding.request(id: id, method: request.method, params: request.params, auth: nil), as: UTF8.self)
        } catch {
            throw RPCError(.invalidParams, "the parameters of \(request.method) could not be encoded: \(error)")
        }
    }

    private static func json(_ id: RequestID) -> JSONValue {
        switch id {
        case .int(let value): .int(value)
        case .string(let value): .string(value)
        }
    }
}
