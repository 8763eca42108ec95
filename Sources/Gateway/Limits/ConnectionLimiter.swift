import Logging
import NIOCore
import RPCCore
import Synchronization

/// Counts the connections open in total and per IP address (an IPv6 /64: ``AddressKey``). A new one over either limit
/// is still served, to be told so (``refusal(for:)``: HTTP 429, `limit_exceeded`, then
/// closed), while few such answers are under way (``answeredAtOnce``); past that it is
/// closed at accept, before TLS, with nothing sent: a flood costs the gateway at most that
/// many handshakes at a time, each bounded by the request timeout. Sits on the listening
/// channel.
final class ConnectionLimiter: ChannelInboundHandler, Sendable {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let total: Int
    private let perAddress: Int
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let state = Mutex<(open: Int, byAddress: [String: Int], refused: [ObjectIdentifier: RPCError])>((0, [:], [:]))
    /// Connections over a limit answered with an error at once; more are closed at accept.
    static let answeredAtOnce = 16

    init(total: Int, perAddress: Int, metrics: GatewayMetrics, logger: Logger) {
        self.total = total
        self.metrics = metrics
        self.perAddress = perAddress
        self.logger = logger
    }

    var openConnections: Int { self.state.withLock { $0.open } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = Self.unwrapInboundIn(data)
        let address = AddressKey.of(child.remoteAddress?.ipAddress ?? "unknown")
        let key = ObjectIdentifier(child)
        enum Verdict { case admitted, answered, closed }
        let verdict = self.state.withLock { state -> Verdict in
            let overTotal = state.open >= self.total
            guard overTotal || state.byAddress[address, default: 0] >= self.perAddress else {
                state.open += 1
                state.byAddress[address, default: 0] += 1
                return .admitted
            }
            guard state.refused.count < Self.answeredAtOnce else { return .closed }
            state.refused[key] = overTotal
                ? RPCError(.limitExceeded, "the server is serving as many connections as it allows (\(self.total)); try again shortly")
                : RPCError(.limitExceeded, "too many connections from your address at once (limit \(self.perAddress)); close some and try again")
            return .answered
        }
        guard verdict == .admitted else {
            self.metrics.refused("connections").increment()
            self.logger.notice("connection refused: too many connections", metadata: [
                "remote_address": "\(address)", "limit_total": "\(self.total)", "limit_per_address": "\(self.perAddress)",
                "answered": "\(verdict == .answered)",
            ])
            if verdict == .closed {
                child.close(promise: nil)
                return
            }
            child.closeFuture.whenComplete { _ in self.state.withLock { _ = $0.refused.removeValue(forKey: key) } }
            context.fireChannelRead(data)
            return
        }
        child.closeFuture.whenComplete { _ in
            self.state.withLock { state in
                state.open -= 1
                if let count = state.byAddress[address], count > 1 { state.byAddress[address] = count - 1 } else { state.byAddress[address] = nil }
            }
        }
        context.fireChannelRead(data)
    }

    /// Why this connection is served only to be refused (it came over a limit), or nil.
    func refusal(for channel: any Channel) -> RPCError? {
        self.state.withLock { $0.refused[ObjectIdentifier(channel)] }
    }
}
