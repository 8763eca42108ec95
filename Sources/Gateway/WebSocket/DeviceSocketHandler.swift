import NIOCore
import NIOWebSocket
import WireJSON

/// A device's WebSocket as the event loop reads it: frames become messages, and each
/// message goes to its ``DeviceSocket`` on the same thread, with no task in between. It
/// speaks the protocol's control side (RFC 6455): pongs for pings, the close handshake,
/// messages sent in fragments put together up to `--max-message-size`, text that must be
/// UTF-8, no extensions. An idle socket is this handler and a timer: no task, no buffer.
///
/// The frame decoder below it refuses a frame over the limit, a fragmented control frame
/// and a long control frame (SwiftNIO's `WebSocketProtocolErrorHandler` closes with the
/// code); ``ClientFrameCheck`` refuses an unmasked frame.
///
/// Back-pressure: while the device does not read its replies (the channel is not
/// writable), or requests wait for the socket's serial path beyond a bound, nothing more is
/// read from it.
final class DeviceSocketHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let socket: DeviceSocket
    private let maximumMessageSize: Int
    /// A message sent in several frames, while it is put together (text or binary).
    private var fragments: (text: Bool, data: ByteBuffer)?
    /// A read asked for while reading was held.
    private var readHeld = false
    private var context: ChannelHandlerContext?

    init(socket: DeviceSocket, maximumMessageSize: Int) {
        self.socket = socket
        self.maximumMessageSize = maximumMessageSize
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        // Closing: only the device's close frame is taken (its answer, or its own).
        if self.socket.isClosing, frame.opcode != .connectionClose { return }
        guard frame.reservedBits.isEmpty else { return self.fail(.protocolError, "a frame with reserved bits set (no extension was agreed)") }
        switch frame.opcode {
        case .ping:
            guard !self.socket.writer.isClosed else { return }
            context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .pong:
            break  // the keep-alive counts every read (PeerActivity)
        case .connectionClose:
            self.socket.peerClosed(frame.unmaskedData)
        case .text, .binary:
            guard self.fragments == nil else { return self.fail(.protocolError, "a new message began inside a fragmented one") }
            if frame.fin {
                self.deliver(text: frame.opcode == .text, frame.unmaskedData)
            } else {
                self.fragments = (frame.opcode == .text, frame.unmaskedData)
            }
        case .continuation:
            guard var fragments = self.fragments else { return self.fail(.protocolError, "a continuation frame with no message begun") }
            self.fragments = nil
            var more = frame.unmaskedData
            guard fragments.data.readableBytes + more.readableBytes <= self.maximumMessageSize else {
                return self.fail(.messageTooLarge, "a message over \(self.maximumMessageSize) bytes")
            }
            fragments.data.writeBuffer(&more)
            if frame.fin {
                self.deliver(text: fragments.text, fragments.data)
            } else {
                self.fragments = fragments
            }
        default:
            self.fail(.protocolError, "an unknown opcode")
        }
    }

    private func deliver(text: Bool, _ data: ByteBuffer) {
        guard text else { return self.socket.receivedBinary() }
        let bytes = Array(data.readableBytesView)
        guard UTF8Validation.isValid(bytes) else {
            return self.fail(.dataInconsistentWithMessage, "a text message that is not UTF-8")
        }
        self.socket.received(bytes)
    }

    private func fail(_ code: WebSocketErrorCode, _ reason: String) {
        self.fragments = nil
        self.socket.close(code, reason: reason)
    }

    // MARK: Back-pressure

    func read(context: ChannelHandlerContext) {
        if self.socket.holdsReads(writable: context.channel.isWritable) {
            self.readHeld = true
        } else {
            context.read()
        }
    }

    /// Reads again if reading was held and may go on (the device read its replies, or the
    /// serial path caught up). On the loop.
    func resumeReading() {
        guard self.readHeld, let context, !self.socket.holdsReads(writable: context.channel.isWritable) else { return }
        self.readHeld = false
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    // MARK: The socket's life

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if Self.unwrapOutboundIn(data).opcode == .connectionClose { self.socket.writer.markClosed() }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.socket.ended()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The gateway is stopping (the server quiesces its connections): going away.
        if event is ChannelShouldQuiesceEvent {
            self.socket.close(.goingAway, reason: "the server is stopping", why: "the gateway is stopping")
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A protocol error of the decoder: SwiftNIO's error handler has sent the close frame
        // with its code and closes the channel; the socket notes why.
        self.socket.noteError(error)
    }
}
