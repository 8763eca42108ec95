import NIOCore
import NIOWebSocket
import RPCClient
import RPCCore
import Synchronization
import WireJSON

/// Writes one relayed stream's replies to its WebSocket as they come from the service,
/// straight from the service connection's event loop (the socket's own: see
/// ``StreamConnections``), with no task and no queue in between. The result the service
/// wrote is passed on as it is, under the device's own request id.
///
/// Bounded: a device that falls `limit` replies behind (written to the socket but not yet
/// gone to the network) has the stream ended with `limit_exceeded`, as the push service
/// cuts off a listener that does not read.
final class StreamForwarder: Sendable {
    enum Outcome: Sendable {
        /// The service ended the stream (its last reply, or its error, is written).
        case ended
        /// The device fell behind; the `limit_exceeded` reply is written: stop the service's stream.
        case overflowed
        /// Ended from our side (`rpc.cancel`, the socket closing): nothing more is written.
        case cancelled
    }

    private struct State {
        var outcome: Outcome?
        var waiting: CheckedContinuation<Outcome, Never>?
        var pending = 0
    }

    private let writer: MessageWriter
    private let id: RequestID
    private let items: ReplyEncoding.StreamItems
    private let limit: Int
    private let service: String
    private let state = Mutex(State())

    init(writer: MessageWriter, id: RequestID, limit: Int, service: String) {
        self.writer = writer
        self.id = id
        self.items = ReplyEncoding.StreamItems(id: id)
        self.limit = limit
        self.service = service
    }

    /// One reply from the service, on its connection's event loop: the socket's own, so
    /// nothing else writes to the socket while this does (a close frame included).
    func deliver(_ event: Result<StreamEvent<EncodedJSON, EncodedJSON>, RPCError>) {
        enum Reply {
            case item(EncodedJSON)
            case last([UInt8])
        }
        let reply: Reply? = self.state.withLock { state in
            guard state.outcome == nil else { return nil }
            switch event {
            case .success(.item(let item)):
                guard state.pending < self.limit else {
                    Self.end(&state, .overflowed)
                    return .last(Array(ReplyEncoding.error(id: self.id, RPCError(.limitExceeded, "this stream's replies were not read fast enough (over \(self.limit) waiting); it was ended, call it again"))))
                }
                state.pending += 1
                return .item(item)
            case .success(.end(let end)):
                Self.end(&state, .ended)
                return .last(ReplyEncoding.resultBytes(id: self.id, encoded: end))
            case .failure(let error):
                Self.end(&state, .ended)
                return .last(Array(ReplyEncoding.error(id: self.id, ServiceRelay.presentable(error, service: self.service))))
            }
        }
        switch reply {
        case nil:
            return
        case .last(let bytes):
            self.writer.write(bytes)
        case .item(let item):
            // Written around the item straight into the frame; counted until it has gone
            // to the network (or the socket is gone).
            self.writer.write(count: self.items.count(item)) { self.items.write(item, to: &$0) }
                .whenComplete { _ in self.state.withLock { $0.pending -= 1 } }
        }
    }

    /// Ends the stream from our side; replies that come after are dropped.
    func cancel() {
        self.state.withLock { state in
            if state.outcome == nil { Self.end(&state, .cancelled) }
        }
    }

    /// How the stream ended, once it has.
    func ended() async -> Outcome {
        await withCheckedContinuation { continuation in
            let outcome: Outcome? = self.state.withLock { state in
                if state.outcome == nil { state.waiting = continuation }
                return state.outcome
            }
            if let outcome { continuation.resume(returning: outcome) }
        }
    }

    private static func end(_ state: inout State, _ outcome: Outcome) {
        state.outcome = outcome
        state.waiting?.resume(returning: outcome)
        state.waiting = nil
    }
}
