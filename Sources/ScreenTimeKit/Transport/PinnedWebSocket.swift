import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import RPCCore
import Synchronization

/// A WebSocket to the gateway over a TLS connection whose key is checked against the pin in
/// the handshake, assembled from SwiftNIO's own parts: `NIOSSLClientHandler` with the pin as
/// its verification callback (``PinnedHandshake``), the HTTP client upgrade with
/// `NIOTypedWebSocketClientUpgrader`, `NIOWebSocketFrameAggregator` for fragmented messages,
/// and this type for what a client owes the protocol (masking, answering pings, the close
/// handshake, its own keep-alive pings). No WebSocket client library takes a prepared
/// channel or a verification callback (swift-websocket's builds its TLS from a
/// `TLSConfiguration`, which has no place for one), hence the assembly; docs/architecture.md.
final class PinnedWebSocket: Sendable {
    private let channel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>
    /// The writer while ``run(keepAlive:onText:)`` reads; frames sent before it starts wait for it.
    private let state = Mutex<State>(State())

    private struct State {
        var outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>?
        var waiting: [CheckedContinuation<NIOAsyncChannelOutboundWriter<WebSocketFrame>?, Never>] = []
        var closeSent = false
        var ended = false
    }

    /// How the connection ended: the peer's close frame, if it sent one.
    struct Closed: Sendable {
        var code: WebSocketErrorCode?
        var reason: String?
    }

    private init(channel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>) {
        self.channel = channel
    }

