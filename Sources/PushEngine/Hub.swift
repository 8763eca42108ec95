import Foundation
import NIOCore
import RPCServer
import Synchronization

/// The devices listening right now, each with a bounded buffer: fan-out never waits for
/// a listener; one that falls `capacity` notifications behind is cut off and resumes from
/// its queue when it listens again.
///
/// A listener buffers while its backlog is sent; then it goes direct: each notification
/// is written to its connection from the connection's event loop, grouped per loop, with
/// no task woken per listener (what ten thousand listeners of one change cost most).
final class Hub: Sendable {
    struct DeviceKey: Hashable, Sendable {
        var family: String
        var deviceId: String
    }

    enum Ending: Sendable {
        case fellBehind
        case revoked
        case shutdown
    }

    final class Listener: Sendable {
        enum Offer {
            case buffered
            /// Reserved for a direct write: call ``write(_:to:)`` on the sink's loop.
            case direct(StreamSink)
            case refused
        }

        private enum Mode {
            case buffering([Outgoing])
            case direct(StreamSink)
            case ended
        }

        private struct State {
            var mode = Mode.buffering([])
            var ending: Ending?
            /// Direct writes handed out and not yet on their way to the peer.
            var pending = 0
            /// The last number written.
            var last: Int64 = 0
            var waiter: CheckedContinuation<Void, Never>?
        }

        private let state = Mutex(State())
        let capacity: Int

        init(capacity: Int) { self.capacity = capacity }

        /// Takes one notification: buffered until the listener goes direct, then reserved
        /// for a direct write. A listener that would fall `capacity` behind is cut off.
        func offer(_ notification: Outgoing) -> Offer {
            let (offer, cut): (Offer, Bool) = self.state.withLock { state in
                switch state.mode {
                case .ended:
                    return (.refused, false)
                case .buffering(var items):
                    guard items.count < self.capacity else { return (.refused, true) }
                    state.mode = .ended  // (so the append below does not copy the buffer)
                    items.append(notification)
                    state.mode = .buffering(items)
                    return (.buffered, false)
                case .direct(let sink):
                    guard state.pending < self.capacity else { return (.refused, true) }
                    state.pending += 1
                    return (.direct(sink), false)
                }
            }
            if cut { self.end(.fellBehind) }
            return offer
        }

        /// Writes a notification ``offer(_:)`` reserved, on the sink's event loop; nothing
        /// once the listener has ended, and nothing expired.
        func write(_ notification: Outgoing, to sink: StreamSink) {
            let now = Date()
            let go = self.state.withLock { state in
                guard case .direct = state.mode, notification.seq > state.last, notification.expiresAt > now else {
                    state.pending -= 1
                    return false
                }
                state.last = notification.seq
                return true
            }
            guard go else { return }
            let written = sink.write(encoded: notification.json) { [weak self] in
                self?.state.withLock { $0.pending -= 1 }
            }
            if !written { self.state.withLock { $0.pending -= 1 } }
        }

        /// After the backlog (up to `last`): sends what was buffered after it, in order, and
        /// from then on takes notifications for direct writes. Runs on the sink's loop, so
        /// these writes go before any direct one (which are queued on that loop).
        func goDirect(_ sink: StreamSink, after last: Int64) async {
            let loop = sink.eventLoop
            guard loop.inEventLoop else {
                try? await loop.submit { self.goDirectOnLoop(sink, after: last) }.get()
                return
            }
            self.goDirectOnLoop(sink, after: last)
        }

        private func goDirectOnLoop(_ sink: StreamSink, after last: Int64) {
            // `write` skips what the backlog had (up to `last`) and what expired meanwhile.
            let buffered: [Outgoing] = self.state.withLock { state in
                guard case .buffering(let items) = state.mode else { return [] }
                state.mode = .direct(sink)
                state.last = last
                state.pending += items.count
                return items
            }
            for notification in buffered { self.write(notification, to: sink) }
        }

        /// Waits until the listener ends (cut off, revoked, shutdown) or the task is
        /// cancelled; returns why (nil: cancelled) and the last number written.
        func waitForEnd() async -> (ending: Ending?, last: Int64) {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ended = self.state.withLock { state in
                        if case .ended = state.mode { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ended { continuation.resume() }
                }
            } onCancel: {
                self.end(nil)
            }
            return self.state.withLock { ($0.ending, $0.last) }
        }

