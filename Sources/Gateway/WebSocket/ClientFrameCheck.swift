import NIOCore
import NIOWebSocket

/// Closes a WebSocket whose client sends a frame without a mask (RFC 6455, 5.1: the
/// server must close the connection, with 1002). SwiftNIO's frame decoder reads unmasked
/// frames as it does masked ones, and nothing above it checks. Installed right after the
/// decoder as the upgrade completes, so it sees every frame, the first included.
final class ClientFrameCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var closed = false

    static func install(on channel: any Channel) throws {
        let operations = channel.pipeline.syncOperations
        let decoder = try operations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
        try operations.addHandler(ClientFrameCheck(), position: .after(decoder))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.closed else { return }
        guard Self.unwrapInboundIn(data).maskKey == nil else { return context.fireChannelRead(data) }
        self.closed = true
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        var reason = context.channel.allocator.buffer(capacity: 2)
        reason.write(webSocketErrorCode: .protocolError)
        let close = WebSocketFrame(fin: true, opcode: .connectionClose, data: reason)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(close)).whenComplete { _ in channel.close(promise: nil) }
    }
}
