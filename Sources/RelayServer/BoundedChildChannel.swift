import EdgeLimits
import HummingbirdCore
import Logging
import NIOCore

/// Each connection of the relay, bounded before anything else is done with it: counted by
/// a ``ConnectionGate`` (one over its limits is closed at once, before TLS, and its task
/// ends), and given a ``RequestDeadline``: the TLS handshake and the first request's head
/// must arrive within it (the routes disarm it; each body has its own). Hummingbird's idle
/// timeouts close a kept-alive connection that stays silent.
struct BoundedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let base: Base.Value?
        let channel: any Channel
    }

    let base: Base
    let gate: ConnectionGate
    let deadline: TimeAmount
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if let refusal = self.gate.admit(channel) {
            self.logger.debug("connection refused: too many connections", metadata: Self.metadata(refusal))
            channel.close(promise: nil)
            return channel.eventLoop.makeSucceededFuture(Value(base: nil, channel: channel))
        }
        do {
            try channel.pipeline.syncOperations.addHandler(RequestDeadline(timeout: self.deadline), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return self.base.setup(channel: channel, logger: logger).map { Value(base: $0, channel: channel) }
    }

    func handle(value: Value, logger: Logger) async {
        guard let base = value.base else { return }
        await self.base.handle(value: base, logger: logger)
    }

    private static func metadata(_ refusal: ConnectionGate.Refusal) -> Logger.Metadata {
        switch refusal {
        case .total(let limit): ["limit_total": "\(limit)"]
        case .address(let key, let limit): ["remote_address": "\(key)", "limit_per_address": "\(limit)"]
        }
    }
}
