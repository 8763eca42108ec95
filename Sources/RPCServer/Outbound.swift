import Foundation
import NIOCore
import RPCCore
import Synchronization

/// The write side of one connection, shared by the tasks of its requests.
///
/// A write goes straight to the channel (on its event loop, where requests usually run
/// anyway); a writer that asks to wait for room then waits while the channel is not
/// writable, which is how a slow reader holds back a stream and nobody else.
final class ConnectionWriter: @unchecked Sendable {
    // `closed` and the waiters are touched only on the channel's event loop.
    private let channel: any Channel
    private var closed = false
    private var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    /// Waits cancelled before they were registered (the cancellation handler can run first).
    private var cancelledEarly: Set<UInt64> = []
    private let nextWaiter = Atomic<UInt64>(0)
    /// The connection stopped reading requests until earlier replies are out.
    let readHeld = Atomic<Bool>(false)

    init(channel: any Channel) {
        self.channel = channel
    }

    /// Writes one frame payload; with `waitForRoom`, then waits until the channel is
    /// writable again (throws if the request is cancelled meanwhile or the peer goes).
    func write(_ buffer: ByteBuffer, waitForRoom: Bool) async throws {
        let loop = self.channel.eventLoop
        if loop.inEventLoop {
            try self.writeNow(buffer)
        } else {
            try await loop.submit { try self.writeNow(buffer) }.get()
        }
        if waitForRoom && !self.channel.isWritable {
            try await self.waitUntilWritable()
        }
    }

    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// Writes on the event loop, without waiting; `promise` completes once the bytes have
    /// gone to the socket (or failed).
    func writeNow(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>? = nil) throws {
        self.channel.eventLoop.assertInEventLoop()
        guard !self.closed else { throw ChannelError.ioOnClosedChannel }
        self.channel.writeAndFlush(buffer, promise: promise)
    }

    private func waitUntilWritable() async throws {
        let loop = self.channel.eventLoop
        let id = self.nextWaiter.add(1, ordering: .relaxed).newValue
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                loop.execute {
                    if self.cancelledEarly.remove(id) != nil {
                        continuation.resume(throwing: CancellationError())
                    } else if self.closed {
                        continuation.resume(throwing: ChannelError.ioOnClosedChannel)
                    } else if self.channel.isWritable {
                        continuation.resume()
                    } else {
                        self.waiters[id] = continuation
                    }
                }
            }
        } onCancel: {
            loop.execute {
                if let waiter = self.waiters.removeValue(forKey: id) {
                    waiter.resume(throwing: CancellationError())
                } else {
                    self.cancelledEarly.insert(id)
                }
            }
        }
    }

    /// A request finished: if reading was held back for it, ask again (the connection's
    /// handler decides).
    func requestFinished() {
        if self.readHeld.load(ordering: .relaxed) { self.channel.read() }
    }

    /// The channel became writable (or not): wake the writers waiting for room.
    func writabilityChanged() {
        self.channel.eventLoop.assertInEventLoop()
        guard self.channel.isWritable, !self.waiters.isEmpty else { return }
        let waiting = self.waiters
        self.waiters = [:]
        for waiter in waiting.values { waiter.resume() }
    }

    /// The channel closed: writes fail from now on, and waiting writers learn it.
    func channelClosed() {
        self.channel.eventLoop.assertInEventLoop()
        self.closed = true
        let waiting = self.waiters
        self.waiters = [:]
        self.cancelledEarly = []
        for waiter in waiting.values { waiter.resume(throwing: ChannelError.ioOnClosedChannel) }
    }
}

/// What a request's handler writes its replies through.
struct Outbound: Sendable {
    let writer: ConnectionWriter

    /// Sends one reply and waits while the peer is slow to read (back-pressure).
    func send(_ payload: Data) async throws {
        try await self.writer.write(ByteBuffer(bytes: payload), waitForRoom: true)
    }

    func send(bytes payload: [UInt8]) async throws {
        try await self.writer.write(ByteBuffer(bytes: payload), waitForRoom: true)
    }

    /// Sends, ignoring a peer that has gone: there is nobody left to tell.
    func sendOrDrop(_ payload: Data) async {
        try? await self.send(payload)
    }

    /// Sends a request's last reply without waiting for room, so it goes out even when the
    /// request has been cancelled (by `rpc.cancel` or shutdown): the client must still learn
    /// how its request ended.
    func sendFinal(_ payload: Data) async {
        try? await self.writer.write(ByteBuffer(bytes: payload), waitForRoom: false)
    }

    /// Sends from the event loop, without waiting (the connection's own error replies).
    func sendNow(_ payload: Data) {
        try? self.writer.writeNow(ByteBuffer(bytes: payload))
    }
}
