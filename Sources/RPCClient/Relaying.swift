import Foundation
import NIOCore
import RPCCore

/// A stream opened with ``RPCClient/relayStream(_:params:auth:deliver:)``: cancelling it
/// tells the service to stop (`rpc.cancel` with the id this client gave the request).
public struct RelayedStream: Sendable {
    let cancelAction: @Sendable () -> Void

    /// Stops the stream: no reply of it is delivered after this returns, and the service is
    /// told to end it. Safe to call more than once, or after the stream ended.
    public func cancel() { self.cancelAction() }
}

/// A unary call started with ``RPCClient/relayNow(_:params:auth:timeout:completion:)``.
public struct RelayedCall: Sendable {
    let cancelAction: @Sendable () -> Void

    /// Ends the call with `cancelled` (its completion runs with that error), unless its
    /// reply came first. The service is not told: a unary call runs to its end there.
    public func cancel() { self.cancelAction() }
}

// Calls made on behalf of another party (the gateway, for a device): the method, the
// parameters and the credentials come from that party's own envelope, as JSON. The id
// on the service's connection is always this client's own, so requests of many devices
// sharing one connection never collide; the caller maps replies back to its peer's id.
extension RPCClient {
    /// Calls a unary method with `params` as they came and `auth` as the caller's; returns
    /// the `result` as the service wrote it (to be passed on without parsing), or throws
    /// the service's error as it sent it.
    /// `from`: the network address the caller's request came from (the gateway's), for the
    /// service's limits.
    public func relay(_ method: String, params: JSONValue?, auth: Auth?, from: String? = nil, timeout: Duration? = nil) async throws(RPCError) -> EncodedJSON {
        let reply = try await self.roundTrip(method, params ?? .object([:]), timeout: timeout, auth: auth, from: from)
        return reply.encodedResult ?? EncodedJSON("null")
    }

    /// Starts a unary call without suspending, when it can start at once: a connection is
    /// open and a call slot is free. `completion` runs once (it must not block), with the
    /// result as the service wrote it or the error: on the connection's event loop for a
    /// reply, a timeout or a lost connection; before this returns, on the caller's thread,
    /// when the request cannot be encoded or sent; on the thread that calls
    /// ``RelayedCall/cancel()``. Nil when
    /// the call cannot start now; then call ``relay(_:params:auth:timeout:)``, which waits
    /// for a slot and connects. For a caller already on the connection's event loop, a
    /// call then costs no task and no change of thread.
    public func relayNow(
        _ method: String, params: JSONValue?, auth: Auth?, timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<EncodedJSON, RPCError>) -> Void
    ) -> RelayedCall? {
        guard let connection = self.connectionAtHand() else { return nil }
        guard self.gate.tryEnter() else { return nil }
        let id = connection.makeID()
        let payload: Data
        do {
            payload = try Self.encodeRequest(id: id, method: method, params: params ?? .object([:]), auth: auth)
        } catch {
            self.gate.leave()
            completion(.failure(error))
            return RelayedCall {}
        }
        let deadline = timeout ?? self.configuration.callTimeout
        let timer = connection.channel.eventLoop.scheduleTask(in: TimeAmount(deadline)) {
            connection.fail(id, with: RPCError(.timeout, "\(method) did not answer within \(deadline)"))
        }
        let gate = self.gate
        do {
            try connection.register(id, .callback { reply in
                timer.cancel()
                gate.leave()
                completion(reply.map { $0.encodedResult ?? EncodedJSON("null") })
            })
        } catch {
            timer.cancel()
            gate.leave()
            completion(.failure(error))
            return RelayedCall {}
        }
        connection.send(payload) { error in connection.fail(id, with: error) }
        return RelayedCall { connection.fail(id, with: RPCError(.cancelled, "the call was cancelled")) }
    }

    /// Opens a streaming method with `params` and `auth` as the caller's. `deliver` runs for
    /// every reply, in order, on the connection's event loop (it must not block): items
    /// (`.item`), then the end (`.end`) or an error, after which it is not called again.
    /// Results come as the service wrote them, to be passed on without parsing.
    public func relayStream(
        _ method: String, params: JSONValue?, auth: Auth?,
        deliver: @escaping @Sendable (Result<StreamEvent<EncodedJSON, EncodedJSON>, RPCError>) -> Void
    ) async throws(RPCError) -> RelayedStream {
        try await self.openRelayed(method, params: params ?? .object([:]), auth: auth, deliver: deliver)
    }

    /// The same for one of this client's own streams (no caller to act for): its replies
    /// handed to `deliver` on the connection's event loop as they come, with no task and no
    /// stream of its own per reply (a follower of `store.watch` reads thousands a second).
    public func streamOnLoop<P, I, E>(
        _ spec: StreamSpec<P, I, E>, _ params: P,
        deliver: @escaping @Sendable (Result<StreamEvent<EncodedJSON, EncodedJSON>, RPCError>) -> Void
    ) async throws(RPCError) -> RelayedStream {
        try await self.openRelayed(spec.name, params: params, auth: nil, deliver: deliver)
    }

    private func openRelayed<P: Encodable>(
        _ method: String, params: P, auth: Auth?,
        deliver: @escaping @Sendable (Result<StreamEvent<EncodedJSON, EncodedJSON>, RPCError>) -> Void
    ) async throws(RPCError) -> RelayedStream {
        let connection = try await self.connection()
        let id = connection.makeID()
        let payload = try Self.encodeRequest(id: id, method: method, params: params, auth: auth)
        try connection.register(id, .stream { reply in
            switch reply {
            case .failure(let error):
                deliver(.failure(error))
            case .success(let head):
                let result = head.encodedResult ?? EncodedJSON("null")
                deliver(.success(head.continues == true ? .item(result) : .end(result)))
            }
        })
        connection.send(payload) { error in connection.fail(id, with: error) }
        return RelayedStream {
            // Only a stream still registered is cancelled on the service: once it ended (or
            // was cancelled already) there is nothing to stop.
            guard connection.unregister(id) else { return }
            if let cancel = try? Self.encodeRequest(id: nil, method: Builtin.cancel.name, params: CancelParams(id: id), auth: nil) {
                connection.send(cancel) { _ in }
            }
        }
    }
}
