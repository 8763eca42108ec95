import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import NIOWebSocket
import Synchronization

/// A TLS WebSocket client connection for the gateway benchmark, on SwiftNIO's handlers
/// (NIOSSL, the HTTP/1 client upgrade, NIOWebSocket): thousands of them share one event
/// loop group in this process, so each costs a channel and a small handler, no task.
/// Text messages are either the reply a ``call(_:)`` waits for, or handed to `onText`.
final class BenchWebSocket: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<ClientFrameHandler>

    private init(channel: any Channel, handler: NIOLoopBound<ClientFrameHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// A TLS client context that takes the gateway's self-signed certificate (the
    /// benchmark measures the server's cost; a phone pins the key as well).
    static func clientContext() throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        return try NIOSSLContext(configuration: tls)
    }

    /// Connects to `127.0.0.1:port`, completes TLS and the upgrade on `path`, with
    /// `Authorization: Bearer token` when given.
    static func connect(
        group: any EventLoopGroup, port: Int, path: String = "/v1/ws", token: String?, context: NIOSSLContext,
        onText: (@Sendable (ByteBuffer) -> Void)? = nil
    ) async throws -> BenchWebSocket {
        let upgraded: EventLoopFuture<BenchWebSocket> = try await ClientBootstrap(group: group)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    let upgrader = NIOTypedWebSocketClientUpgrader<BenchWebSocket>(maxFrameSize: 1 << 22) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            let handler = ClientFrameHandler(onText: onText)
                            try channel.pipeline.syncOperations.addHandler(handler)
                            return BenchWebSocket(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
                        }
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "localhost")
                    if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<BenchWebSocket>(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers),
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in
                            channel.close(promise: nil)
                            return channel.eventLoop.makeFailedFuture(BenchError("the WebSocket upgrade on \(path) was refused"))
                        })
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    pipeline.leftOverBytesStrategy = .forwardBytes  // frames in the same read as the 101 are the WebSocket's
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                }
            }
        return try await upgraded.get()
    }

    /// Sends one text message and waits for the next one that comes back.
    func call(_ text: String) async throws -> ByteBuffer {
        let promise = self.channel.eventLoop.makePromise(of: ByteBuffer.self)
        let handler = self.handler
        let frame = Self.frame(text)
        let channel = self.channel
        self.channel.eventLoop.execute {
            handler.value.waiting.append(promise)
            channel.writeAndFlush(frame, promise: nil)
        }
        return try await promise.futureResult.get()
    }

    /// Sends one text message; what comes back goes to `onText`.
    func send(_ text: String) {
        self.channel.writeAndFlush(Self.frame(text), promise: nil)
    }

    func close() async {
        try? await self.channel.close()
    }

    /// A client's frame: masked, as RFC 6455 requires.
    private static func frame(_ text: String) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text))
    }
}

/// The client's end of a WebSocket: text messages (reassembled) to a waiting call or to
/// `onText`; pings answered, so the gateway's keep-alive does not close an idle client.
final class ClientFrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    var waiting = CircularBuffer<EventLoopPromise<ByteBuffer>>()
    private let onText: (@Sendable (ByteBuffer) -> Void)?
    private var partial: ByteBuffer?

    init(onText: (@Sendable (ByteBuffer) -> Void)?) { self.onText = onText }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        switch frame.opcode {
        case .text where frame.fin:
            self.deliver(frame.unmaskedData)
        case .text:
            self.partial = frame.unmaskedData
        case .continuation:
            var data = frame.unmaskedData
            self.partial?.writeBuffer(&data)
            if frame.fin, let whole = self.partial {
                self.partial = nil
                self.deliver(whole)
            }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(Self.wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            context.close(promise: nil)
        default:
            break
        }
    }

    private func deliver(_ message: ByteBuffer) {
        if let promise = self.waiting.popFirst() {
            promise.succeed(message)
        } else {
            self.onText?(message)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        while let promise = self.waiting.popFirst() { promise.fail(BenchError("the WebSocket closed")) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        while let promise = self.waiting.popFirst() { promise.fail(error) }
        context.close(promise: nil)
    }
}

/// TLS handshakes with nothing after them: connect, handshake, close.
enum TLSHandshakes {
    /// Full handshakes (no resumption) completed per second against `127.0.0.1:port` by
    /// `concurrency` connections at a time for `seconds`.
    static func perSecond(group: any EventLoopGroup, port: Int, concurrency: Int, seconds: Double) async throws -> Double {
        let context = try BenchWebSocket.clientContext()
        let deadline = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        let total = try await withThrowingTaskGroup(of: Int.self) { tasks in
            for _ in 0..<concurrency {
                tasks.addTask {
                    var count = 0
                    while ContinuousClock.now < deadline {
                        try await self.once(group: group, port: port, context: context)
                        count += 1
                    }
                    return count
                }
            }
            return try await tasks.reduce(0, +)
        }
        return Double(total) / (ContinuousClock.now - started).seconds
    }

    static func once(group: any EventLoopGroup, port: Int, context: NIOSSLContext) async throws {
        let (channel, done) = try await ClientBootstrap(group: group)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let promise = channel.eventLoop.makePromise(of: Void.self)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(HandshakeDone(promise: promise))
                    return (channel, promise.futureResult)
                }
            }
        try await done.get()
        try? await channel.close()
    }

    private final class HandshakeDone: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let promise: EventLoopPromise<Void>
        init(promise: EventLoopPromise<Void>) { self.promise = promise }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event { self.promise.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.promise.fail(error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.promise.fail(BenchError("closed before the TLS handshake finished"))
            context.fireChannelInactive()
        }
    }
}

