import NIOCore
import NIOWebSocket

/// Writes text messages to one device's WebSocket from its event loop, each as a single
/// buffer holding the frame header and the message, handed straight to the handler below
/// the WebSocket frame encoder (TLS).
///
/// Why not a `WebSocketFrame` down the whole pipeline: the encoder puts the header in front
/// of the message only when it owns the message's buffer alone, which a frame passed down
/// the pipeline never is; otherwise it writes the header as a buffer of its own, and NIOSSL
/// seals each buffer as a TLS record of its own. So each message cost two records to seal,
/// send and open. One buffer is one record, and the handlers above the encoder are skipped.
final class MessageWriter: Sendable {
    private let channel: any Channel
    /// The encoder's context, once the socket's pipeline is set up; until then (or if it
    /// is not found) messages go down the pipeline as frames.
    private let encoder: NIOLoopBoundBox<ChannelHandlerContext?>
    /// A close frame has gone out (or come in): no message may follow it.
    private let closed: NIOLoopBoundBox<Bool>

    init(channel: any Channel) {
        self.channel = channel
        self.encoder = .makeEmptyBox(valueType: ChannelHandlerContext.self, eventLoop: channel.eventLoop)
        self.closed = .makeBoxSendingValue(false, eventLoop: channel.eventLoop)
    }

    /// Whether the WebSocket is closing (a close frame went out or came in). On the loop.
    var isClosed: Bool { self.closed.value }

    /// No message goes out from now on. On the channel's event loop.
    func markClosed() { self.closed.value = true }

    /// Sends a close frame with `code` (and a reason, at most 123 bytes), once; no message
    /// goes out after it. `then` runs once it has gone out (or could not).
    func sendClose(_ code: WebSocketErrorCode, reason: String? = nil, then: (@Sendable () -> Void)? = nil) {
        let loop = self.channel.eventLoop
        guard loop.inEventLoop else { return loop.execute { self.sendClose(code, reason: reason, then: then) } }
        guard !self.closed.value, self.channel.isActive else {
            then?()
            return
        }
        var data = self.channel.allocator.buffer(capacity: 2 + (reason?.utf8.count ?? 0))
        data.write(webSocketErrorCode: code)
        if let reason { data.writeBytes(reason.utf8.prefix(123)) }
        self.closed.value = true
        self.channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)).whenComplete { _ in then?() }
    }

    /// Finds the frame encoder. On the channel's event loop.
    func attach() {
        self.encoder.value = try? self.channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)
    }

    /// Writes and flushes one text message; the future completes once it has gone to the
    /// network (or failed).
    @discardableResult
    func write(_ message: [UInt8]) -> EventLoopFuture<Void> {
        self.write(count: message.count) { $0.writeBytes(message) }
    }

    /// Writes and flushes one text message of `count` bytes, which `writeMessage` appends
    /// to the frame's buffer (so a message made of parts is copied once, into the frame).
    /// The frame is made on the calling thread and sent from the socket's event loop.
    @discardableResult
    func write(count: Int, _ writeMessage: (inout ByteBuffer) -> Void) -> EventLoopFuture<Void> {
        var frame = self.channel.allocator.buffer(capacity: count + 10)
        frame.writeInteger(UInt8(0x81))  // FIN, text
        switch count {
        case ...125:
            frame.writeInteger(UInt8(count))
        case ...0xFFFF:
            frame.writeInteger(UInt8(126))
            frame.writeInteger(UInt16(count))
        default:
            frame.writeInteger(UInt8(127))
            frame.writeInteger(UInt64(count))
        }
        let header = frame.readableBytes
        writeMessage(&frame)
        assert(frame.readableBytes - header == count, "a WebSocket message of \(frame.readableBytes - header) bytes said it had \(count)")
        let loop = self.channel.eventLoop
        guard loop.inEventLoop else { return loop.flatSubmit { self.send(frame, header: header) } }
        return self.send(frame, header: header)
    }

    /// Sends a frame whose header is its first `header` bytes. On the channel's event loop.
    private func send(_ frame: ByteBuffer, header: Int) -> EventLoopFuture<Void> {
        let promise = self.channel.eventLoop.makePromise(of: Void.self)
        guard !self.closed.value else {
            promise.fail(ChannelError.outputClosed)
            return promise.futureResult
        }
        guard let encoder = self.encoder.value, self.channel.isActive else {
            self.channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: frame.getSlice(at: frame.readerIndex + header, length: frame.readableBytes - header)!), promise: promise)
            return promise.futureResult
        }
        encoder.writeAndFlush(NIOAny(frame), promise: promise)
        return promise.futureResult
    }
}
