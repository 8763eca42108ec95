import Foundation
import GatewayAPI
import Logging
import NIOCore
import NIOWebSocket
import RPCClient
import RPCCore
import Synchronization
import WSCore

/// One device's WebSocket: each text message one request envelope, each reply one
/// message, as on a service's Unix socket: requests pipelined and answered as they finish,
/// streams replying with `"continues": true`, `rpc.cancel`, and back-pressure (a device that
/// stops reading stops being read, and its streams wait, up to a bound).
final class DeviceSocket: Sendable {
    let gateway: GatewayContext
    let address: String
    let channel: any Channel
    let outbound: WebSocketOutboundWriter
    /// Replies written from the event loop (streams', and calls answered there).
    let writer: MessageWriter
    let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var identity: DeviceIdentity?
        var requests: [RequestID: InFlight] = [:]
        var anonymous: [UUID: Task<Void, Never>] = [:]
        var keepAlive: KeepAlive?
        /// Reading messages: the credential given at the upgrade, if any, was accepted.
        var reading = false
        var closing = false
        var served = 0
    }

    /// A request of this socket still waiting for its reply.
    private enum InFlight {
        /// Served by a task of this socket.
        case task(Task<Void, Never>)
        /// Relayed on the socket's event loop (``DirectRelay``); nil while the call starts.
        case direct(RelayedCall?)

        var task: Task<Void, Never>? {
            if case .task(let task) = self { return task }
            return nil
        }

        func cancel() {
            switch self {
            case .task(let task): task.cancel()
            case .direct(let call): call?.cancel()
            }
        }
    }

    init(gateway: GatewayContext, address: String, channel: any Channel, outbound: WebSocketOutboundWriter, logger: Logger) {
        self.gateway = gateway
        self.address = address
        self.channel = channel
        self.outbound = outbound
        self.writer = MessageWriter(channel: channel)
        self.logger = logger
    }

    var identity: DeviceIdentity? { self.state.withLock { $0.identity } }

    /// Serves the socket until the device closes it, is cut off, or the gateway stops.
    /// Errors of the WebSocket itself (a message too large, invalid UTF-8) are rethrown:
    /// WSCore closes the socket with their close code.
    func run(inbound: WebSocketInboundStream, token: String?) async throws {
        let started = ContinuousClock.now
        RequestDeadline.on(self.channel) { $0.disarm() }
        self.startKeepAlive()
        if let token {
            guard await self.authenticate(token, requestID: nil) != nil else { return }
        }
        self.logger.info("websocket opened", metadata: ["remote_address": "\(self.address)", "device_id": "\(self.identity?.deviceId ?? "")"])
        var closeReason = "closed by the device"
        defer { self.state.withLock { $0.keepAlive?.timer?.cancel() } }
        self.state.withLock { $0.reading = true }
        if self.identity == nil { self.requireCredential() }
        do {
            for try await message in inbound.messages(maxSize: self.gateway.configuration.limits.maximumMessageSize) {
                if self.state.withLock({ $0.closing }) { break }
                // Gone: what it sent before it went, still buffered here, has no one to
                // answer (a client that pipelined thousands of requests, then closed).
                guard self.channel.isActive else { closeReason = "closed by the device with requests unread"; break }
                switch message {
                case .binary:
                    closeReason = "binary message"
                    await self.send(ReplyEncoding.error(id: nil, RPCError(.invalidFrame, "messages must be text frames, each one JSON request envelope")))
                    try? await self.outbound.close(.unacceptableData, reason: "text messages only")
                    return await self.finish(started: started, reason: closeReason)
                case .text(let text):
                    await self.receive(Array(text.utf8))
                }
            }
        } catch {
            await self.finish(started: started, reason: "\(error)")
            throw error
        }
        await self.finish(started: started, reason: closeReason)
    }

    private func finish(started: ContinuousClock.Instant, reason: String) async {
        let (requests, keepAlive, served, identity) = self.state.withLock { state in
            state.closing = true
            defer { state.requests = [:]; state.anonymous = [:] }
            return (Array(state.requests.values) + state.anonymous.values.map(InFlight.task), state.keepAlive, state.served, state.identity)
        }
        keepAlive?.timer?.cancel()
        if let identity { self.gateway.credentialWatch.unwatch(ObjectIdentifier(self), family: identity.family) }
        let reason = keepAlive?.deadPeer == true ? "no answer to ping" : reason
        for request in requests { request.cancel() }
        for task in requests.compactMap(\.task) { await task.value }
        self.logger.info("websocket closed", metadata: [
            "remote_address": "\(self.address)", "device_id": "\(identity?.deviceId ?? "")", "requests": "\(served)",
            "duration_ms": "\(DeviceAPI.milliseconds(since: started))", "reason": "\(reason)",
        ])
    }

    // MARK: Requests

    private func receive(_ bytes: [UInt8]) async {
        let head: RequestHead
        let params: JSONValue?
        switch RequestHead.parseRequest(bytes: bytes) {
        case .success(let parsed): (head, params) = parsed
        case .failure(let failure):
            await self.send(ReplyEncoding.error(id: failure.id, failure.error))
            return
        }
        if head.auth != nil {
            await self.reply(head.id, error: RPCError(.invalidRequest, "on a WebSocket the credential is given once, at the upgrade or with gateway.authenticate; leave \"auth\" out"))
            return
        }
        switch head.method {
        case Builtin.cancel.name:
            await self.cancel(head.id, params: params)
            return
        case GatewayMethods.authenticate.name:
            await self.authenticateMessage(head.id, params: params)
            return
        default:
            break
        }
        // The credential is checked again (from a cache of a few seconds) for every request.
        var identity = self.identity
        if let known = identity {
            guard let current = await self.authenticate(known.token, requestID: head.id) else { return }
            identity = current
        }
        let method: DeviceMethod?
        do {
            method = self.gateway.relay.allowlist.method(named: head.method) != nil ? try self.gateway.relay.admit(head.method, as: identity?.caller) : nil
        } catch {
            await self.reply(head.id, error: error)
            return
        }
        let admitted: Bool = self.state.withLock { state in
            guard state.requests.count + state.anonymous.count < self.gateway.configuration.limits.maximumInFlight else { return false }
            if let id = head.id, state.requests[id] != nil { return false }
            return true
        }
        guard admitted else {
            let duplicate = head.id.map { id in self.state.withLock { $0.requests[id] != nil } } ?? false
            await self.reply(head.id, error: duplicate
                ? RPCError(.invalidRequest, "a request with id \(head.id!) is still in flight on this connection")
                : RPCError(.limitExceeded, "too many requests in flight on this connection (limit \(self.gateway.configuration.limits.maximumInFlight)); wait for replies"))
            return
        }
        if let method, method.kind == .stream {
            guard let id = head.id else {
                await self.reply(nil, error: RPCError(.invalidRequest, "\(head.method) is a stream; give the request an id"))
                return
            }
            let identity = identity
            self.start(id: id) { await self.stream(method, id: id, params: params, identity: identity) }
        } else {
            let identity = identity
            let work: @Sendable () async -> Void = {
                let started = ContinuousClock.now
                do throws(RPCError) {
                    let result = try await self.gateway.answer(head, params: params, identity: identity, address: self.address, transport: .webSocket, on: self.channel.eventLoop)
                    if let id = head.id { await self.send(Data(ReplyEncoding.resultBytes(id: id, encoded: result))) }
                } catch {
                    await self.reply(head.id, error: error)
                }
                self.logger.debug("request", metadata: [
                    "remote_address": "\(self.address)", "device_id": "\(identity?.deviceId ?? "")", "method": "\(head.method)",
                    "duration_ms": "\(DeviceAPI.milliseconds(since: started))", "path": "task",
                ])
            }
            if let id = head.id { self.start(id: id, work) } else { self.startAnonymous(work) }
        }
    }

    /// Runs a request as a task of this socket, known by its id until it ends.
    private func start(id: RequestID, _ work: @escaping @Sendable () async -> Void) {
        self.state.withLock { state in
            state.served += 1
            state.requests[id] = .task(Task {
                await work()
                self.state.withLock { _ = $0.requests.removeValue(forKey: id) }
            })
        }
    }

    private func startAnonymous(_ work: @escaping @Sendable () async -> Void) {
        let key = UUID()
        self.state.withLock { state in
            state.served += 1
            state.anonymous[key] = Task {
                await work()
                self.state.withLock { _ = $0.anonymous.removeValue(forKey: key) }
            }
        }
    }

    /// `rpc.cancel`: ends a request of this socket still in flight with `cancelled`.
    private func cancel(_ id: RequestID?, params: JSONValue?) async {
        let target: CancelParams
        do {
            target = try ParamsDecoding.decode(CancelParams.self, params: params)
        } catch {
            await self.reply(id, error: error)
            return
        }
        let request = self.state.withLock { $0.requests[target.id] }
        request?.cancel()
        if let id { await self.send((try? ReplyEncoding.result(id: id, CancelResult(cancelled: request != nil))) ?? Data()) }
    }

    // MARK: On the event loop

    /// Answers a request on the socket's event loop, as ``DirectRelay`` reads it, when it
    /// can be answered there at once: `rpc.ping`, or a unary call of the device whose
    /// credential was checked within the period (no store lookup to wait for), under the
    /// in-flight limit, with the service's connection open and the socket writable. The
    /// reply is written from the same thread when the service's comes. Whether it took the
    /// request: one it did not (every error included) goes the general way, ``receive(_:)``,
    /// which answers as it always has.
    func answerOnLoop(_ bytes: [UInt8]) -> Bool {
        guard self.state.withLock({ $0.reading && !$0.closing }) else { return false }
        guard case .success(let (head, params)) = RequestHead.parseRequest(bytes: bytes), head.auth == nil, let id = head.id,
              self.channel.isWritable else { return false }
        var identity: DeviceIdentity?
        if let known = self.identity {
            // The general path checks the credential with the store once the cache is stale.
            guard let current = self.gateway.relay.authenticator.cached(known.token) else { return false }
            identity = current
        }
        if head.method == Builtin.ping.name {
            self.state.withLock { $0.served += 1 }
            self.writer.write(ReplyEncoding.resultBytes(id: id, encoded: self.gateway.ping()))
            return true
        }
        guard let identity, let method = self.gateway.relay.allowlist.method(named: head.method), method.kind != .stream,
              (try? self.gateway.relay.admit(head.method, as: identity.caller)) != nil else { return false }
        let limit = self.gateway.configuration.limits.maximumInFlight
        guard self.state.withLock({ state in
            guard !state.closing, state.requests[id] == nil, state.requests.count + state.anonymous.count < limit else { return false }
            state.requests[id] = .direct(nil)
            state.served += 1
            return true
        }) else { return false }
        let started = ContinuousClock.now
        let call = self.gateway.relay.callNow(method, params: params, identity: identity, on: self.channel.eventLoop) { result in
            self.answered(id, result)
            self.logger.debug("request", metadata: [
                "remote_address": "\(self.address)", "device_id": "\(identity.deviceId)", "method": "\(head.method)",
                "duration_ms": "\(DeviceAPI.milliseconds(since: started))", "path": "event-loop",
            ])
        }
        self.state.withLock { state in
            guard case .direct(nil)? = state.requests[id] else { return }  // answered already
            if let call {
                state.requests[id] = .direct(call)
            } else {
                state.requests[id] = nil
                state.served -= 1
            }
        }
        return call != nil
    }

    /// Writes the reply of a request answered on the event loop; the request stays in
    /// flight (counted against the limit) until its reply has gone to the network.
    private func answered(_ id: RequestID, _ result: Result<EncodedJSON, RPCError>) {
        let closing = self.state.withLock { $0.closing }
        guard !closing else {
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

    // MARK: Streams

    private func stream(_ method: DeviceMethod, id: RequestID, params: JSONValue?, identity: DeviceIdentity?) async {
        guard let connections = self.gateway.relay.streams[method.service] else {
            return await self.reply(id, error: RPCError(.internal, "the server could not handle this request; its administrator will find the details in its journal"))
        }
        let lease = connections.acquire(on: self.channel.eventLoop)
        let forwarder = StreamForwarder(writer: self.writer, id: id, limit: self.gateway.configuration.limits.maximumQueuedReplies, service: method.service)
        let started = ContinuousClock.now
        var metadata: Logger.Metadata = ["remote_address": "\(self.address)", "device_id": "\(identity?.deviceId ?? "")", "method": "\(method.name)"]
        self.logger.debug("stream opened", metadata: metadata)
        let relayed: RelayedStream
        do throws(RPCError) {
            relayed = try await lease.client.relayStream(method.name, params: params, auth: self.gateway.relay.forwardedAuth(method, identity)) { event in
                forwarder.deliver(event)
            }
        } catch {
            await connections.release(lease)
            await self.reply(id, error: ServiceRelay.presentable(error, service: method.service))
            return
        }
        let outcome = await withTaskCancellationHandler {
            await forwarder.ended()
        } onCancel: {
            forwarder.cancel()
        }
        switch outcome {
        case .ended:
            break
        case .overflowed:
            relayed.cancel()
        case .cancelled:
            // rpc.cancel, or the socket is closing: the service is told to stop.
            relayed.cancel()
            await self.reply(id, error: RPCError(.cancelled, "the request was cancelled"))
        }
        await connections.release(lease)
        metadata["duration_ms"] = "\(DeviceAPI.milliseconds(since: started))"
        metadata["outcome"] = "\(outcome)"
        self.logger.debug("stream ended", metadata: metadata)
    }

    // MARK: Credentials

    /// The device of `token`, or nil after telling the device why not (and cutting the
    /// socket off when an identity it had is no longer valid).
    private func authenticate(_ token: String, requestID: RequestID?, fresh: Bool = false) async -> DeviceIdentity? {
        do {
            let identity = try await self.gateway.relay.authenticator.identify(token, fresh: fresh)
            let first: Bool = self.state.withLock { state in
                defer { state.identity = identity }
                return state.identity == nil
            }
            if first { self.watchCredential(identity) }
            return identity
        } catch {
            if error.code == .unauthorized || error.code == .deviceRevoked {
                // A wrong token costs its address; a revoked one is known, not a guess.
                if error.code == .unauthorized { _ = self.gateway.rateLimiter.allow(self.address) }
                await self.cutOff(requestID, error)
            } else {
                await self.reply(requestID, error: ServiceRelay.presentable(error, service: "store"))
            }
            return nil
        }
    }

    private func authenticateMessage(_ id: RequestID?, params: JSONValue?) async {
        guard self.identity == nil else {
            await self.reply(id, error: RPCError(.invalidRequest, "this connection is authenticated already"))
            return
        }
        guard self.gateway.rateLimiter.allow(self.address) else {
            await self.reply(id, error: DeviceAPI.rateLimited)
            return
        }
        let given: AuthenticateParams
        do {
            given = try ParamsDecoding.decode(AuthenticateParams.self, params: params)
        } catch {
            await self.reply(id, error: error)
            return
        }
        guard let identity = await self.authenticate(given.token, requestID: id) else { return }
        if let id {
            await self.send((try? ReplyEncoding.result(id: id, AuthenticateResult(deviceId: identity.deviceId, family: identity.family, role: identity.caller))) ?? Data())
        }
    }

    /// One timer per socket, on its event loop, pings the device every `--ping-interval`,
    /// and closes the socket when nothing at all came from it since the previous ping (a
    /// dead peer: phones report dead sockets as alive for minutes). A timer, not a task
    /// that sleeps: thousands of idle sockets each hold one, and a timer weighs far less
    /// than a suspended task. This is why hummingbird-websocket's auto-ping, a sleeping
    /// task per socket, is off (docs/architecture.md). The credential is checked again by
    /// the gateway's ``CredentialWatch``, a family at a time.
    private func startKeepAlive() {
        let ping = self.gateway.configuration.limits.pingInterval
        let channel = self.channel
        channel.eventLoop.execute {
            let handler = PeerActivity()
            guard (try? channel.pipeline.syncOperations.addHandler(handler, position: .first)) != nil else { return }
            self.writer.attach()
            DirectRelay.install(on: channel, for: self)
            let activity = NIOLoopBound(handler, eventLoop: channel.eventLoop)
            let timer = channel.eventLoop.scheduleRepeatedTask(initialDelay: TimeAmount(ping), delay: TimeAmount(ping)) { timer in
                let due = self.state.withLock { state -> KeepAlive.Due in
                    guard !state.closing else { return .nothing }
                    return state.keepAlive?.tick(lastRead: activity.value.lastRead) ?? .nothing
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

    /// A socket opened without a credential has `--auth-timeout` to give one
    /// (`gateway.authenticate`); then it is closed with 1008.
    private func requireCredential() {
        let timeout = self.gateway.configuration.limits.authenticationTimeout
        self.channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            guard self.identity == nil, !self.state.withLock({ $0.closing }) else { return }
            self.logger.info("websocket closed: no credential in time", metadata: [
                "remote_address": "\(self.address)", "auth_timeout_s": "\(timeout.seconds)",
            ])
            Task {
                await self.send(ReplyEncoding.error(id: nil, RPCError(.unauthorized, "no credential was given within \(timeout.seconds) s; authenticate with gateway.authenticate right after opening")))
                try? await self.outbound.close(.policyViolation, reason: "no credential in time")
                let channel = self.channel
                channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
            }
        }
    }

    /// From the first authentication on, the gateway's credential watch checks this
    /// socket's credential again every `--credential-recheck`.
    private func watchCredential(_ identity: DeviceIdentity) {
        self.gateway.credentialWatch.watch(ObjectIdentifier(self), identity) { error in
            await self.cutOff(nil, error)
        }
    }

    /// Tells the device why, then closes the socket (policy violation).
    private func cutOff(_ id: RequestID?, _ error: RPCError) async {
        let requests = self.state.withLock { state -> [InFlight] in
            state.closing = true
            return Array(state.requests.values) + state.anonymous.values.map(InFlight.task)
        }
        for request in requests { request.cancel() }
        // The device named even when it never authenticated here (a revoked token at the
        // upgrade): the store says whose credential it was.
        let deviceId = self.identity?.deviceId ?? error.data?["deviceId"]?.stringValue ?? ""
        self.logger.notice("websocket cut off", metadata: [
            "remote_address": "\(self.address)", "device_id": "\(deviceId)", "reason": "\(error.code)",
        ])
        await self.send(ReplyEncoding.error(id: id, error))
        try? await self.outbound.close(.policyViolation, reason: error.code == .deviceRevoked ? "device revoked" : "credential not valid")
        // A device that does not answer the close is not waited for.
        let channel = self.channel
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }

    // MARK: Writing

    private func reply(_ id: RequestID?, error: RPCError) async {
        await self.send(ReplyEncoding.error(id: id, error))
    }

    /// Writes one message; waits while the device is not reading (back-pressure).
    private func send(_ data: Data) async {
        guard !data.isEmpty else { return }
        // A cancelled request still owes its peer a last reply (`cancelled`), and NIO's
        // writer refuses to write from a cancelled task: write from a task of its own.
        if Task.isCancelled {
            await Task { await self.write(data) }.value
        } else {
            await self.write(data)
        }
    }

    private func write(_ data: Data) async {
        do {
            try await self.outbound.write(.text(String(decoding: data, as: UTF8.self)))
        } catch {
            self.logger.debug("reply not written", metadata: ["remote_address": "\(self.address)", "error": "\(error)"])
        }
    }
}
