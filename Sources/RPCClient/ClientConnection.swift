import Foundation
import NIOCore
import RPCCore
import Synchronization

/// What a reply is delivered to.
enum Waiter: Sendable {
    /// A unary call: the reply, parsed, once.
    case unary(CheckedContinuation<ReplyHead, any Error>)
    /// A unary call answered on the connection's event loop: the reply, parsed, once.
    case callback(@Sendable (Result<ReplyHead, RPCError>) -> Void)
    /// A stream: every reply, parsed.
    case stream(@Sendable (Result<ReplyHead, RPCError>) -> Void)
}

/// A unary call's request never reached the service: its write failed, or the connection
/// closed before the write went out (the service restarted, and this client had not yet
/// seen its old connection close). Safe to send again on a new connection.
struct UnsentRequest: Error {
    let error: RPCError
}

/// One connection to a service: writes requests, routes replies to their waiters by id.
final class ClientConnection: Sendable {
    let channel: any Channel
    private let state = Mutex(Routing())

    private struct Routing {
        var nextID: Int64 = 1
        var waiters: [RequestID: Waiter] = [:]
        /// Unary calls sent with ``sendTracked(_:id:)`` whose write has not gone out yet.
        var unwritten: Set<RequestID> = []
        var closedWith: RPCError?
    }

    init(channel: any Channel) {
        self.channel = channel
    }

    var isUsable: Bool { self.channel.isActive && self.state.withLock { $0.closedWith == nil } }

    func makeID() -> RequestID {
        self.state.withLock { routing in
            defer { routing.nextID += 1 }
            return .int(routing.nextID)
        }
    }

    /// Registers a waiter; fails at once if the connection has already closed.
    func register(_ id: RequestID, _ waiter: Waiter) throws(RPCError) {
        let closed: RPCError? = self.state.withLock { routing in
            if let error = routing.closedWith { return error }
            routing.waiters[id] = waiter
            return nil
        }
        if let closed { throw closed }
    }

    /// Writes without waiting; `failed` runs if the write does not go out.
    func send(_ payload: Data, failed: @escaping @Sendable (RPCError) -> Void) {
        self.channel.writeAndFlush(ByteBuffer(bytes: payload)).whenFailure { error in
            failed(RPCError.connectionFailed("could not send the request: \(error)"))
        }
    }

    /// Writes a unary call's request; while the write has not gone out, losing the
    /// connection fails the call with ``UnsentRequest`` (so the caller may send it again).
    func sendTracked(_ payload: Data, id: RequestID) {
        self.state.withLock { _ = $0.unwritten.insert(id) }
        self.channel.writeAndFlush(ByteBuffer(bytes: payload)).whenComplete { result in
            switch result {
            case .success:
                self.state.withLock { _ = $0.unwritten.remove(id) }
            case .failure(let error):
                self.fail(id, with: RPCError.connectionFailed("could not send the request: \(error)"), unsent: true)
            }
        }
    }

    func send(_ payload: Data) async throws(RPCError) {
        do {
            try await self.channel.writeAndFlush(ByteBuffer(bytes: payload)).get()
        } catch {
            throw RPCError.connectionFailed("could not send the request: \(error)")
        }
    }

    /// Removes a waiter and fails it (timeout, caller cancelled; `unsent`: its write failed).
    func fail(_ id: RequestID, with error: RPCError, unsent: Bool = false) {
        let waiter = self.state.withLock { routing in
            routing.unwritten.remove(id)
            return routing.waiters.removeValue(forKey: id)
        }
        guard let waiter else { return }
        Self.fail(waiter, error, unsent: unsent)
    }

    func forget(_ id: RequestID) {
        self.state.withLock { routing in
            routing.waiters.removeValue(forKey: id)
            routing.unwritten.remove(id)
        }
    }

    /// Removes a waiter; whether it was still registered.
    func unregister(_ id: RequestID) -> Bool {
        self.state.withLock { routing in
            routing.unwritten.remove(id)
            return routing.waiters.removeValue(forKey: id) != nil
        }
    }

    /// Routes one reply frame.
    func deliver(_ payload: [UInt8]) {
        guard let head = try? ReplyHead.parse(bytes: payload) else {
            self.failAll(RPCError(.invalidJSON, "the service sent a reply that is not valid JSON"))
            return
        }
        guard let id = head.id else {
            // A reply to no request: the service refused the connection or a frame.
            self.failAll(head.error ?? RPCError(.internal, "the service sent a reply without an id"))
            return
        }
        let waiter: Waiter? = self.state.withLock { routing in
            // A reply means the request went out, whatever its write's callback says.
            if !routing.unwritten.isEmpty { routing.unwritten.remove(id) }
            guard let waiter = routing.waiters[id] else { return nil }
            if case .stream = waiter, head.continues == true { return waiter }
            routing.waiters[id] = nil
            return waiter
        }
        switch waiter {
        case .unary(let continuation):
            if let error = head.error { continuation.resume(throwing: error) } else { continuation.resume(returning: head) }
        case .callback(let deliver), .stream(let deliver):
            if let error = head.error { deliver(.failure(error)) } else { deliver(.success(head)) }
        case nil:
            break  // a reply to a call that timed out or was cancelled
        }
    }

    /// The connection is gone: every waiter gets `error`.
    func failAll(_ error: RPCError) {
        let (waiters, unwritten) = self.state.withLock { routing in
            if routing.closedWith == nil { routing.closedWith = error }
            defer {
                routing.waiters = [:]
                routing.unwritten = []
            }
            return (routing.waiters, routing.unwritten)
        }
        for (id, waiter) in waiters { Self.fail(waiter, error, unsent: unwritten.contains(id)) }
    }

    private static func fail(_ waiter: Waiter, _ error: RPCError, unsent: Bool = false) {
        switch waiter {
        case .unary(let continuation): continuation.resume(throwing: unsent ? UnsentRequest(error: error) : error)
        case .callback(let deliver), .stream(let deliver): deliver(.failure(error))
        }
    }
}

/// Hands every reply frame to the connection, and tells it when the socket closes.
final class ReplyRouter: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let connection: ClientConnection

    init(connection: ClientConnection) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        self.connection.deliver(Array(frame.readableBytesView))
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.connection.failAll(RPCError.connectionFailed("the connection to the service closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let reason: RPCError
        if let tooLarge = error as? FrameTooLargeError {
            reason = RPCError(.frameTooLarge, "the service sent a reply of \(tooLarge.declaredLength) bytes, over this client's limit of \(tooLarge.maximumFrameSize)")
        } else {
            reason = RPCError.connectionFailed("the connection to the service failed: \(error)")
        }
        self.connection.failAll(reason)
        context.close(promise: nil)
    }
}
