import NIOCore

/// Closes a connection that does not get a request going in time: armed at accept (the TLS
/// handshake and the first request head must arrive within the deadline), started again
/// when a request head reaches the gateway's code (its body must follow within it),
/// disarmed while the request is served, armed again when its response is written (for
/// the next request of a keep-alive connection). A slowloris client, trickling bytes to keep a
/// connection open, is cut off here; an idle timeout alone would not see it, since it is
/// never idle. Sits first in the pipeline, under TLS. The gateway's and the wake relay's.
public final class RequestDeadline: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = NIOAny
    private let timeout: TimeAmount
    private var scheduled: Scheduled<Void>?
    private weak var context: ChannelHandlerContext?

    public init(timeout: TimeAmount) { self.timeout = timeout }

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { self.arm() }
    }

    public func channelActive(context: ChannelHandlerContext) {
        self.arm()
        context.fireChannelActive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.disarm()
        self.context = nil
    }

    public func channelInactive(context: ChannelHandlerContext) {
        self.disarm()
        context.fireChannelInactive()
    }

    public func arm() {
        guard let context, self.scheduled == nil else { return }
        let channel = context.channel
        self.scheduled = context.eventLoop.scheduleTask(in: self.timeout) {
            channel.close(promise: nil)
        }
    }

    public func disarm() {
        self.scheduled?.cancel()
        self.scheduled = nil
    }

    /// A fresh deadline from now.
    public func restart() {
        self.disarm()
        self.arm()
    }
}

extension RequestDeadline {
    /// Runs `body` on the handler of `channel`, if it has one (on its event loop).
    public static func on(_ channel: any Channel, _ body: @escaping @Sendable (RequestDeadline) -> Void) {
        channel.eventLoop.execute {
            if let handler = try? channel.pipeline.syncOperations.handler(type: RequestDeadline.self) {
                body(handler)
            }
        }
    }
}

extension RequestDeadline {
    /// Disarms the deadline of the connection a request came on: `channel`'s own (an
    /// HTTP/1 connection), or its parent's (an HTTP/2 stream, whose parent is the
    /// connection; an HTTP/1 connection's parent is the listening socket, which has none).
    public static func disarmConnection(of channel: any Channel) {
        channel.eventLoop.execute {
            if let handler = try? channel.pipeline.syncOperations.handler(type: RequestDeadline.self) {
                handler.disarm()
            } else if let parent = channel.parent, parent.eventLoop === channel.eventLoop,
                      let handler = try? parent.pipeline.syncOperations.handler(type: RequestDeadline.self) {
                handler.disarm()
            }
        }
    }
}
