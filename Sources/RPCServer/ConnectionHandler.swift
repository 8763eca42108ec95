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
/// listeners.
///
/// - Back-pressure: at most ``ConnectionLimits/readAhead`` unary requests run ahead of
///   their replies, and none start while the peer is not reading its replies. A read
///   from the socket may bring more frames than that: they wait here, in order, and the
///   socket is not read again until they have started.
/// - The end of reading (the peer's half-close, bad framing, shutdown): streams end with
///   a final reply, the frames read already are served (unless the service is stopping),
///   unary requests finish and get their replies, and once those replies have gone to
///   the socket, the connection closes.
/// - Timeouts: a connection that sends nothing for the idle timeout while none of its
///   requests runs is closed; one whose frame does not arrive within the frame timeout
///   gets `invalid_frame` and is closed.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let table: MethodTable
    private let state: ServerState
    private let connection: ConnectionState
    private let limits: ConnectionLimits
    private let writer: ConnectionWriter
    private let metrics: RequestMetrics
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var runner: RequestRunner?

    private enum Phase {
        /// Reading requests.
        case reading
        /// Reading has ended; what was read is still served.
        case readingEnded
        /// Everything is answered; the connection closes once its replies are flushed.
        case closing
    }
    private var phase = Phase.reading
    /// Frames read but not started yet (one read may bring more than may start).
    private var waiting = CircularBuffer<ByteBuffer>(initialCapacity: 1)
    /// NIO asked for a read that the connection holds back until it may start more.
    private var readHeld = false
    /// Starting waiting frames (a write it makes may re-enter through writability).
    private var pumping = false

    // What arrived when, for the timeouts.
    private var bytesRead: Int64 = 0
    private var bytesFramed: Int64 = 0
    /// When the connection last made progress: bytes arrived, or its last request ended.
    private var lastActivity = NIODeadline.now()
    /// When the frame now partly received started arriving (or reading it resumed).
    private var partialFrameSince: NIODeadline?
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?

    init(table: MethodTable, state: ServerState, connection: ConnectionState, limits: ConnectionLimits, channel: any Channel, metrics: RequestMetrics, logger: Logger) {
        self.table = table
        self.metrics = metrics
        self.state = state
        self.connection = connection
        self.limits = limits
        self.writer = ConnectionWriter(channel: channel)
        self.logger = logger
    }

    /// The channel's end, however it comes (even before it was ever active): writes fail
    /// from then on, streams end, and once every request has finished the connection is
    /// forgotten.
    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let (writer, connection, state) = (self.writer, self.connection, self.state)
        let logger = self.logger
        context.channel.closeFuture.assumeIsolated().whenComplete { _ in
            writer.channelClosed()
            connection.endStreams(reason: state.isShuttingDown ? .shutdown : .peerGone)
            connection.whenDrained {
                state.close(connection)
                logger.debug("connection closed", metadata: ["connection_id": "\(connection.id)"])
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        // The runner refers back to this handler; requests still running keep their copy.
        self.runner = nil
        self.context = nil
        self.waiting.removeAll()
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
                outbound: Outbound(writer: self.writer), peer: peer, metrics: self.metrics, logger: logger,
                handler: NIOLoopBound(self, eventLoop: channel.eventLoop)
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
        self.lastActivity = .now()
        self.scheduleCheck(at: self.nextCheck(now: self.lastActivity))
        // Accepted as the service began to stop: serve nothing more than was sent already.
        if self.state.isShuttingDown { channel.close(mode: .input, promise: nil) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        self.bytesFramed += 4 + Int64(frame.readableBytes)
        guard self.phase == .reading, let runner = self.runner else { return }
        if self.waiting.isEmpty && self.mayStart(context) {
            runner.handle(frame)
        } else {
            self.waiting.append(frame)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            self.endReading(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard self.phase == .reading else { return }
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
        if context.channel.isWritable {
            self.resume(context: context)
        } else {
            self.logger.debug("the peer is not reading: replies wait for it", metadata: ["connection_id": "\(self.connection.id)"])
        }
        context.fireChannelWritabilityChanged()
    }

    /// Replies wait for the end of the loop's turn to be flushed (``ConnectionWriter``): a
    /// close that comes first (shutdown, a timeout, the end of reading) sends them first.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all { context.flush() }
        context.close(mode: mode, promise: promise)
    }

    /// NIO asks to read more from the socket: only once every frame read so far has
    /// started and the connection may start more. Otherwise the read is held, and the
    /// socket keeps what the client sends next.
    func read(context: ChannelHandlerContext) {
        self.pump(context: context)
        guard self.phase == .reading, self.waiting.isEmpty, self.mayStart(context) else {
            self.readHeld = true
            return
        }
        if self.readHeld {
            self.readHeld = false
            // The rest of a frame waited in the socket while the connection did not read:
            // its time runs from now.
            if self.partialFrameSince != nil {
                let now = NIODeadline.now()
                self.partialFrameSince = now
                self.checkNoLaterThan(now + self.limits.frameTimeout)
            }
        }
        context.read()
    }

    /// Bytes arrived from the socket (told by ``ReadMeter``, before the frame decoder).
    func bytesArrived(_ count: Int) {
        self.bytesRead += Int64(count)
        self.lastActivity = .now()
    }

    /// The frame decoder has handled what arrived: is a frame left half-received?
    func arrivalDecoded(framedBefore: Int64) {
        guard self.bytesRead > self.bytesFramed else {
            self.partialFrameSince = nil
            return
        }
        // A new frame started (none was pending, or one completed in this read).
        if self.partialFrameSince == nil || self.bytesFramed != framedBefore {
            let now = NIODeadline.now()
            self.partialFrameSince = now
            self.checkNoLaterThan(now + self.limits.frameTimeout)
        }
    }

    var framedBytes: Int64 { self.bytesFramed }

    /// A request of this connection finished (from its task, on the event loop).
    func requestFinished() {
        guard let context = self.context else { return }
        if self.connection.inFlight == 0 { self.lastActivity = .now() }
        self.resume(context: context)
    }

    /// Starts what waits and reads again if it was held; closes when everything is done.
    private func resume(context: ChannelHandlerContext) {
        if self.readHeld {
            self.read(context: context)
        } else {
            self.pump(context: context)
        }
        self.closeIfDone(context: context)
    }

    /// The connection may start one more request now.
    private func mayStart(_ context: ChannelHandlerContext) -> Bool {
        context.channel.isWritable && self.connection.unaryInFlight < self.limits.readAhead
    }

    /// Starts waiting frames, in order, while the connection may.
    private func pump(context: ChannelHandlerContext) {
        guard !self.pumping, let runner = self.runner else { return }
        self.pumping = true
        defer { self.pumping = false }
        while self.phase != .closing, !self.waiting.isEmpty, self.mayStart(context) {
            runner.handle(self.waiting.removeFirst())
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

    /// Reading is over: streams end now (`cancelled`, or `unavailable` when the service
    /// stops); the frames read already are served, except when stopping (they were not
    /// answered, so the client may send them again); unary requests finish and get their
    /// replies; then the connection closes.
    private func endReading(context: ChannelHandlerContext) {
        guard self.phase == .reading else { return }
        self.phase = .readingEnded
        let stopping = self.state.isShuttingDown
        if stopping { self.waiting.removeAll() }
        self.connection.endStreams(reason: stopping ? .shutdown : .inputEnded)
        self.resume(context: context)
    }

    /// Once reading has ended and every request read is answered, closes the connection,
    /// after its replies have gone to the socket.
    private func closeIfDone(context: ChannelHandlerContext) {
        guard self.phase == .readingEnded, self.waiting.isEmpty, self.connection.inFlight == 0 else { return }
        self.phase = .closing
        let channel = context.channel
        self.writer.whenFlushed { channel.close(promise: nil) }
    }

    // MARK: Timeouts

    private func scheduleCheck(at deadline: NIODeadline?) {
        self.timer?.cancel()
        self.timer = nil
        self.timerDeadline = deadline
        guard let deadline, let context = self.context else { return }
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { self.checkTimeouts() }
    }

    /// Brings the next check forward to `deadline` if it is due later.
    private func checkNoLaterThan(_ deadline: NIODeadline) {
        if self.timerDeadline.map({ $0 > deadline }) ?? true { self.scheduleCheck(at: deadline) }
    }

    /// When a timeout could next be due: the idle deadline (or, while requests run, one
    /// idle period from now), and the partial frame's deadline.
    private func nextCheck(now: NIODeadline) -> NIODeadline? {
        var next: NIODeadline?
        if let idle = self.limits.idleTimeout {
            next = self.connection.inFlight == 0 ? max(self.lastActivity + idle, now) : now + idle
        }
        if self.phase == .reading, !self.readHeld, let since = self.partialFrameSince {
            next = min(next ?? .distantFuture, since + self.limits.frameTimeout)
        }
        return next
    }

    private func checkTimeouts() {
        self.timer = nil
        self.timerDeadline = nil
        guard let context = self.context, context.channel.isActive else { return }
        let now = NIODeadline.now()
        let log = self.runner?.logger ?? self.logger
        if self.phase == .reading, !self.readHeld, let since = self.partialFrameSince, now - since >= self.limits.frameTimeout {
            let pending = self.bytesRead - self.bytesFramed
            log.notice("a frame did not arrive in time; closing connection", metadata: [
                "pending_bytes": "\(pending)", "frame_timeout_ms": "\(self.limits.frameTimeout.nanoseconds / 1_000_000)",
            ])
            self.runner?.outbound.sendNow(ReplyEncoding.error(id: nil, RPCError(
                .invalidFrame,
                "a frame must arrive within \(Self.seconds(self.limits.frameTimeout)) of its first byte; \(pending) bytes of it came, the rest did not",
                data: ["receivedBytes": .int(pending)]
            )))
            self.partialFrameSince = nil
            self.endReading(context: context)
        }
        if let idle = self.limits.idleTimeout, self.connection.inFlight == 0, now - self.lastActivity >= idle {
            log.debug("closing an idle connection", metadata: ["idle_timeout_ms": "\(idle.nanoseconds / 1_000_000)"])
            context.close(promise: nil)
            return
        }
        self.scheduleCheck(at: self.nextCheck(now: now))
    }

    private static func seconds(_ amount: TimeAmount) -> String {
        let seconds = Double(amount.nanoseconds) / 1e9
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}

/// Tells the connection's handler what arrives from the socket before the frame decoder
/// cuts it into frames: the idle clock, and whether a frame is left half-received.
final class ReadMeter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let connection: ConnectionHandler

    private let aroundRead: (@Sendable (() -> Void) -> Void)?

    init(connection: ConnectionHandler, aroundRead: (@Sendable (() -> Void) -> Void)?) {
        self.connection = connection
        self.aroundRead = aroundRead
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let framedBefore = self.connection.framedBytes
        self.connection.bytesArrived(self.unwrapInboundIn(data).readableBytes)
        if let aroundRead = self.aroundRead {
            aroundRead { context.fireChannelRead(data) }
        } else {
            context.fireChannelRead(data)
        }
        self.connection.arrivalDecoded(framedBefore: framedBefore)
    }
}

/// What one connection may do, from the server's configuration.
struct ConnectionLimits: Sendable {
    /// Unary requests read ahead of their replies.
    var readAhead: Int
    /// Close a connection after this long with nothing read and nothing running; nil: never.
    var idleTimeout: TimeAmount?
    /// How long a frame may take to arrive once its first byte has.
    var frameTimeout: TimeAmount
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