        /// Ends the listener (`why` nil: its request was cancelled); what it had not
        /// written stays in the device's queue.
        func end(_ why: Ending?) {
            let waiter = self.state.withLock { state in
                if state.ending == nil { state.ending = why }
                state.mode = .ended
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    let capacity: Int
    private let state = Mutex(State())

    private struct State {
        var byDevice: [DeviceKey: [Int: Listener]] = [:]
        var next = 0
        var closed = false
        /// Delivered batches not yet committed, by batch: a listener that starts meanwhile
        /// finds them in neither the queue nor its live stream. Kept as delivered (one
        /// batch may hold ten thousand devices); a registration looks through them.
        var inFlight: [Int: [(key: DeviceKey, outgoing: Outgoing)]] = [:]
        var nextBatch = 0
    }

    init(capacity: Int) { self.capacity = capacity }

    /// Registers a listener before its backlog is read, so nothing queued meanwhile is
    /// missed; `inFlight` is what was delivered and is not committed yet, in order (send
    /// it after the backlog, skipping what the backlog had).
    func register(_ key: DeviceKey) -> (listener: Listener, inFlight: [Outgoing], unregister: @Sendable () -> Void) {
        let listener = Listener(capacity: self.capacity)
        let (id, inFlight): (Int?, [Outgoing]) = self.state.withLock { state in
            guard !state.closed else { return (nil, []) }
            state.next += 1
            state.byDevice[key, default: [:]][state.next] = listener
            return (state.next, state.inFlight.values.flatMap { batch in batch.lazy.filter { $0.key == key }.map(\.outgoing) })
        }
        if id == nil { listener.end(.shutdown) }
        let unregister: @Sendable () -> Void = { [weak self] in
            guard let id else { return }
            self?.state.withLock { state in
                state.byDevice[key]?.removeValue(forKey: id)
                if state.byDevice[key]?.isEmpty == true { state.byDevice.removeValue(forKey: key) }
            }
        }
        return (listener, inFlight.sorted { $0.seq < $1.seq }, unregister)
    }

    /// A number for a batch of notifications, to deliver and later settle.
    func newBatch() -> Int {
        self.state.withLock { state in
            state.nextBatch += 1
            return state.nextBatch
        }
    }

    /// Hands a batch of numbered notifications to their devices' listeners, without
    /// waiting, and keeps it as in flight until ``settle(_:)``.
    func deliver(_ notifications: [(key: DeviceKey, outgoing: Outgoing)], batch: Int) {
        let targets: [(Listener, Outgoing)] = self.state.withLock { state in
            state.inFlight[batch] = notifications
            var targets: [(Listener, Outgoing)] = []
            for (key, outgoing) in notifications {
                guard let listeners = state.byDevice[key] else { continue }
                for listener in listeners.values { targets.append((listener, outgoing)) }
            }
            return targets
        }
        // In order: a listener cut off for falling behind gets nothing more, and resumes
        // from its queue. Direct writes go out in one job per event loop.
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, writes: [(Listener, Outgoing, StreamSink)])] = [:]
        for (listener, outgoing) in targets {
            guard case .direct(let sink) = listener.offer(outgoing) else { continue }
            byLoop[ObjectIdentifier(sink.eventLoop), default: (sink.eventLoop, [])].writes.append((listener, outgoing, sink))
        }
        for (loop, writes) in byLoop.values {
            loop.execute {
                for (listener, outgoing, sink) in writes { listener.write(outgoing, to: sink) }
            }
        }
    }

    /// The batch is committed (or failed): listeners starting now read it from the queue.
    func settle(_ batch: Int) {
        _ = self.state.withLock { $0.inFlight.removeValue(forKey: batch) }
    }

    /// Ends the listeners of devices `revoked` says are revoked.
    func cut(family: String, where revoked: (String) -> Bool) {
        let targets = self.state.withLock { state in
            state.byDevice.filter { $0.key.family == family && revoked($0.key.deviceId) }.flatMap { $0.value.values }
        }
        for listener in targets { listener.end(.revoked) }
    }

    /// Ends every listener (shutdown); later ones end at once.
    func closeAll() {
        let all = self.state.withLock { state in
            state.closed = true
            return state.byDevice.values.flatMap { $0.values }
        }
        for listener in all { listener.end(.shutdown) }
    }

    func isListening(_ key: DeviceKey) -> Bool { self.state.withLock { $0.byDevice[key] != nil } }

    /// The families with someone listening now.
    var listeningFamilies: Set<String> { self.state.withLock { Set($0.byDevice.keys.map(\.family)) } }
}
