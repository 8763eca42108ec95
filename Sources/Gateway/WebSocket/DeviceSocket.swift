import EdgeLimits
import Foundation
import GatewayAPI
import Logging
import NIOCore
import NIOWebSocket
import RPCClient
import RPCCore
import Synchronization

/// One device's WebSocket: each text message one request envelope, each reply one
/// message, as on a service's Unix socket: requests pipelined and answered as they finish,
/// streams replying with `"continues": true`, `rpc.cancel`, and back-pressure (a device that
/// stops reading stops being read, and its streams wait, up to a bound).
///
/// It has no task of its own. ``DeviceSocketHandler`` hands it each message on the
/// socket's event loop, where it is parsed and admitted once (``Admission``) and answered
/// there when it can be: `rpc.ping`, `rpc.describe`, `rpc.cancel`, errors, and a unary call
/// relayed on the loop's own connection to its service, whose reply is written from the
/// same thread. What has to wait runs in tasks that end with it: a stream, a call whose
/// service connection is not open yet, and, in the order they came, requests behind a
/// credential to check with the store (the upgrade's, `gateway.authenticate`, a stale
/// cache). An idle socket is a handler and a keep-alive timer.
final class DeviceSocket: Sendable {
    let gateway: GatewayContext
    let address: String
    let channel: any Channel
    /// Every message to the device goes through it, from the event loop.
    let writer: MessageWriter
    let logger: Logger
    private let opened = ContinuousClock.now
    let state = Mutex(State())
    /// The handler reading the socket (to read again once held reads may go on).
    private let handler: NIOLoopBoundBox<DeviceSocketHandler?>

    struct State {
        var identity: DeviceIdentity?
        var requests: [RequestID: InFlight] = [:]
        var anonymous: [UUID: Task<Void, Never>] = [:]
        var keepAlive: KeepAlive?
        /// Requests served in the order they came, by one task while there are any.
        var waiting: [Waiting] = []
        var serving = false
        /// The credential the upgrade carried, if any, was accepted: requests are taken.
        var reading = false
        /// The credential the upgrade carried was refused: the device hears why in answer to
        /// its first message (or at `--auth-timeout`), not in the same read as the upgrade's
        /// response, which a client may not take apart.
        var refusal: RPCError?
        /// No request is taken any more (a close frame went out or came in, cut off).
        var closing = false
        /// A close frame went out (ours, or the answer to the device's).
        var closeSent = false
        var ended = false
        /// Counted among the WebSockets open (``GatewayMetrics``).
        var counted = false
        var served = 0
        var closeReason: String?
    }

    /// What waits for the in-order path.
    enum Waiting: Sendable {
        /// The credential the upgrade carried: checked before anything else is served.
        case upgradeCredential(String)
        case message(Result<DeviceRequest, RequestHead.Failure>)
    }

    /// A request of this socket still waiting for its reply.
    enum InFlight {
        /// Admitted; its task or call is being started.
        case reserved
        /// Served by a task.
        case task(Task<Void, Never>)
        /// Relayed on the socket's event loop; its reply is written there.
        case direct(RelayedCall)

        func cancel() {
            switch self {
            case .reserved: break
            case .task(let task): task.cancel()
            case .direct(let call): call.cancel()
            }
        }
    }

    init(gateway: GatewayContext, address: String, channel: any Channel, logger: Logger) {
        self.gateway = gateway
        self.address = address
        self.channel = channel
        self.writer = MessageWriter(channel: channel)
        self.logger = logger
        self.handler = .makeEmptyBox(valueType: DeviceSocketHandler.self, eventLoop: channel.eventLoop)
    }

    var identity: DeviceIdentity? { self.state.withLock { $0.identity } }

    /// Starts serving the socket as its upgrade completes, on its event loop: the handler,
    /// the keep-alive, and the credential the upgrade carried (checked first: requests that
    /// come meanwhile wait for it). Without one, the device has `--auth-timeout` to give it.
    func open(token: String?) throws {
        RequestDeadline.on(self.channel) { $0.disarm() }
        let activity = PeerActivity()
        let pipeline = self.channel.pipeline.syncOperations
        try pipeline.addHandler(activity, position: .first)
        let handler = DeviceSocketHandler(socket: self, maximumMessageSize: self.gateway.configuration.limits.maximumMessageSize)
        try pipeline.addHandler(handler)
        self.handler.value = handler
        self.state.withLock { $0.counted = true }
        self.gateway.metrics.socketOpened()
        self.writer.attach()
        self.startKeepAlive(activity)
        if let token {
            self.inOrder(.upgradeCredential(token))
        } else {
            self.state.withLock { $0.reading = true }
            self.logOpened()
            self.requireCredential()
        }
    }