    /// Connects to `host:port`, checks the server's key against `pin` in the TLS handshake,
    /// and upgrades `GET path` to a WebSocket (with `Authorization: Bearer token` when
    /// given), all within `timeout`. Throws `pin_mismatch` for another key, `unavailable`
    /// otherwise.
    static func connect(host: String, port: Int, path: String = "/v1/ws", pin: KeyPin, token: String?, maximumMessageSize: Int,
                        timeout: Duration = .seconds(10), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws(RPCError) -> PinnedWebSocket {
        let check = PinnedHandshake.Check(host: host, port: port, pin: pin)
        let upgraded: EventLoopFuture<PinnedWebSocket>
        do {
            upgraded = try await check.connect(timeout: timeout, group: group) { channel in
                let upgrader = NIOTypedWebSocketClientUpgrader<PinnedWebSocket>(maxFrameSize: maximumMessageSize) { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOWebSocketFrameAggregator(
                            minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 4096, maxAccumulatedFrameSize: maximumMessageSize))
                        return PinnedWebSocket(channel: try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(wrappingChannelSynchronously: channel))
                    }
                }
                var headers = HTTPHeaders()
                // An IPv6 address goes in brackets (RFC 9110's authority form).
                let authority = host.contains(":") ? "[\(host)]" : host
                headers.add(name: "Host", value: port == 443 ? authority : "\(authority):\(port)")
                if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
                let configuration = NIOTypedHTTPClientUpgradeConfiguration<PinnedWebSocket>(
                    upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers),
                    upgraders: [upgrader],
                    notUpgradingCompletionHandler: { channel in
                        channel.close(promise: nil)
                        return channel.eventLoop.makeFailedFuture(RPCError(.unavailable, "the gateway at \(host):\(port) did not accept the WebSocket on \(path)"))
                    })
                var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                // What the gateway sends right behind its 101 can arrive in the same read: those
                // bytes are the WebSocket's first frames (SwiftNIO drops them by default).
                pipeline.leftOverBytesStrategy = .forwardBytes
                let upgraded = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                // The TLS handshake and the upgrade within `timeout` too: a gateway that
                // takes the connection and says nothing must not hold the transport.
                let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) { channel.close(promise: nil) }
                upgraded.whenComplete { _ in deadline.cancel() }
                return upgraded
            }
        } catch {
            throw check.refusal ?? RPCError(.unavailable, ConnectionFailure.sentence(error, host: host, port: port))
        }
        do {
            return try await upgraded.get()
        } catch {
            if let refusal = check.refusal { throw refusal }
            if let error = error as? RPCError { throw error }
            throw RPCError(.unavailable, "the WebSocket to \(host):\(port) failed: \(error)")
        }
    }

    /// Reads until the connection ends, handing each text message to `onText` in order,
    /// answering pings, and pinging every `keepAlive` (a connection that has not answered a
    /// ping by the next is closed). Returns the peer's close frame, if any.
    func run(keepAlive: Duration, onText: @escaping @Sendable (String) -> Void) async throws -> Closed {
        try await self.channel.executeThenClose { inbound, outbound in
            let waiting = self.state.withLock { state in
                state.outbound = outbound
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiter in waiting { waiter.resume(returning: outbound) }
            defer { self.end() }
            return try await withThrowingTaskGroup(of: Closed?.self) { group in
                let answered = Locked(true)
                group.addTask {
                    while true {
                        try await Task.sleep(for: keepAlive)
                        guard answered.get() else {
                            // No pong since the last ping, a whole interval ago: the connection is dead.
                            self.channel.channel.close(promise: nil)
                            return nil
                        }
                        answered.set(false)
                        try await outbound.write(Self.frame(.ping, ByteBuffer()))
                    }
                }
                group.addTask {
                    var closed = Closed()
                    for try await frame in inbound {
                        switch frame.opcode {
                        case .text:
                            onText(String(buffer: frame.unmaskedData))
                        case .ping:
                            try await outbound.write(Self.frame(.pong, frame.unmaskedData))
                        case .pong:
                            answered.set(true)
                        case .connectionClose:
                            var data = frame.unmaskedData
                            closed.code = data.readWebSocketErrorCode()
                            closed.reason = data.readString(length: data.readableBytes)
                            // Answered with the same code, unless this side closed first.
                            if self.state.withLock({ state in defer { state.closeSent = true }; return !state.closeSent }) {
                                var echo = ByteBuffer()
                                if let code = closed.code { echo.write(webSocketErrorCode: code) }
                                try? await outbound.write(Self.frame(.connectionClose, echo))
                            }
                            return closed
                        default:
                            continue
                        }
                    }
                    return closed
                }
                let closed = try await group.next() ?? nil
                group.cancelAll()
                return closed ?? Closed()
            }
        }
    }

    /// Sends one text message.
    func send(text: String) async throws {
        guard let outbound = await self.outbound() else { throw RPCError(.unavailable, "the connection to the gateway closed") }
        try await outbound.write(Self.frame(.text, ByteBuffer(string: text)))
    }

    /// Starts the close handshake: a close frame with `code` and `reason`; the connection
    /// ends when the gateway answers (or within `timeout`).
    func close(code: WebSocketErrorCode, reason: String, timeout: Duration = .seconds(3)) async {
        let first = self.state.withLock { state in
            defer { state.closeSent = true }
            return !state.closeSent && !state.ended
        }
        if first, let outbound = await self.outbound() {
            var data = ByteBuffer()
            data.write(webSocketErrorCode: code)
            data.writeString(reason)
            try? await outbound.write(Self.frame(.connectionClose, data))
            let channel = self.channel.channel
            channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) { channel.close(promise: nil) }
            try? await channel.closeFuture.get()
        } else {
            self.channel.channel.close(promise: nil)
        }
    }

    /// Closes a connection that will not be used (the transport was suspended while it was
    /// being made): no close handshake, the gateway sees it end.
    func discard() async {
        try? await self.channel.executeThenClose { _, _ in }
    }

    private func outbound() async -> NIOAsyncChannelOutboundWriter<WebSocketFrame>? {
        // While the connection runs (every send but the first few): no continuation.
        if let outbound = self.state.withLock({ $0.outbound }) { return outbound }
        return await withCheckedContinuation { continuation in
            let ready = self.state.withLock { state -> (Bool, NIOAsyncChannelOutboundWriter<WebSocketFrame>?) in
                if state.ended { return (true, nil) }
                if let outbound = state.outbound { return (true, outbound) }
                state.waiting.append(continuation)
                return (false, nil)
            }
            if ready.0 { continuation.resume(returning: ready.1) }
        }
    }

    private func end() {
        let waiting = self.state.withLock { state in
            state.ended = true
            state.outbound = nil
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume(returning: nil) }
    }

    /// A client's frame: masked, as RFC 6455 requires of every frame a client sends.
    private static func frame(_ opcode: WebSocketOpcode, _ data: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, maskKey: .random(), data: data)
    }
}
