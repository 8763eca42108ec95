import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import RPCCore

/// One connection of the gateway, under TLS: HTTP/1.1 served by Hummingbird's responder,
/// or a WebSocket once the first request asks for one and is accepted.
///
/// Hummingbird's `HTTP1WebSocketUpgradeChannel` does the same with three things the
/// internet's edge cannot have, hence this channel of our own built from the same parts
/// (docs/architecture.md, "The gateway's connections"): a malformed first request was
/// left unanswered until the request timeout (and logged at `error`); a refused upgrade
/// got a bare 400 with no reason and no HSTS; and nothing of ours could sit on the
/// WebSocket's frames before the first of them was read (the unmasked-frame check).
/// An accepted WebSocket is then served by handlers of its own on the channel
/// (``DeviceSocket``), not by a task: this connection's task ends as the upgrade completes.
struct EdgeChannel: ServerChildChannel, HTTPChannelHandler {
    /// What the first request asked for, once it has been decided.
    enum Outcome: Sendable {
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// Served by the handlers the upgrade installed, without this connection's task.
        case webSocket
        case refusedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, UpgradeRefusal)
    }

    /// Whether a request for a WebSocket is taken, and what serves it: `accept`'s body
    /// sets the socket up on the channel, on its event loop, as the upgrade completes.
    enum UpgradeDecision: Sendable {
        case accept(@Sendable (any Channel) throws -> Void)
        case refuse(UpgradeRefusal)
    }

    /// A refused upgrade's answer: its status and the wire's error.
    struct UpgradeRefusal: Sendable {
        var status: HTTPResponse.Status
        var error: RPCError
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    let responder: Responder
    let limits: GatewayLimits
    let shouldUpgrade: @Sendable (HTTPRequest, any Channel) -> UpgradeDecision

    init(limits: GatewayLimits, responder: @escaping Responder, shouldUpgrade: @escaping @Sendable (HTTPRequest, any Channel) -> UpgradeDecision) {
        self.limits = limits
        self.responder = Self.redirectingLateUpgrades(responder)
        self.shouldUpgrade = shouldUpgrade
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let decision = NIOLoopBoundBox<UpgradeDecision?>(nil, eventLoop: channel.eventLoop)
            let upgrader = NIOTypedWebSocketServerUpgrader<Outcome>(
                maxFrameSize: self.limits.maximumMessageSize,
                shouldUpgrade: { channel, head in
                    // The guard has checked the head (HTTP/1.1, the key, the version).
                    let decided: UpgradeDecision
                    if let request = try? HTTPRequest(head, secure: true, splitCookie: false) {
                        decided = self.shouldUpgrade(request, channel)
                    } else {
                        decided = .refuse(UpgradeRefusal(status: .badRequest, error: RPCError(.invalidRequest, "the upgrade request is not valid HTTP")))
                    }
                    decision.value = decided
                    guard case .accept = decided else { return channel.eventLoop.makeSucceededFuture(nil) }
                    return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        guard case .accept(let open) = decision.value else { throw ChannelError.inappropriateOperationForState }
                        try ClientFrameCheck.install(on: channel)
                        try open(channel)
                        return Outcome.webSocket
                    }
                }
            )
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<Outcome>(upgradeConfiguration: .init(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
                        let http = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        if case .refuse(let refusal) = decision.value { return Outcome.refusedUpgrade(http, refusal) }
                        return Outcome.http(http)
                    }
                }
            ))
            // Pipelining is the async channel's; errors are the guard's; responses are
            // made by swift-http-types, which validates them.
            configuration.enablePipelining = false
            configuration.enableErrorHandling = false
            configuration.enableResponseHeaderValidation = false
            configuration.decoderConfiguration.maxHeaderFieldSize = self.limits.maximumHeaderSize
            configuration.decoderConfiguration.maxHeaderListSize = self.limits.maximumHeaderSize
            configuration.decoderConfiguration.maxHeaderFieldCount = Self.maximumHeaderCount
            let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            try RequestGuard.install(on: channel, limits: .init(headerSize: self.limits.maximumHeaderSize, bodySize: self.limits.maximumBodySize), logger: logger)
            return Value(outcome: outcome, channel: channel)
        }
    }

    /// Headers in one request: more is not a device, a browser or curl.
    static let maximumHeaderCount = 100

    func handle(value: Value, logger: Logger) async {
        let outcome: Outcome
        do {
            outcome = try await value.outcome.get()
        } catch {
            // Closed before a request was taken: refused by the guard (which logged why),
            // the request timeout, or the client went away.
            logger.trace("connection closed before its first request was served", metadata: ["error": "\(error)"])
            return
        }
        switch outcome {
        case .http(let http):
            await self.handleHTTP(asyncChannel: http, logger: logger)
        case .refusedUpgrade(let http, let refusal):
            await Self.writeRefusal(refusal, on: http, logger: logger)
        case .webSocket:
            break
        }
    }

    /// A refused upgrade: the reason as JSON, HSTS like every response, then closed.
    static func writeRefusal(_ refusal: UpgradeRefusal, on http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, logger: Logger) async {
        let body = ByteBuffer(bytes: ReplyEncoding.error(id: nil, refusal.error))
        let head = JSONResponse.error(refusal.error, extra: [.connection: "close"]).withStatus(refusal.status).head
        do {
            try await http.executeThenClose { _, outbound in
                try await outbound.write(contentsOf: [.head(head), .body(body), .end(nil)])
            }
        } catch {
            logger.trace("refused upgrade not written", metadata: ["error": "\(error)"])
        }
    }

    /// A request for a WebSocket after the first of a connection (the upgrade is taken on
    /// the first only): sent to open a new connection for it, as Hummingbird does.
    static func redirectingLateUpgrades(_ responder: @escaping Responder) -> Responder {
        { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                return try await responder(request, writer, channel)
            }
            var path = request.uri.path
            if let query = request.uri.query { path += "?\(query)" }
            try await writer.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [
                .connection: "close", .location: path, .contentLength: "0", .strictTransportSecurity: JSONResponse.strictTransportSecurity,
            ]))
            channel.close(promise: nil)
        }
    }
}
