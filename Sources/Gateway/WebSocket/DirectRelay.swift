import NIOCore
import NIOWebSocket

/// Takes a device's requests off its WebSocket as their frames are decoded, on the
/// socket's event loop, and has the socket answer there those it can answer at once
/// (``DeviceSocket/answerOnLoop(_:)``): a unary call goes to the service on the same
/// loop's connection, and its reply is written to the device from the same thread, with
/// no task and no change of thread in between. Everything else (control frames, binary
/// or fragmented messages, streams, errors, a device not yet authenticated) goes on to
/// hummingbird-websocket's handler and the socket's general path, unchanged.
///
/// It also watches for close frames both ways: once one has gone out (or come in), the
/// socket's ``MessageWriter``, which writes below hummingbird-websocket's writer, writes
/// nothing more, and no request is taken here.
final class DirectRelay: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let socket: DeviceSocket
    /// Inside a message sent in several frames: all of them go the general way.
    private var fragmented = false

    init(socket: DeviceSocket) {
        self.socket = socket
    }

    /// Puts the relay right after the WebSocket frame decoder and its ``ClientFrameCheck``.
    /// Called on the channel's loop.
    static func install(on channel: any Channel, for socket: DeviceSocket) {
        let operations = channel.pipeline.syncOperations
        let before: (any ChannelHandler)? = (try? operations.handler(type: ClientFrameCheck.self))
            ?? (try? operations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self))
        guard let before else { return }
        try? operations.addHandler(DirectRelay(socket: socket), position: .after(before))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        if frame.opcode == .connectionClose { self.socket.writer.close() }
        if !self.socket.writer.isClosed, let request = self.request(in: frame), self.socket.answerOnLoop(request) { return }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if Self.unwrapOutboundIn(data).opcode == .connectionClose { self.socket.writer.close() }
        context.write(data, promise: promise)
    }

    /// The bytes of a request this frame carries whole: a single text frame, no extension
    /// bits, valid UTF-8 (what the general path would check). Its size is checked already:
    /// the decoder refuses a frame over `--max-message-size`.
    private func request(in frame: WebSocketFrame) -> [UInt8]? {
        switch frame.opcode {
        case .text, .binary, .continuation:
            let inside = self.fragmented
            self.fragmented = !frame.fin
            guard !inside, frame.fin, frame.opcode == .text, frame.reservedBits.isEmpty else { return nil }
            let bytes = Array(frame.unmaskedData.readableBytesView)
            guard bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil else { return nil }
            return bytes
        default:
            return nil
        }
    }
}
