import Foundation
import NIOCore
import RPCCore
import Synchronization

/// The write side of one connection, shared by the tasks of its requests. What it writes
/// are whole frames (``Frame``): the connection's pipeline adds no length prefix.
///
/// A write goes straight to the channel (on its event loop, where requests usually run
/// anyway); a writer that asks to wait for room then waits while the channel is not
/// writable, which is how a slow reader holds back a stream and nobody else.
///
/// Replies written in one turn of the event loop go to the socket together: a write asks
/// for a flush at the end of the turn (a task queued behind the ones running), so the
/// replies of 32 requests that finish together leave in one `writev`, and a lone reply
/// waits for nothing but the tasks already queued.
final class ConnectionWriter: Sendable {
    private let channel: any Channel
    /// Touched only on the channel's event loop.
    private let loopState: NIOLoopBoundBox<LoopState>

    private final class LoopState {
        var closed = false
        var waiting: [RoomWait] = []
        /// A flush is queued for the end of this turn of the loop.
        var flushQueued = false
    }

    /// Made on the channel's event loop.
    init(channel: any Channel) {
        self.channel = channel
        self.loopState = NIOLoopBoundBox(LoopState(), eventLoop: channel.eventLoop)
    }

    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// Writes one frame; with `waitForRoom`, then waits until the channel is writable
    /// again (throws if the request is cancelled meanwhile or the peer goes).
    func write(_ frame: ByteBuffer, waitForRoom: Bool) async throws {
        let loop = self.channel.eventLoop
        if loop.inEventLoop {
            try self.writeNow(frame)
        } else {
            try await loop.submit { try self.writeNow(frame) }.get()
        }
        if waitForRoom && !self.channel.isWritable {
            try await self.waitUntilWritable()
        }
    }

    /// Writes one frame on the event loop, without waiting; `promise` completes once the
    /// bytes have gone to the socket (or failed). Without `flush`, they wait for ``flush()``.
    func writeNow(_ frame: ByteBuffer, promise: EventLoopPromise<Void>? = nil, flush: Bool = true) throws {
        let state = self.loopState.value
        guard !state.closed else { throw ChannelError.ioOnClosedChannel }
        self.channel.write(frame, promise: promise)
        if flush && !state.flushQueued {
            state.flushQueued = true
            self.channel.eventLoop.execute {
                self.loopState.value.flushQueued = false
                self.channel.flush()
            }
        }
    }

    /// Sends what was written without flushing (on the event loop).
    func flush() {
        self.channel.flush()
    }

    /// Flushes, and runs `body` on the event loop once everything written so far has gone
    /// to the socket (or failed: the peer has gone); at once when the channel has closed.
    func whenFlushed(_ body: @escaping () -> Void) {
        self.afterWrites(body)
        self.channel.flush()
    }

    /// Runs `body` on the event loop once everything written so far has gone to the socket
    /// or failed (without flushing it). On the event loop.
    func afterWrites(_ body: @escaping () -> Void) {
        guard !self.loopState.value.closed else { return body() }
        // Writes complete in order, so an empty one completes once every write before it
        // has: no write needs a promise of its own for this.
        let promise = self.channel.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenComplete { _ in body() }
        self.channel.write(ByteBuffer(), promise: promise)
    }

    private func waitUntilWritable() async throws {
        let wait = RoomWait()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard wait.start(continuation) else { return }
                self.channel.eventLoop.execute {
                    let state = self.loopState.value
                    if state.closed {
                        wait.finish(throwing: ChannelError.ioOnClosedChannel)
                    } else if self.channel.isWritable {
                        wait.finish()
                    } else {
                        state.waiting.append(wait)
                    }
                }
            }
        } onCancel: {
            wait.finish(throwing: CancellationError())
        }
    }

    /// The channel became writable (or not): wake the writers waiting for room.
    func writabilityChanged() {
        let state = self.loopState.value
        guard self.channel.isWritable, !state.waiting.isEmpty else { return }
        let waiting = state.waiting
        state.waiting = []
        for wait in waiting { wait.finish() }
    }

    /// The channel closed: writes fail from now on, and waiting writers learn it.
    func channelClosed() {
        let state = self.loopState.value
        state.closed = true
        let waiting = state.waiting
        state.waiting = []
        for wait in waiting { wait.finish(throwing: ChannelError.ioOnClosedChannel) }
    }
}

/// One writer waiting for room: resumed once, by whichever comes first (room, the
/// channel closing, the task being cancelled, even before it started waiting).
private final class RoomWait: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Void, any Error>?, outcome: Result<Void, any Error>?)>((nil, nil))

    /// False when the wait was settled already (cancelled first); it has been resumed.
    func start(_ continuation: CheckedContinuation<Void, any Error>) -> Bool {
        let settled: Result<Void, any Error>? = self.state.withLock { state in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        guard let settled else { return true }
        continuation.resume(with: settled)
        return false
    }

    func finish(throwing error: (any Error)? = nil) {
        let continuation = self.state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard state.outcome == nil else { return nil }
            state.outcome = error.map { .failure($0) } ?? .success(())
            defer { state.continuation = nil }
            return state.continuation
        }
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume() }
    }
}
