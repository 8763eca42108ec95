import Logging
import NIOCore
import Synchronization

/// Counts the connections open in total and per IP address, and closes a new one at
/// accept, before TLS, when either is at its limit (nothing is sent: a flood should cost
/// the gateway as little as possible). Sits on the listening channel.
final class ConnectionLimiter: ChannelInboundHandler, Sendable {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let total: Int
    private let perAddress: Int
    private let logger: Logger
    private let state = Mutex<(open: Int, byAddress: [String: Int])>((0, [:]))

    init(total: Int, perAddress: Int, logger: Logger) {
        self.total = total
        self.perAddress = perAddress
        self.logger = logger
    }

    var openConnections: Int { self.state.withLock { $0.open } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = Self.unwrapInboundIn(data)
        let address = child.remoteAddress?.ipAddress ?? "unknown"
        let admitted = self.state.withLock { state -> Bool in
            guard state.open < self.total, state.byAddress[address, default: 0] < self.perAddress else { return false }
            state.open += 1
            state.byAddress[address, default: 0] += 1
            return true
        }
        guard admitted else {
            self.logger.notice("connection refused: too many connections", metadata: [
                "remote_address": "\(address)", "limit_total": "\(self.total)", "limit_per_address": "\(self.perAddress)",
            ])
            child.close(promise: nil)
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
}
