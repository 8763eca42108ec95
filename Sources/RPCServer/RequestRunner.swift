import Foundation
import Logging
import NIOCore
import RPCCore

/// Serves the requests of one connection: parses each frame, answers what the connection
/// answers itself (`rpc.cancel`, unknown methods, unreadable requests) on the spot, and
/// starts every other request as its own task on the connection's event loop, so replies
/// may go out in any order.
struct RequestRunner: Sendable {
    let table: MethodTable
    let state: ServerState
    let connection: ConnectionState
    let outbound: Outbound
    let peer: PeerCredentials?
    let metrics: RequestMetrics
    /// Has `connection_id` and the peer's pid and uid.
    let logger: Logger
    /// Told when a request finishes, so the connection may start or read more.
    let handler: NIOLoopBound<ConnectionHandler>

    /// Called on the event loop for each frame read.
    func handle(_ frame: ByteBuffer) {
        let head: RequestHead
        let params: RequestParams?
        switch RequestHead.parseRequestLeavingParams(bytes: Array(frame.readableBytesView)) {
        case .failure(let failure):
            self.logger.debug("unreadable request", metadata: ["error_code": "\(failure.error.code)", "error": "\(failure.error.message)"])
            self.metrics.refused(RequestMetrics.unreadable, failure.error.code)
            self.outbound.sendNow(ReplyEncoding.error(id: failure.id, failure.error))
            return
        case .success(let parsed):
            (head, params) = parsed
        }

        if head.method == Builtin.cancel.name {
            self.cancel(params?.value, head: head)
            return
        }
        let context = RequestContext(
            requestID: head.id,
            method: head.method,
            auth: head.auth,
            from: head.from,
            peer: self.peer,
            connectionID: self.connection.id,
            connectionLogger: self.logger
        )
        guard let entry = self.table.entries[head.method] else {
            context.debug("unknown method")
            self.metrics.refused(RequestMetrics.unknownMethod, .methodNotFound)
            if let id = head.id {
                self.outbound.sendNow(ReplyEncoding.error(id: id, RPCError(
                    .methodNotFound,
                    "this service has no method \"\(head.method)\"; rpc.describe lists its methods",
                    data: ["method": .string(head.method)]
                )))
            }
            return
        }
        if let immediate = entry.immediate, self.connection.mayAnswerAtOnce(id: head.id), self.answer(immediate, params: params, context: context) {
            return
        }
        let outcome = self.connection.start(id: head.id, isStream: entry.isStream) { token in
            await self.run(entry, params: params, context: context, token: token)
        }
        switch outcome {
        case .started:
            break
        case .tooMany:
            context.logger.notice("too many requests in flight on one connection", metadata: ServiceEvent.connectionRejected.metadata)
            self.metrics.refused(head.method, .limitExceeded)
            if let id = head.id {
                self.outbound.sendNow(ReplyEncoding.error(id: id, RPCError(
                    .limitExceeded,
                    "too many requests in flight on this connection (streams included); end some before sending more"
                )))
            }
        case .duplicateID:
            // Not sent to that id: the reply to the request in flight with it is still to
            // come, and a client must not take this refusal for it.
            let id = head.id.map(Self.json) ?? .null
            self.outbound.sendNow(ReplyEncoding.error(id: nil, RPCError(
                .invalidRequest,
                "a request with id \(head.id.map { "\($0)" } ?? "") is still in flight on this connection; ids must be unique among requests in flight",
                data: ["id": id]
            )))
        }
    }

    /// Answers a request on the event loop, with no task (``MethodTable/Entry/immediate``);
    /// false when it must run as a task after all.
    private func answer(_ immediate: MethodTable.Entry.Immediate, params: RequestParams?, context: RequestContext) -> Bool {
        let started = ContinuousClock.now
        var failure: RPCError?
        do {
            switch try immediate(params, context) {
            case .deferred: return false
            case .answered(let reply): if let reply { self.outbound.sendNow(bytes: reply) }
            }
        } catch {
            failure = self.reply(to: error, reason: nil, context: context)
            if let failure, let id = context.requestID { self.outbound.sendNow(ReplyEncoding.error(id: id, failure)) }
        }
        self.state.noteServed()
        self.finished(context, failure: failure, duration: ContinuousClock.now - started)
        return true
    }

    private static func json(_ id: RequestID) -> JSONValue {
        switch id {
        case .int(let value): .int(value)
        case .string(let value): .string(value)
        }
    }

    private func run(_ entry: MethodTable.Entry, params: RequestParams?, context: RequestContext, token: UInt64) async {
        let started = ContinuousClock.now
        var failure: RPCError?
        do {
            try await entry.run(params, context, self.outbound)
        } catch {
            failure = self.reply(to: error, reason: self.connection.reason(token), context: context)
            if let failure, let id = context.requestID {
                await self.outbound.sendFinal(ReplyEncoding.error(id: id, failure))
            }
        }
        self.connection.finish(token)
        self.state.noteServed()
        let handler = self.handler
        if handler.eventLoop.inEventLoop {
            handler.value.requestFinished()
        } else {
            handler.eventLoop.execute { handler.value.requestFinished() }
        }
        self.finished(context, failure: failure, duration: ContinuousClock.now - started)
    }

    /// Counts and logs a request that has been answered.
    private func finished(_ context: RequestContext, failure: RPCError?, duration: Duration) {
        self.metrics.served(context.method, failure: failure, duration: duration)
        let micros = duration.microseconds
        if let failure {
            // A refused request is worth a line at the default level: a client is getting
            // something wrong, and the journal shows what (ERROR_CODE=).
            let level: Logger.Level = failure.code == .internal ? .error : .info
            context.logger.log(level: level, "request failed", metadata: ServiceEvent.requestFailed.metadata.merging([
                "error_code": "\(failure.code)", "error": "\(failure.message)", "duration_us": "\(micros)",
            ]) { _, new in new })
        } else {
            context.debug("request served", metadata: ["duration_us": "\(micros)"])
        }
    }

    /// The error reply for a handler's error, or nil when there is nobody to reply to.
    private func reply(to error: any Error, reason: CancelReason?, context: RequestContext) -> RPCError? {
        if let reason {
            switch reason {
            case .requested: return RPCError(.cancelled, "cancelled by rpc.cancel")
            case .inputEnded: return RPCError(.cancelled, "the stream ended because the connection stopped carrying requests (the client closed its sending side)")
            case .shutdown: return RPCError(.unavailable, "the service is shutting down; reconnect and try again")
            case .peerGone: return nil
            }
        }
        switch error {
        case let error as RPCError:
            return error
        case is CancellationError:
            return RPCError(.unavailable, "the request was cancelled because the service is stopping; try again")
        default:
            context.logger.error("handler threw an unexpected error", metadata: ["error": "\(error)"])
            return RPCError(.internal, "internal error in \(context.method); the service's journal has the details")
        }
    }

    private func cancel(_ rawParams: JSONValue?, head: RequestHead) {
        let reply: Data
        do {
            let params = try ParamsDecoding.decode(CancelParams.self, params: rawParams)
            let cancelled = self.connection.cancel(params.id, reason: .requested)
            guard let id = head.id else { return }
            reply = try ReplyEncoding.result(id: id, CancelResult(cancelled: cancelled))
        } catch let error as RPCError {
            reply = ReplyEncoding.error(id: head.id, error)
        } catch {
            reply = ReplyEncoding.error(id: head.id, RPCError(.internal, "could not encode the reply"))
        }
        if head.id != nil { self.outbound.sendNow(reply) }
    }
}
