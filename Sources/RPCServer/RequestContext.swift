import Logging
import RPCCore

/// Who is on the other end of a connection, from `SO_PEERCRED` (as of `connect`).
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public var description: String { "pid=\(self.pid) uid=\(self.uid) gid=\(self.gid)" }
}

/// What a handler knows about the request it serves.
public struct RequestContext: Sendable {
    /// Nil for a one-way request.
    public var requestID: RequestID?
    public var method: String
    /// The device credentials sent with the request, if any.
    public var auth: Auth?
    /// The peer process; nil only if the kernel would not say.
    public var peer: PeerCredentials?
    /// Unique per connection for the life of the process; also in the log as `CONNECTION_ID`.
    public var connectionID: UInt64
    /// Carries `request_id`, `method`, `peer_uid`, `peer_pid`, `connection_id`.
    public var logger: Logger
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
