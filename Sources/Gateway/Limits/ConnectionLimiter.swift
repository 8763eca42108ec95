import EdgeLimits
import Logging
import NIOCore
import RPCCore
import Synchronization

/// Admits connections under the limits of a ``ConnectionGate`` (in total and per IP address, an IPv6 /64 as one). A new one over either limit
/// is still served, to be told so (``refusal(for:)``: HTTP 429, `limit_exceeded`, then
/// closed), while few such answers are under way (``answeredAtOnce``); past that it is
/// closed at accept, before TLS, with nothing sent: a flood costs the gateway at most that
/// many handshakes at a time, each bounded by the request timeout. Sits on the listening
/// channel.
final class ConnectionLimiter: ChannelInboundHandler, Sendable {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let gate: ConnectionGate
    private let metrics: GatewayMetrics
    private let logger: Logger
    /// The connections served only to be refused, and why.
    private let refused = Mutex<[ObjectIdentifier: RPCError]>([:])
    /// Connections over a limit answered with an error at once; more are closed at accept.
    static let answeredAtOnce = 16

    init(total: Int, perAddress: Int, metrics: GatewayMetrics, logger: Logger) {
        self.gate = ConnectionGate(total: total, perAddress: perAddress)
        self.metrics = metrics
        self.logger = logger
    }

    var openConnections: Int { self.gate.openConnections }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = Self.unwrapInboundIn(data)
        guard let refusal = self.gate.admit(child) else {
            context.fireChannelRead(data)
            return
        }
        let key = ObjectIdentifier(child)
        let answered = self.refused.withLock { refused -> Bool in
            guard refused.count < Self.answeredAtOnce else { return false }
            switch refusal {
            case .total(let limit):
                refused[key] = RPCError(.limitExceeded, "the server is serving as many connections as it allows (\(limit)); try again shortly")
            case .address(_, let limit):
                refused[key] = RPCError(.limitExceeded, "too many connections from your address at once (limit \(limit)); close some and try again")
            }
            return true
        }
        self.metrics.refused("connections").increment()
        self.logger.notice("connection refused: too many connections", metadata: [
            "remote_address": "\(AddressKey.of(child.remoteAddress?.ipAddress ?? "unknown"))", "limit_total": "\(self.gate.total)",
            "limit_per_address": "\(self.gate.perAddress)", "answered": "\(answered)",
        ])
        guard answered else {
            child.close(promise: nil)
            return
        }
        child.closeFuture.whenComplete { _ in self.refused.withLock { _ = $0.removeValue(forKey: key) } }
        context.fireChannelRead(data)
    }

    /// Why this connection is served only to be refused (it came over a limit), or nil.
    func refusal(for channel: any Channel) -> RPCError? {
        self.refused.withLock { $0[ObjectIdentifier(channel)] }
    }
}