    func logOpened() {
        self.logger.info("websocket opened", metadata: ["remote_address": "\(self.address)", "device_id": "\(self.identity?.deviceId ?? "")"])
    }

    // MARK: Messages, on the event loop

    /// A text message from the device (valid UTF-8, whole). On the loop.
    func received(_ bytes: [UInt8]) {
        // Behind: the upgrade's credential is not checked yet, or a request waits or is being
        // served in order (gateway.authenticate: what follows it needs its answer).
        let (closing, behind, refusal) = self.state.withLock { ($0.closing, !$0.reading || $0.serving || !$0.waiting.isEmpty, $0.refusal) }
        guard !closing else { return }
        let parsed = DeviceRequest.parse(bytes)
        if let refusal { return self.cutOff(parsed.requestID, refusal) }
        // Behind a request that waits, in order; otherwise here, if it can be answered here.
        if behind || !self.serveOnLoop(parsed) { self.inOrder(.message(parsed)) }
    }

    /// A binary message: an error message, then the socket is closed (1003).
    func receivedBinary() {
        self.writer.write(Array(ReplyEncoding.error(id: nil, RPCError(.invalidFrame, "messages must be text frames, each one JSON request envelope"))))
        self.close(.unacceptableData, reason: "text messages only", why: "binary message")
    }

    /// Serves a request on the loop if it needs nothing to wait for: false when it must
    /// go the in-order way (its credential is to be checked with the store, or it is
    /// `gateway.authenticate`).
    private func serveOnLoop(_ parsed: Result<DeviceRequest, RequestHead.Failure>) -> Bool {
        let request: DeviceRequest
        switch parsed {
        case .failure(let failure):
            self.writer.write(Array(ReplyEncoding.error(id: failure.id, failure.error)))
            return true
        case .success(let parsed):
            request = parsed
        }
        var identity: DeviceIdentity?
        if let known = self.identity {
            // Checked again for every request, in the credential table (or, while it does not
            // follow the store, a cache of a few seconds): otherwise the in-order path asks the store.
            guard let current = self.gateway.relay.authenticator.cached(known) else { return false }
            identity = current
        }
        if case .authenticate = self.serve(request, identity: identity, onLoop: true) { return false }
        return true
    }

    /// Whether reading waits: the device is not reading its replies, or requests pile up
    /// behind one that waits. On the loop.
    func holdsReads(writable: Bool) -> Bool {
        let (closing, waiting) = self.state.withLock { ($0.closing, $0.waiting.count) }
        // Closing: read on, to take the device's close frame (everything else is dropped).
        return !closing && (!writable || waiting >= self.gateway.configuration.limits.maximumInFlight)
    }

    /// Whether the socket takes no more requests. On the loop.
    var isClosing: Bool { self.state.withLock { $0.closing } }

    // MARK: In order

    /// Queues what must be served in the order it came, and starts the task that serves it.
    private func inOrder(_ item: Waiting) {
        let start = self.state.withLock { state -> Bool in
            guard !state.closing else { return false }
            state.waiting.append(item)
            guard !state.serving else { return false }
            state.serving = true
            return true
        }
        if start { Task { await self.serveInOrder() } }
    }

    /// Serves the queue until it is empty; the task ends then. Reading, if it was held for
    /// the queue, goes on after each item.
    private func serveInOrder() async {
        let handler = self.handler
        defer { self.channel.eventLoop.execute { handler.value?.resumeReading() } }
        while let next = self.state.withLock({ state -> Waiting? in
            guard !state.closing, !state.waiting.isEmpty else {
                state.waiting = []
                state.serving = false
                return nil
            }
            return state.waiting.removeFirst()
        }) {
            await self.serveInOrder(next)
            self.channel.eventLoop.execute { handler.value?.resumeReading() }
        }
    }