/// The framework floor of the gateway: SwiftNIO's TLS, HTTP/1 upgrade and WebSocket
/// handlers echoing each text message, with the gateway's own key, certificate and TLS
/// settings, on as many event loops as the gateway, and nothing else (no JSON, no tasks,
/// no authentication). A text message `broadcast:<text>` is instead written as `<text>`
/// to every open socket (each loop writing to its own): the floor of a notification's
/// fan-out. Prints its port once listening.
struct NIOWebSocketEchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nio-wss-echo-server",
        abstract: "Serve the bare SwiftNIO TLS WebSocket echo floor (used by the gateway benchmark).",
        shouldDisplay: false
    )

    @Argument(help: "The certificate chain (PEM).")
    var certificate: String

    @Argument(help: "Its private key (PEM).")
    var key: String

    func run() async throws {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(self.certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: self.key, format: .pem)))
        // As the gateway's (Gateway/TLS/TLSIdentity.swift).
        tls.minimumTLSVersion = .tlsv12
        tls.maximumTLSVersion = .tlsv13
        tls.cipherSuiteValues = [.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, .TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
        tls.renegotiationSupport = .none
        let context = try NIOSSLContext(configuration: tls)
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: 1 << 20,
            shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Echo())
                    try Self.open.add(channel)
                }
            })
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        say("\(server.localAddress?.port ?? 0)")
        try await server.closeFuture.get()
    }

    /// The open WebSockets, by event loop.
    static let open = OpenSockets()

    final class OpenSockets: Sendable {
        /// Each socket's WebSocket frame encoder, where a broadcast writes its frames.
        private let sockets = Mutex<[ObjectIdentifier: (loop: any EventLoop, encoders: [ObjectIdentifier: NIOLoopBound<ChannelHandlerContext>])]>([:])

        /// On the channel's loop, once its WebSocket handlers are in place.
        func add(_ channel: any Channel) throws {
            let loop = ObjectIdentifier(channel.eventLoop)
            let encoder = NIOLoopBound(try channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self), eventLoop: channel.eventLoop)
            self.sockets.withLock { $0[loop, default: (channel.eventLoop, [:])].encoders[ObjectIdentifier(channel)] = encoder }
            channel.closeFuture.whenComplete { _ in
                _ = self.sockets.withLock { $0[loop]?.encoders.removeValue(forKey: ObjectIdentifier(channel)) }
            }
        }

        /// One job per event loop writes `text` to that loop's sockets, each message as one
        /// buffer (header and text) handed to the handler below the frame encoder: one TLS
        /// record per message, as the gateway writes them.
        func broadcast(_ text: ByteBuffer) {
            for (loop, encoders) in self.sockets.withLock({ $0.values.map { ($0.loop, Array($0.encoders.values)) } }) {
                loop.execute {
                    for encoder in encoders {
                        var frame = encoder.value.channel.allocator.buffer(capacity: text.readableBytes + 4)
                        frame.writeInteger(UInt8(0x81))  // FIN, text
                        if text.readableBytes <= 125 {
                            frame.writeInteger(UInt8(text.readableBytes))
                        } else {
                            frame.writeInteger(UInt8(126))
                            frame.writeInteger(UInt16(text.readableBytes))
                        }
                        frame.writeImmutableBuffer(text)
                        encoder.value.writeAndFlush(NIOAny(frame), promise: nil)
                    }
                }
            }
        }
    }

    private final class Echo: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame
        static let broadcast = ByteBuffer(string: "broadcast:")

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = Self.unwrapInboundIn(data)
            switch frame.opcode {
            case .text where frame.unmaskedData.readableBytesView.starts(with: Self.broadcast.readableBytesView):
                var text = frame.unmaskedData
                text.moveReaderIndex(forwardBy: Self.broadcast.readableBytes)
                NIOWebSocketEchoServer.open.broadcast(text)
            case .text:
                context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: frame.fin, opcode: .text, data: frame.unmaskedData)), promise: nil)
            case .ping:
                context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
            case .connectionClose:
                context.close(promise: nil)
            default:
                break
            }
        }
    }

    /// Starts the echo server (this executable) with the gateway's certificate and key,
    /// runs `body` with its process and port, stops it.
    static func with<T>(certificate: String, key: String, _ body: (Process, Int) async throws -> T) async throws -> T {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: Locations.thisExecutable)
        server.arguments = ["nio-wss-echo-server", certificate, key]
        let output = Pipe()
        server.standardOutput = output
        try Interruption.run(server)
        defer { Interruption.kill(server) }
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)), port > 0 else {
            throw BenchError("the NIO TLS WebSocket echo server did not start (it said \(line.debugDescription))")
        }
        return try await body(server, port)
    }
}
