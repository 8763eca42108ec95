import Logging
import NIOCore
import RPCCore

/// Who is on the other end of a connection, from `SO_PEERCRED` (as of `connect`).
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public var description: String { "pid=\(self.pid) uid=\(self.uid) gid=\(self.gid)" }
}

/// What a handler knows about the request it serves.
public struct RequestContext: Sendable {
    /// Nil for a one-way request.
    public var requestID: RequestID?
    public var method: String
    /// The device credentials sent with the request, if any.
    public var auth: Auth?
    /// The network address the gateway received the request from (an IPv6 /64 or an IPv4
    /// address); nil for a request made on this machine.
    public var from: String? = nil
    /// The peer process; nil only if the kernel would not say.
    public var peer: PeerCredentials?
    /// Unique per connection for the life of the process; also in the log as `CONNECTION_ID`.
    public var connectionID: UInt64
    /// The connection's logger (`peer_uid`, `peer_pid`, `connection_id`).
    let connectionLogger: Logger

    /// Carries `request_id`, `method`, `peer_uid`, `peer_pid`, `connection_id`. Made when
    /// asked for: most requests log nothing, and a logger with two more fields is two
    /// allocations per request.
    public var logger: Logger {
        var logger = self.connectionLogger
        logger[metadataKey: "method"] = "\(self.method)"
        if let id = self.requestID { logger[metadataKey: "request_id"] = "\(id)" }
        return logger
    }

    /// Logs a debug line through ``logger``, which is made only when the line is kept: most
    /// requests log nothing, and making the logger with its two fields was a tenth of what
    /// an `rpc.ping` cost.
    public func debug(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata? = nil) {
        guard self.connectionLogger.logLevel <= .debug else { return }
        self.logger.debug(message(), metadata: metadata())
    }
}

/// Sends the items of a stream. Each `yield` is one reply with `"continues": true`; it
/// waits while the peer is slow to read (back-pressure), and throws once the peer is gone
/// or the stream was cancelled, which ends the handler.
public struct StreamWriter<Item: Encodable & Sendable>: Sendable {
    let id: RequestID?
    let outbound: Outbound

    public func yield(_ item: Item) async throws {
        try Task.checkCancellation()
        guard let id = self.id else { return }  // one-way: nobody listens
        try await self.outbound.send(ReplyEncoding.result(id: id, item, continues: true))
    }

    /// Sends an item encoded already (it must be the JSON of an `Item`): for the same item
    /// sent to many peers, or one read back from storage as JSON.
    public func yield(encoded item: EncodedJSON) async throws {
        try Task.checkCancellation()
        guard let id = self.id else { return }
        try await self.outbound.send(bytes: ReplyEncoding.resultBytes(id: id, encoded: item, continues: true))
    }
}

extension StreamWriter {
    /// The stream's connection, for items that come from elsewhere (a fan-out) and are
    /// written straight from the connection's event loop, without this task awaiting each
    /// one. Nil for a one-way request: nobody listens.
    public var sink: StreamSink? {
        self.id.map { StreamSink(items: ReplyEncoding.StreamItems(id: $0), writer: self.outbound.writer) }
    }
}

/// Writes a stream's items straight to its connection (see ``StreamWriter/sink``). The
/// handler keeps running until the stream ends and returns its final result as usual;
/// items it has not written by then are not sent.
public struct StreamSink: Sendable {
    let items: ReplyEncoding.StreamItems
    let writer: ConnectionWriter

    /// The loop that serves the connection: call ``write(encoded:)`` on it.
    public var eventLoop: any EventLoop { self.writer.eventLoop }

    /// The connection: sinks of many streams may share one.
    public var connection: ObjectIdentifier { ObjectIdentifier(self.writer) }

    /// Writes one item (the JSON of the stream's item type) without flushing it (a caller
    /// writing to many sinks flushes each connection once, with ``flush()``, so the items
    /// to one connection go in one system call); false when the connection has closed
    /// already. ``whenWritten(_:)`` says when it has gone to the socket. On ``eventLoop``.
    public func write(encoded item: EncodedJSON) -> Bool {
        (try? self.writer.writeNow(self.frame(item), flush: false)) != nil
    }

    /// The reply carrying `item`, framed.
    private func frame(_ item: EncodedJSON) -> ByteBuffer {
        Frame.build(capacity: self.items.count(item)) { self.items.write(item, to: &$0) }
    }

    /// Runs `body` on the loop once everything written to the connection so far has gone
    /// to the socket, or the connection has closed: for many items at the cost of one
    /// (writes complete in order). On ``eventLoop``.
    public func whenWritten(_ body: @escaping @Sendable () -> Void) {
        self.writer.afterWrites(body)
    }

    /// Sends the items written with `flush: false` (on ``eventLoop``).
    public func flush() { self.writer.flush() }
}