    private func serveInOrder(_ next: Waiting) async {
        // Came while the upgrade's credential was being checked, and it was refused.
        if case .message(let parsed) = next, let refusal = self.state.withLock({ $0.refusal }) {
            return self.cutOff(parsed.requestID, refusal)
        }
        switch next {
        case .upgradeCredential(let token):
            guard await self.authenticate(token, requestID: nil, refuseLater: true) != nil else {
                // Refused (the device hears why when it speaks), or the store could not say:
                // the socket ends, as it would with no credential (the device tries again).
                if !self.isClosing, self.state.withLock({ $0.refusal == nil }) {
                    self.close(.normalClosure, reason: "the credential could not be checked; try again shortly")
                }
                return
            }
            self.state.withLock { $0.reading = true }
            self.logOpened()
        case .message(.failure(let failure)):
            await self.send(ReplyEncoding.error(id: failure.id, failure.error))
        case .message(.success(let request)):
            var identity = self.identity
            if let known = identity {
                guard let current = await self.authenticate(known.token, requestID: request.head.id) else { return }
                identity = current
            }
            if case .authenticate(let params) = self.serve(request, identity: identity, onLoop: false) {
                await self.authenticateMessage(request.head.id, params)
            }
        }
    }

    // MARK: Serving an admitted request

    enum Served {
        case done
        /// `gateway.authenticate`, which waits for the store: the in-order path's.
        case authenticate(AuthenticateParams)
    }

    /// Admits a request once and serves it: the gateway's own methods at once, a relayed
    /// one in an in-flight slot, on the loop's connection when `onLoop` and it can start
    /// there, else by a task.
    private func serve(_ request: DeviceRequest, identity: DeviceIdentity?, onLoop: Bool) -> Served {
        let id = request.head.id
        guard request.head.auth == nil else {
            self.reply(id, RPCError(.invalidRequest, "on a WebSocket the credential is given once, at the upgrade or with gateway.authenticate; leave \"auth\" out"))
            return .done
        }
        let admission: Admission
        do {
            admission = try self.gateway.admit(request, identity: identity, transport: .webSocket)
        } catch {
            self.reply(id, error)
            return .done
        }
        switch admission {
        case .ping:
            self.state.withLock { $0.served += 1 }
            if let id { self.writer.write(ReplyEncoding.resultBytes(id: id, encoded: self.gateway.ping())) }
        case .describe(let params):
            self.state.withLock { $0.served += 1 }
            if let id { self.writer.write(ReplyEncoding.resultBytes(id: id, encoded: GatewayContext.encoded(self.gateway.describe(params)))) }
        case .cancel(let target):
            self.cancel(target, id: id)
        case .authenticate(let params):
            return .authenticate(params)
        case .relayed(let method):
            guard self.reserve(id) else { return .done }
            if method.kind == .stream, let id {
                self.start(id) { await self.stream(method, id: id, params: request.params, identity: identity) }
            } else if onLoop, let id, let identity, self.callOnLoop(method, id: id, params: request.params, identity: identity) {
                break
            } else {
                self.startCall(method, request, identity: identity)
            }
        }
        return .done
    }

    /// Takes an in-flight slot (under the limit, the id not in use), or answers why not.
    private func reserve(_ id: RequestID?) -> Bool {
        let limit = self.gateway.configuration.limits.maximumInFlight
        let refusal = self.state.withLock { state -> RPCError? in
            if let id, state.requests[id] != nil {
                return RPCError(.invalidRequest, "a request with id \(id) is still in flight on this connection")
            }
            guard state.requests.count + state.anonymous.count < limit else {
                return RPCError(.limitExceeded, "too many requests in flight on this connection (limit \(limit)); wait for replies")
            }
            if let id { state.requests[id] = .reserved }
            state.served += 1
            return nil
        }
        if let refusal { self.reply(id, refusal) }
        return refusal == nil
    }

    /// Relays a unary call on the socket's event loop, if it can start at once there; its
    /// reply is written from the same thread when the service's comes.
    private func callOnLoop(_ method: DeviceMethod, id: RequestID, params: JSONValue?, identity: DeviceIdentity) -> Bool {
        let started = ContinuousClock.now
        let call = self.gateway.relay.callNow(method, params: params, identity: identity, on: self.channel.eventLoop) { result in
            self.answered(id, result)
            self.logger.debug("request", metadata: [
                "remote_address": "\(self.address)", "device_id": "\(identity.deviceId)", "method": "\(method.name)",
                "duration_ms": "\(DeviceAPI.milliseconds(since: started))", "path": "event-loop",
            ])
        }
        guard let call else { return false }
        self.state.withLock { state in
            if case .reserved? = state.requests[id] { state.requests[id] = .direct(call) }  // else answered already
        }
        return true
    }

