import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// The TLS context in force; replaced when the certificate is renewed, so connections
/// accepted from then on get the new certificate while open ones keep theirs.
public final class TLSContextHolder: Sendable {
    private let state: Mutex<(context: NIOSSLContext, identity: TLSIdentity)>

    public init(_ identity: TLSIdentity) throws {
        self.state = Mutex((try NIOSSLContext(configuration: identity.serverConfiguration()), identity))
    }

    public var identity: TLSIdentity { self.state.withLock { $0.identity } }
    var context: NIOSSLContext { self.state.withLock { $0.context } }

    public func replace(with identity: TLSIdentity) throws {
        let context = try NIOSSLContext(configuration: identity.serverConfiguration())
        self.state.withLock { $0 = (context, identity) }
    }
}

/// Hummingbird's `TLSChannel`, with the context read from a ``TLSContextHolder`` for each
/// connection instead of fixed at start (HummingbirdTLS cannot swap a renewed certificate).
struct RenewableTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let contexts: TLSContextHolder
    let metrics: GatewayMetrics

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: self.contexts.context))
            try channel.pipeline.syncOperations.addHandler(HandshakeCounter(self.metrics))
        }.flatMap {
            self.base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await self.base.handle(value: value, logger: logger)
    }
}
