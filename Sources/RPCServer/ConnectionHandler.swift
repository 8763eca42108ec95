import CSystemd
import Foundation
import Glibc
import Logging
import NIOCore
import NIOExtras
import RPCCore

/// One connection, as the last handler of its pipeline (after the frame codec).
///
/// There is no task per connection: frames are handled as they are read, on the event
/// loop, and only requests get tasks (``RequestRunner``). An idle connection costs its
/// channel and a few small objects, which is what lets a service keep ten thousand
/// listeners. When reading ends (end of input, bad framing, shutdown), streams end with
/// a final reply, unary requests finish and get theirs, then the connection closes.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let table: MethodTable
    private let state: ServerState
    private let connection: ConnectionState
    private let writer: ConnectionWriter
    private let logger: Logger
    private var runner: RequestRunner?
    private var readingEnded = false
    /// Requests read ahead of their replies: past this many unanswered, the connection
    /// waits before reading more (their replies are written later, by their tasks, so
    /// the channel's writability alone would let a pipelining peer pile them up).
    static let readAhead = 32

    init(table: MethodTable, state: ServerState, connection: ConnectionState, channel: any Channel, logger: Logger) {
        self.table = table
        self.state = state
        self.connection = connection
        self.writer = ConnectionWriter(channel: channel)
        self.logger = logger
    }

    /// The channel's end, however it comes (even before it was ever active): writes fail
    /// from then on, streams end, and once every request has finished the connection is
    /// forgotten.
    func handlerAdded(context: ChannelHandlerContext) {
        let (writer, connection, state) = (self.writer, self.connection, self.state)
        let logger = self.logger
        context.channel.closeFuture.whenComplete { _ in
            writer.channelClosed()
            connection.endStreams(stopping: state.isShuttingDown)
            connection.whenDrained {
                state.close(connection)
                logger.debug("connection closed", metadata: ["connection_id": "\(connection.id)"])
            }
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        let started = { (peer: PeerCredentials?) in
            var logger = self.logger
            logger[metadataKey: "connection_id"] = "\(self.connection.id)"
            if let peer {
                logger[metadataKey: "peer_pid"] = "\(peer.pid)"
                logger[metadataKey: "peer_uid"] = "\(peer.uid)"
            }
            logger.debug("connection opened")
            self.runner = RequestRunner(
                table: self.table, state: self.state, connection: self.connection,
                outbound: Outbound(writer: self.writer), peer: peer, logger: logger
            )
        }
        // On the event loop the option is read at once, before any frame.
        if let provider = channel as? any SocketOptionProvider {
            let credentials: EventLoopFuture<screentime_ucred> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            credentials.assumeIsolated().whenComplete { result in
                started(try? result.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }.get())
            }
        } else {
            started(nil)
        }
        // Accepted as the service began to stop: serve nothing more than was sent already.
        if self.state.isShuttingDown { channel.close(mode: .input, promise: nil) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.readingEnded, let runner = self.runner else { return }
        runner.handle(self.unwrapInboundIn(data))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            self.endReading(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !self.readingEnded else { return }
        let log = self.runner?.logger ?? self.logger
        switch error {
        case let error as FrameTooLargeError:
            log.notice("frame too large; closing connection", metadata: ["declared_length": "\(error.declaredLength)"])
            self.runner?.outbound.sendNow(ReplyEncoding.error(id: nil, error.rpcError))
        case let error as NIOExtrasErrors.LeftOverBytesError:
            self.refuseTruncatedFrame(pendingBytes: error.leftOverBytes.readableBytes, logger: log)
        case ByteToMessageDecoderError.leftoverDataWhenDone(let rest):
            self.refuseTruncatedFrame(pendingBytes: rest.readableBytes, logger: log)
        default:
            log.debug("connection read failed", metadata: ["error": "\(error)"])
        }
        self.endReading(context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.writer.writabilityChanged()
        if context.channel.isWritable && self.connection.readHeld.load(ordering: .relaxed) {
            self.read(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// A peer that sends requests without reading the replies is not read from until it
    /// catches up: its replies would otherwise pile up in memory. Reading resumes when
    /// the channel is writable again or a request finishes.
    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable && self.connection.unaryInFlight < Self.readAhead {
            self.connection.readHeld.store(false, ordering: .relaxed)
            context.read()
        } else {
            self.connection.readHeld.store(true, ordering: .relaxed)
        }
    }

    /// The peer half-closed in the middle of a frame: tell it (it may still read), then close.
    private func refuseTruncatedFrame(pendingBytes: Int, logger: Logger) {
        // Stopping, the service closed the input itself: the request cut short is not the
        // client's fault. It gets no reply, the connection closes, and the client (told the
        // service is unavailable) may retry: nothing of that request was done.
        guard !self.state.isShuttingDown else {
            logger.debug("a request cut short by the stop was not read", metadata: ["pending_bytes": "\(pendingBytes)"])
            return
        }
        logger.notice("connection closed in the middle of a frame", metadata: ["pending_bytes": "\(pendingBytes)"])
        self.runner?.outbound.sendNow(ReplyEncoding.error(id: nil, RPCError(
            .invalidFrame,
            "the connection ended in the middle of a frame (\(pendingBytes) bytes of it arrived)"
        )))
    }

    /// Reading is over: streams end now; unary requests finish and get their replies; then
    /// the connection closes.
    private func endReading(context: ChannelHandlerContext) {
        guard !self.readingEnded else { return }
        self.readingEnded = true
        self.connection.endStreams(stopping: self.state.isShuttingDown)
        let channel = context.channel
        self.connection.whenDrained { channel.close(promise: nil) }
    }
}

/// Answers a connection over the limit with one error, then closes it.
final class RefusingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let maximumConnections: Int

    init(maximumConnections: Int) { self.maximumConnections = maximumConnections }

    func channelActive(context: ChannelHandlerContext) {
        let reply = ReplyEncoding.error(id: nil, RPCError(
            .limitExceeded,
            "the service has reached its limit of \(self.maximumConnections) connections; try again later"
        ))
        let channel = context.channel
        context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(bytes: reply))).whenComplete { _ in
            channel.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