    /// Writes the reply of a call relayed on the event loop; the request stays in flight
    /// (counted against the limit) until its reply has gone to the network.
    private func answered(_ id: RequestID, _ result: Result<EncodedJSON, RPCError>) {
        guard !self.state.withLock({ $0.closing }) else {
            // Closed (the device is gone, or was cut off): nothing more goes to it.
            self.state.withLock { _ = $0.requests.removeValue(forKey: id) }
            return
        }
        let bytes = switch result {
        case .success(let result): ReplyEncoding.resultBytes(id: id, encoded: result)
        case .failure(let error): Array(ReplyEncoding.error(id: id, error))
        }
        self.writer.write(bytes).whenComplete { _ in
            self.state.withLock { _ = $0.requests.removeValue(forKey: id) }
        }
    }

    /// A unary call served by a task of its own.
    private func startCall(_ method: DeviceMethod, _ request: DeviceRequest, identity: DeviceIdentity?) {
        let id = request.head.id
        let work: @Sendable () async -> Void = {
            let started = ContinuousClock.now
            do throws(RPCError) {
                let result = try await self.gateway.call(method, params: request.params, identity: identity, address: self.address, on: self.channel.eventLoop)
                if let id { await self.send(Data(ReplyEncoding.resultBytes(id: id, encoded: result))) }
            } catch {
                await self.send(ReplyEncoding.error(id: id, error))
            }
            self.logger.debug("request", metadata: [
                "remote_address": "\(self.address)", "device_id": "\(identity?.deviceId ?? "")", "method": "\(method.name)",
                "duration_ms": "\(DeviceAPI.milliseconds(since: started))", "path": "task",
            ])
        }
        if let id { self.start(id, work) } else { self.startAnonymous(work) }
    }

    /// Runs a request as a task, known by its id until it ends.
    private func start(_ id: RequestID, _ work: @escaping @Sendable () async -> Void) {
        self.state.withLock { state in
            guard !state.closing else {
                state.requests[id] = nil
                return
            }
            state.requests[id] = .task(Task {
                await work()
                self.state.withLock { _ = $0.requests.removeValue(forKey: id) }
            })
        }
    }

    private func startAnonymous(_ work: @escaping @Sendable () async -> Void) {
        let key = UUID()
        self.state.withLock { state in
            guard !state.closing else { return }
            state.anonymous[key] = Task {
                await work()
                self.state.withLock { _ = $0.anonymous.removeValue(forKey: key) }
            }
        }
    }

    /// `rpc.cancel`: ends a request of this socket still in flight with `cancelled`.
    private func cancel(_ target: CancelParams, id: RequestID?) {
        let request = self.state.withLock { $0.requests[target.id] }
        request?.cancel()
        if let id, let reply = try? ReplyEncoding.result(id: id, CancelResult(cancelled: request != nil)) { self.writer.write(Array(reply)) }
    }

    // MARK: Closing

    /// Closes the socket from the server's side: a close frame with `code`, nothing taken
    /// after it, and the connection closed once the device answers it or after 2 s.
    func close(_ code: WebSocketErrorCode, reason: String, why: String? = nil) {
        let first = self.state.withLock { state -> Bool in
            defer { state.closeSent = true }
            state.closing = true
            if state.closeReason == nil { state.closeReason = why ?? reason }
            return !state.closeSent
        }
        guard first else { return }
        self.writer.sendClose(code, reason: reason)
        self.closeSoon()
    }

    /// Closes the connection in 2 s if the device has not answered the close by then.
    private func closeSoon() {
        let channel = self.channel
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }

    /// The device's close frame: answered with one (unless the server began the close),
    /// then the connection is closed. On the loop.
    func peerClosed(_ data: ByteBuffer) {
        // The device is leaving: what it asked for is ended now (its streams first of all:
        // the push service sees it gone at once), not when the connection has closed.
        let requests = self.state.withLock { state -> [InFlight] in
            state.closing = true
            if state.closeReason == nil { state.closeReason = "closed by the device" }
            return Array(state.requests.values) + state.anonymous.values.map(InFlight.task)
        }
        for request in requests { request.cancel() }
        let channel = self.channel
        if self.writer.isClosed {
            channel.close(promise: nil)
        } else {
            self.state.withLock { $0.closeSent = true }
            self.writer.sendClose(Self.validClose(data) ? .normalClosure : .protocolError) { channel.close(promise: nil) }
            // A device that sends its close and then reads nothing: not waited for.
            self.closeSoon()
        }
    }

