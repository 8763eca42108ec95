import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport

/// A TLS connection to the gateway that sends exactly the bytes it is given, however
/// malformed, and keeps what comes back and when the gateway closed it: what a scanner or
/// a broken client does, below any HTTP client library. The key is pinned by curl first
/// (``PinCheck``), as for ``DeviceWebSocket``.
final class RawTLS: Sendable {
    private let channel: any Channel
    private let received: Received

    final class Received: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        /// What came, when the connection closed, and when each read ended at which count.
        let state = Mutex<(bytes: [UInt8], closedAt: ContinuousClock.Instant?, reads: [(count: Int, at: ContinuousClock.Instant)])>(([], nil, []))

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = Self.unwrapInboundIn(data)
            self.state.withLock { state in
                state.bytes += buffer.readableBytesView
                state.reads.append((state.bytes.count, ContinuousClock.now))
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.state.withLock { $0.closedAt = ContinuousClock.now }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // A reset or an unclean TLS end: the connection is over either way.
            context.close(promise: nil)
        }
    }

    private init(channel: any Channel, received: Received) {
        self.channel = channel
        self.received = received
    }

    /// Connects from `localAddress` (a loopback address of the test's choosing) or any.
    static func connect(_ stack: GatewayStack, from localAddress: String? = nil) async throws -> RawTLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        tls.shutdownTimeout = .milliseconds(200)
        let context = try NIOSSLContext(configuration: tls)
        let received = Received()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(received)
                }
            }
        if let localAddress { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: localAddress, port: 0)) }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: stack.port).get()
        return RawTLS(channel: channel, received: received)
    }

    /// Sends `bytes` (nothing if the gateway has closed the connection already).
    func send(_ bytes: [UInt8]) async {
        try? await self.channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    func send(_ text: String) async { await self.send(Array(text.utf8)) }

    /// Keeps sending `chunk` after chunk until the gateway closes the connection or
    /// `limit` has passed: a client that does not stop.
    func keepSending(_ chunk: [UInt8], for limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while self.channel.isActive, ContinuousClock.now < deadline {
            await self.send(chunk)
        }
    }

    var bytes: [UInt8] { self.received.state.withLock { $0.bytes } }

    /// When the first bytes after the first `count` arrived.
    func arrival(after count: Int) -> ContinuousClock.Instant? {
        self.received.state.withLock { state in state.reads.first { $0.count > count }?.at }
    }
    var text: String { String(decoding: self.bytes, as: UTF8.self) }

    /// The status of the first response (nil before one has come).
    var status: Int? {
        let text = self.text
        guard text.hasPrefix("HTTP/1."), text.count >= 12 else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }

    /// The first response's head, header names lower-cased.
    var head: String {
        let text = self.text
        return String(text[..<(text.range(of: "\r\n\r\n")?.lowerBound ?? text.endIndex)]).lowercased()
    }

    /// Waits until the gateway closes the connection (at most `timeout`); when it did, or
    /// nil if it did not.
    @discardableResult
    func waitForClose(timeout: Duration = .seconds(15)) async throws -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let closed = self.received.state.withLock({ $0.closedAt }) { return closed }
            try await Task.sleep(for: .milliseconds(10))
        }
        return self.received.state.withLock { $0.closedAt }
    }

    /// Waits until what came back satisfies `condition`.
    func waitFor(_ what: String, timeout: Duration = .seconds(15), _ condition: @escaping ([UInt8]) -> Bool) async throws {
        try await waitUntil(what, timeout: timeout, detail: "received: \(self.text.prefix(500))") { condition(self.bytes) }
    }

    func close() {
        self.channel.close(promise: nil)
    }
}
