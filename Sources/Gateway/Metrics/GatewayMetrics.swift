import NIOCore
import NIOSSL
import NIOTLS
import ServiceMetrics
import Synchronization

/// The gateway's own instruments: TLS handshakes by outcome, HTTP responses by status and
/// route, WebSockets open now, connections and requests refused by a limit, and the bytes
/// it read and wrote on its connections (TLS included).
final class GatewayMetrics: Sendable {
    let handshakes: LabelledInstruments<Counter>
    let responses: LabelledInstruments<Counter>
    let responseDuration: LabelledInstruments<CoreMetrics.Timer>
    let refused: LabelledInstruments<Counter>
    let bytesRead: Counter
    let bytesWritten: Counter
    let socketsOpened: Counter
    private let openSockets = Atomic<Int>(0)

    init(_ metrics: ServiceMetrics) {
        self.handshakes = LabelledInstruments { outcome, _ in metrics.counter("tls_handshakes_total", [("outcome", outcome)]) }
        self.responses = LabelledInstruments { route, status in metrics.counter("http_responses_total", [("route", route), ("status", status)]) }
        self.responseDuration = LabelledInstruments { route, _ in metrics.timer("http_request_duration_seconds", [("route", route)]) }
        self.refused = LabelledInstruments { limit, _ in metrics.counter("refused_total", [("limit", limit)]) }
        self.bytesRead = metrics.counter("received_bytes_total")
        self.bytesWritten = metrics.counter("sent_bytes_total")
        self.socketsOpened = metrics.counter("websockets_opened_total")
        for outcome in ["ok", "failed"] { _ = self.handshakes(outcome) }
        for limit in ["connections", "rate"] { _ = self.refused(limit) }
        let open = metrics.gauge("websockets_open")
        metrics.onCollect { [weak self] in open.record(self?.websocketsOpen ?? 0) }
    }

    /// WebSockets open now: the devices connected.
    var websocketsOpen: Int { self.openSockets.load(ordering: .relaxed) }

    func socketOpened() {
        self.openSockets.add(1, ordering: .relaxed)
        self.socketsOpened.increment()
    }

    func socketClosed() { self.openSockets.subtract(1, ordering: .relaxed) }
}

/// Counts a connection's bytes as they cross the socket (first in the pipeline).
final class ByteCounter: ChannelDuplexHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let metrics: GatewayMetrics

    init(_ metrics: GatewayMetrics) { self.metrics = metrics }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.metrics.bytesRead.increment(by: Self.unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.metrics.bytesWritten.increment(by: Self.unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }
}

/// Counts TLS handshakes that completed and those that failed (right after the TLS handler).
final class HandshakeCounter: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    let metrics: GatewayMetrics

    init(_ metrics: GatewayMetrics) { self.metrics = metrics }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            self.metrics.handshakes("ok").increment()
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOSSLError || error is BoringSSLError { self.metrics.handshakes("failed").increment() }
        context.fireErrorCaught(error)
    }
}