    /// A close frame's body (RFC 6455, 5.5.1 and 7.4): empty, or a code a peer may send and
    /// a reason in UTF-8.
    static func validClose(_ data: ByteBuffer) -> Bool {
        guard data.readableBytes > 0 else { return true }
        guard data.readableBytes >= 2, let code = data.getInteger(at: data.readerIndex, as: UInt16.self) else { return false }
        guard (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code) else { return false }
        let reason = Array(data.readableBytesView.dropFirst(2))
        return String(validating: reason, as: UTF8.self) != nil
    }

    /// Why the connection failed, for the log line when it ends.
    func noteError(_ error: any Error) {
        self.state.withLock { state in
            state.closing = true
            state.closeSent = true
            if state.closeReason == nil { state.closeReason = "\(error)" }
        }
        self.writer.markClosed()
        self.closeSoon()
    }

    /// The connection is gone: every request still in flight is cancelled. On the loop.
    func ended() {
        let ended = self.state.withLock { state -> (requests: [InFlight], keepAlive: KeepAlive?, served: Int, identity: DeviceIdentity?, reason: String?)? in
            guard !state.ended else { return nil }
            state.ended = true
            if state.counted { self.gateway.metrics.socketClosed() }
            state.closing = true
            defer {
                state.requests = [:]
                state.anonymous = [:]
                state.waiting = []
            }
            return (Array(state.requests.values) + state.anonymous.values.map(InFlight.task), state.keepAlive, state.served, state.identity, state.closeReason)
        }
        guard let ended else { return }
        ended.keepAlive?.timer?.cancel()
        if let identity = ended.identity { self.gateway.credentialWatch.unwatch(ObjectIdentifier(self), family: identity.family) }
        for request in ended.requests { request.cancel() }
        let reason = ended.keepAlive?.deadPeer == true ? "no answer to ping" : (ended.reason ?? "closed by the device")
        self.logger.info("websocket closed", metadata: [
            "remote_address": "\(self.address)", "device_id": "\(ended.identity?.deviceId ?? "")", "requests": "\(ended.served)",
            "duration_ms": "\(DeviceAPI.milliseconds(since: self.opened))", "reason": "\(reason)",
        ])
    }

    // MARK: Writing

    func reply(_ id: RequestID?, _ error: RPCError) {
        self.writer.write(Array(ReplyEncoding.error(id: id, error)))
    }

    /// Writes one message and waits until it has gone to the network: a task that
    /// writes to a device that does not read waits (back-pressure).
    func send(_ data: Data) async {
        guard !data.isEmpty else { return }
        do {
            try await self.writer.write(Array(data)).get()
        } catch {
            self.logger.debug("reply not written", metadata: ["remote_address": "\(self.address)", "error": "\(error)"])
        }
    }

    // MARK: Keep-alive

    /// One timer per socket, on its event loop, pings the device every `--ping-interval`,
    /// and closes the socket when nothing at all came from it since the previous ping (a
    /// dead peer: phones report dead sockets as alive for minutes). A timer, not a task
    /// that sleeps: thousands of idle sockets each hold one, and a timer weighs far less
    /// than a suspended task. The credential is checked again by the gateway's
    /// ``CredentialWatch``, a family at a time. On the loop.
    private func startKeepAlive(_ activity: PeerActivity) {
        let ping = self.gateway.configuration.limits.pingInterval
        let channel = self.channel
        let lastRead = NIOLoopBound(activity, eventLoop: channel.eventLoop)
        let timer = channel.eventLoop.scheduleRepeatedTask(initialDelay: TimeAmount(ping), delay: TimeAmount(ping)) { timer in
            let due = self.state.withLock { state -> KeepAlive.Due in
                guard !state.closing else { return .nothing }
                return state.keepAlive?.tick(lastRead: lastRead.value.lastRead) ?? .nothing
            }
            switch due {
            case .close:
                timer.cancel()
                self.logger.info("websocket peer gone", metadata: ["remote_address": "\(self.address)", "device_id": "\(self.identity?.deviceId ?? "")", "ping_interval_s": "\(ping.seconds)"])
                channel.close(promise: nil)
            case .ping:
                channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer()), promise: nil)
            case .nothing:
                break
            }
        }
        self.state.withLock { state in
            if state.closing { timer.cancel() } else { state.keepAlive = KeepAlive(timer: timer) }
        }
    }
}

extension Result<DeviceRequest, RequestHead.Failure> {
    /// The request's id, read or not.
    var requestID: RequestID? {
        switch self {
        case .success(let request): request.head.id
        case .failure(let failure): failure.id
        }
    }
}
