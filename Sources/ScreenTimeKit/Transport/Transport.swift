import Foundation
import RPCClient
import RPCCore

/// Where a transport stands with the server.
public enum ConnectionState: String, Sendable, Hashable {
    /// Requests go out now.
    case connected
    /// The connection was lost (or never made); the transport is trying again.
    case reconnecting
    /// Several attempts failed: the server is unreachable for now. The transport keeps
    /// trying, more slowly; writes wait in the offline queue.
    case offline
    /// The server removed this device from its family (its credential was revoked): the
    /// transport makes no more connections and every call fails at once with
    /// `device_revoked`; the offline queue keeps its writes, unsent. Only a new credential
    /// (pairing the device again) leaves this state. Reported once, as a state change.
    case revoked
    /// The app went to the background (``ScreenTimeClient/suspend(within:)``): the
    /// connection was closed cleanly and none is made until ``Transport/resume()``; calls
    /// fail at once with `unavailable`.
    case suspended
}

/// One request envelope, before the transport gives it an id: the method, its parameters
/// as JSON, and the device's credential (none for the server's own administrator, or a
/// device that has nothing yet).
public struct TransportRequest: Sendable {
    public var method: String
    public var params: JSONValue
    public var auth: Auth?
    /// The call's deadline; the transport's default when nil. Streams have none.
    public var timeout: Duration?

    public init(method: String, params: JSONValue = [:], auth: Auth? = nil, timeout: Duration? = nil) {
        self.method = method
        self.params = params
        self.auth = auth
        self.timeout = timeout
    }

    /// The service a method belongs to: `store.modify` → `store`.
    public var service: String {
        self.method.split(separator: ".", maxSplits: 1).first.map(String.init) ?? self.method
    }
}

/// How the library reaches the server: one request in, its reply (or a stream of replies)
/// out, and the connection's state as it changes. The same JSON envelopes travel on every
/// transport (docs/protocol.md); only how they get there differs:
///
/// - ``UnixSocketTransport``: the services' own sockets, on the server itself (the CLI,
///   the tests).
/// - ``WebSocketTransport``: one TLS WebSocket to the gateway, its key pinned from the
///   pairing URI (a phone, a remote CLI).
///
/// Every failure is an `RPCError`: the service's own code and message, or `unavailable`,
/// `timeout`, `cancelled` (and the kit's `pin_mismatch`) from the client side.
public protocol Transport: Sendable {
    /// Sends a unary request and returns its `result`.
    func call(_ request: TransportRequest) async throws(RPCError) -> JSONValue

    /// Sends a streaming request: every `"continues": true` reply is an item, the last
    /// reply the end. Ending the iteration early cancels the request (`rpc.cancel`).
    func stream(_ request: TransportRequest) -> AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error>

    /// The connection's state now, then each change, for as long as the caller listens.
    func states() -> AsyncStream<ConnectionState>

    /// The connection's state now.
    var state: ConnectionState { get }

    /// Closes the connection; calls in flight fail with `unavailable`.
    func close() async

    /// The device's credential changed: a transport that authenticates its connection
    /// (rather than each request) connects again with the new one; a `revoked` transport
    /// starts again with it.
    func credentialsChanged() async

    /// Closes the connection cleanly, so the server knows at once the device is gone (and
    /// wakes it instead), and makes none until ``resume()``. Returns once it is closed.
    func suspend() async

    /// Connects again after ``suspend()``.
    func resume() async
}

extension Transport {
    public func credentialsChanged() async {}
    /// A transport with no lasting connection to the server has nothing to close.
    public func suspend() async {}
    public func resume() async {}
}

extension Transport {
    /// Waits until the transport is connected (or the task is cancelled). A revoked
    /// transport connects only once the device has a new credential.
    public func waitUntilConnected() async {
        if self.state == .connected { return }
        for await state in self.states() where state == .connected { return }
    }
}

extension ErrorCode {
    /// The server's TLS key is not the one the pairing URI pinned: the connection is
    /// refused, never made without the check.
    public static let pinMismatch = ErrorCode("pin_mismatch")
}

extension Transport {
    /// Calls a declared method with typed parameters and result, as `auth` (none: the
    /// server's administrator locally, an unpaired device through the gateway). What the
    /// kit's own parts do; a program that drives the wire itself (`screentimectl`'s device
    /// mode) calls the same way on either transport.
    public func call<P, R>(_ spec: MethodSpec<P, R>, _ params: P, auth: Auth?, timeout: Duration? = nil) async throws(RPCError) -> R {
        let result = try await self.call(TransportRequest(method: spec.name, params: try WireValues.encode(params), auth: auth, timeout: timeout))
        return try WireValues.decode(R.self, from: result, what: "the result of \(spec.name)")
    }

    /// Opens a declared stream with typed items and end.
    public func stream<P, I, E>(_ spec: StreamSpec<P, I, E>, _ params: P, auth: Auth?) -> AsyncThrowingStream<StreamEvent<I, E>, any Error> {
        let request: TransportRequest
        do {
            request = TransportRequest(method: spec.name, params: try WireValues.encode(params), auth: auth)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
        let upstream = self.stream(request)
        let (events, continuation) = AsyncThrowingStream<StreamEvent<I, E>, any Error>.makeStream()
        let relay = Task {
            do {
                for try await event in upstream {
                    switch event {
                    case .item(let value): continuation.yield(.item(try WireValues.decode(I.self, from: value, what: "an item of \(spec.name)")))
                    case .end(let value): continuation.yield(.end(try WireValues.decode(E.self, from: value, what: "the end of \(spec.name)")))
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in relay.cancel() }
        return events
    }
}
