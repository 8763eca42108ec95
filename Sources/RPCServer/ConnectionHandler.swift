import CSystemd
import Foundation
import Glibc
import Logging
import NIOCore
import NIOExtras
import RPCCore
import ServiceLifecycle

/// Serves one connection: reads frames, starts each request as its own task (so replies
/// may go out in any order), and on the way out lets unary requests finish, ends streams
/// with a final reply, then closes.
struct ConnectionHandler: Sendable {
    let table: MethodTable
    let state: ServerState
    let connection: ConnectionState
    let logger: Logger

    func serve(_ channel: ConnectionChannel, peer: PeerCredentials?) async {
        var logger = self.logger
        logger[metadataKey: "connection_id"] = "\(self.connection.id)"
        if let peer {
            logger[metadataKey: "peer_pid"] = "\(peer.pid)"
            logger[metadataKey: "peer_uid"] = "\(peer.uid)"
        }
        logger.debug("connection opened")
        do {
            try await channel.executeThenClose { inbound, writer in
                let outbound = Outbound(writer: writer)
                do {
                    // On shutdown, stop reading: the frames already read are still served.
                    // (Not cancelOnGracefulShutdown: its merge adds a thread hop per frame.)
                    try await withGracefulShutdownHandler {
                        for try await frame in inbound {
                            await self.handle(frame, outbound: outbound, peer: peer, logger: logger)
                        }
                    } onGracefulShutdown: {
                        channel.channel.close(mode: .input, promise: nil)
                    }
                } catch let error as FrameTooLargeError {
                    logger.notice("frame too large; closing connection", metadata: ["declared_length": "\(error.declaredLength)"])
                    await outbound.sendOrDrop(ReplyEncoding.error(id: nil, error.rpcError))
                } catch let error as NIOExtrasErrors.LeftOverBytesError {
                    await self.refuseTruncatedFrame(pendingBytes: error.leftOverBytes.readableBytes, outbound: outbound, logger: logger)
                } catch ByteToMessageDecoderError.leftoverDataWhenDone(let rest) {
                    await self.refuseTruncatedFrame(pendingBytes: rest.readableBytes, outbound: outbound, logger: logger)
                } catch {
                    logger.debug("connection read failed", metadata: ["error": "\(error)"])
                }
                // Reading is over (end of input, bad framing, or shutdown). Streams end now;
                // unary requests finish and get their replies.
                self.connection.cancelAll(streamsOnly: true, reason: self.state.isShuttingDown ? .shutdown : .peerGone)
                await self.connection.drain()
            }
        } catch {
            logger.debug("connection closed with an error", metadata: ["error": "\(error)"])
        }
        logger.debug("connection closed")
    }

    /// The peer half-closed in the middle of a frame: tell it (it may still read), then close.
    private func refuseTruncatedFrame(pendingBytes: Int, outbound: Outbound, logger: Logger) async {
        logger.notice("connection closed in the middle of a frame", metadata: ["pending_bytes": "\(pendingBytes)"])
        await outbound.sendOrDrop(ReplyEncoding.error(id: nil, RPCError(
            .invalidFrame,
            "the connection ended in the middle of a frame (\(pendingBytes) bytes of it arrived)"
        )))
    }

    private func handle(_ frame: ByteBuffer, outbound: Outbound, peer: PeerCredentials?, logger: Logger) async {
        let head: RequestHead
        let params: JSONValue?
        switch RequestHead.parseRequest(bytes: Array(frame.readableBytesView)) {
        case .failure(let failure):
            logger.debug("unreadable request", metadata: ["error_code": "\(failure.error.code)", "error": "\(failure.error.message)"])
            await outbound.sendOrDrop(ReplyEncoding.error(id: failure.id, failure.error))
            return
        case .success(let parsed):
            (head, params) = parsed
        }

        var logger = logger
        logger[metadataKey: "method"] = "\(head.method)"
        if let id = head.id { logger[metadataKey: "request_id"] = "\(id)" }

        if head.method == Builtin.cancel.name {
            await self.cancel(params, head: head, outbound: outbound)
            return
        }
        guard let entry = self.table.entries[head.method] else {
            logger.debug("unknown method")
            if let id = head.id {
                await outbound.sendOrDrop(ReplyEncoding.error(id: id, RPCError(
                    .methodNotFound,
                    "this service has no method \"\(head.method)\"; rpc.describe lists its methods",
                    data: ["method": .string(head.method)]
                )))
            }
            return
        }
        let context = RequestContext(
            requestID: head.id,
            method: head.method,
            auth: head.auth,
            peer: peer,
            connectionID: self.connection.id,
            logger: logger
        )
        let outcome = self.connection.start(id: head.id, isStream: entry.isStream) { token in
            await self.run(entry, params: params, context: context, outbound: outbound, token: token)
        }
        switch outcome {
        case .started:
            break
        case .tooMany:
            logger.notice("too many requests in flight on one connection", metadata: ServiceEvent.connectionRejected.metadata)
            if let id = head.id {
                await outbound.sendOrDrop(ReplyEncoding.error(id: id, RPCError(
                    .limitExceeded,
                    "too many requests in flight on this connection; wait for replies before sending more"
                )))
            }
        case .duplicateID:
            await outbound.sendOrDrop(ReplyEncoding.error(id: head.id, RPCError(
                .invalidRequest,
                "a request with id \(head.id.map { "\($0)" } ?? "") is still in flight on this connection; ids must be unique among requests in flight"
            )))
        }
    }

    private func run(_ entry: MethodTable.Entry, params: JSONValue?, context: RequestContext, outbound: Outbound, token: UInt64) async {
        let started = ContinuousClock.now
        var failure: RPCError?
        do {
            try await entry.run(params, context, outbound)
        } catch {
            failure = self.reply(to: error, reason: self.connection.reason(token), context: context)
            if let failure, let id = context.requestID {
                await outbound.sendFinal(ReplyEncoding.error(id: id, failure))
            }
        }
        self.connection.finish(token)
        self.state.noteServed()
        let micros = (ContinuousClock.now - started).microseconds
        if let failure {
            // A refused request is worth a line at the default level: a client is getting
            // something wrong, and the journal shows what (ERROR_CODE=).
            let level: Logger.Level = failure.code == .internal ? .error : .info
            context.logger.log(level: level, "request failed", metadata: ServiceEvent.requestFailed.metadata.merging([
                "error_code": "\(failure.code)", "error": "\(failure.message)", "duration_us": "\(micros)",
            ]) { _, new in new })
        } else {
            context.logger.debug("request served", metadata: ["duration_us": "\(micros)"])
        }
    }

    /// The error reply for a handler's error, or nil when there is nobody to reply to.
    private func reply(to error: any Error, reason: CancelReason?, context: RequestContext) -> RPCError? {
        if let reason {
            switch reason {
            case .requested: return RPCError(.cancelled, "cancelled by rpc.cancel")
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

    private func cancel(_ rawParams: JSONValue?, head: RequestHead, outbound: Outbound) async {
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
        if head.id != nil { await outbound.sendOrDrop(reply) }
    }
}


/// The peer's credentials from `SO_PEERCRED`.
func peerCredentials(of channel: any Channel) async -> PeerCredentials? {
    guard let provider = channel as? any SocketOptionProvider else { return nil }
    let credentials: screentime_ucred? = try? await provider.unsafeGetSocketOption(
        level: SocketOptionLevel(SOL_SOCKET),
        name: SocketOptionName(SO_PEERCRED)
    ).get()
    return credentials.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
}
