import RPCCore

/// A stream opened with ``RPCClient/relayStream(_:params:auth:deliver:)``: cancelling it
/// tells the service to stop (`rpc.cancel` with the id this client gave the request).
public struct RelayedStream: Sendable {
    let cancelAction: @Sendable () -> Void

    /// Stops the stream: no reply of it is delivered after this returns, and the service is
    /// told to end it. Safe to call more than once, or after the stream ended.
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
    public func relay(_ method: String, params: JSONValue?, auth: Auth?, timeout: Duration? = nil) async throws(RPCError) -> EncodedJSON {
        let reply = try await self.roundTrip(method, params ?? .object([:]), timeout: timeout, auth: auth)
        return reply.encodedResult ?? EncodedJSON("null")
    }

    /// Opens a streaming method with `params` and `auth` as the caller's. `deliver` runs for
    /// every reply, in order, on the connection's event loop (it must not block): items
    /// (`.item`), then the end (`.end`) or an error, after which it is not called again.
    /// Results come as the service wrote them, to be passed on without parsing.
    public func relayStream(
        _ method: String, params: JSONValue?, auth: Auth?,
        deliver: @escaping @Sendable (Result<StreamEvent<EncodedJSON, EncodedJSON>, RPCError>) -> Void
    ) async throws(RPCError) -> RelayedStream {
        let connection = try await self.connection()
        let id = connection.makeID()
        let payload = try Self.encodeRequest(id: id, method: method, params: params ?? .object([:]), auth: auth)
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
