import Foundation
import RPCClient
import RPCCore
import Synchronization

/// The services' own Unix sockets, on the server itself: what `screentimectl` uses locally
/// and what the tests use. Each request goes to the socket of its method's service
/// (`store.modify` → `<runtime>/store.sock`), on one ``RPCClient`` per service and
/// credential, so requests are pipelined as on any client of the services.
///
/// The state follows the store: a call that cannot reach a service makes it `offline`, and
/// a probe (`rpc.ping` to the store, with backoff) makes it `connected` again as soon as
/// the store answers. A call refused with `device_revoked` makes it `revoked`: calls with
/// that credential fail at once from then on, until ``credentialsChanged()``.
public final class UnixSocketTransport: Transport {
    public let runtimeDirectory: String
    private let callTimeout: Duration
    private let connectTimeout: Duration
    private let backoff: Backoff
    private let clients = Mutex<[ClientKey: RPCClient]>([:])
    private let broadcast = StateBroadcast(.reconnecting)
    private let probe = Mutex<Task<Void, Never>?>(nil)
    /// Credentials the server said were revoked, and its refusal.
    private let revoked = Mutex<[String: RPCError]>([:])

    private struct ClientKey: Hashable {
        var service: String
        var token: String?
    }

    /// - Parameters:
    ///   - runtimeDirectory: where the sockets are (`/run/screentime`, or a test's `run/`).
    ///   - connectTimeout: how long a call keeps trying to connect before `unavailable`.
    public init(runtimeDirectory: String, callTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(1),
                backoff: Backoff = Backoff(initial: .milliseconds(50), maximum: .seconds(2))) {
        self.runtimeDirectory = runtimeDirectory
        self.callTimeout = callTimeout
        self.connectTimeout = connectTimeout
        self.backoff = backoff
        self.startProbe()
    }

    public var state: ConnectionState { self.broadcast.current }
    public func states() -> AsyncStream<ConnectionState> { self.broadcast.stream() }

    public func call(_ request: TransportRequest) async throws(RPCError) -> JSONValue {
        if let token = request.auth?.token, let refusal = self.revoked.withLock({ $0[token] }) { throw refusal }
        let client = self.client(request.service, request.auth)
        do {
            let result = try await client.call(request.method, params: request.params, timeout: request.timeout)
            if self.broadcast.current != .revoked { self.broadcast.set(.connected) }
            return result
        } catch {
            self.observe(error, token: request.auth?.token)
            throw error
        }
    }

    public func stream(_ request: TransportRequest) -> AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error> {
        if let token = request.auth?.token, let refusal = self.revoked.withLock({ $0[token] }) {
            return AsyncThrowingStream { $0.finish(throwing: refusal) }
        }
        let upstream = self.client(request.service, request.auth).stream(request.method, params: request.params)
        let (events, continuation) = AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error>.makeStream()
        let relay = Task {
            do {
                for try await event in upstream {
                    if self.broadcast.current != .revoked { self.broadcast.set(.connected) }
                    continuation.yield(event)
                }
                continuation.finish()
            } catch {
                if let error = error as? RPCError { self.observe(error, token: request.auth?.token) }
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in relay.cancel() }
        return events
    }

    public func close() async {
        self.probe.withLock { $0?.cancel() }
        let all = self.clients.withLock { clients in
            defer { clients = [:] }
            return Array(clients.values)
        }
        for client in all { await client.close() }
        self.broadcast.finish()
    }

    /// The socket a service listens on.
    public func socketPath(_ service: String) -> String {
        (self.runtimeDirectory as NSString).appendingPathComponent("\(service).sock")
    }

    private func client(_ service: String, _ auth: Auth?) -> RPCClient {
        self.clients.withLock { clients in
            let key = ClientKey(service: service, token: auth?.token)
            if let client = clients[key] { return client }
            let client = RPCClient(configuration: ClientConfiguration(
                socketPath: self.socketPath(service), callTimeout: self.callTimeout, connectTimeout: self.connectTimeout, auth: auth))
            clients[key] = client
            return client
        }
    }

    /// The device has a new credential: the old one's refusal no longer applies.
    public func credentialsChanged() async {
        self.revoked.withLock { $0 = [:] }
        if self.broadcast.current == .revoked {
            self.broadcast.set(.reconnecting)
            self.startProbe()
        }
    }

    /// A service that cannot be reached takes the transport offline, and starts the probe;
    /// a revoked credential takes it to `revoked`.
    private func observe(_ error: RPCError, token: String?) {
        if error.code == .deviceRevoked, let token {
            self.revoked.withLock { $0[token] = error }
            self.broadcast.set(.revoked)
            return
        }
        guard error.code == .unavailable, self.broadcast.current != .revoked else { return }
        if self.broadcast.current == .connected { self.broadcast.set(.offline) }
        self.startProbe()
    }

    private func startProbe() {
        self.probe.withLock { probe in
            if let running = probe, !running.isCancelled { return }
            probe = Task { [weak self] in
                var attempt = 0
                while !Task.isCancelled {
                    guard let self else { return }
                    if self.broadcast.current == .connected || self.broadcast.current == .revoked { break }
                    do {
                        _ = try await self.client("store", nil).call(Builtin.ping.name, params: [:], timeout: .seconds(2))
                        if self.broadcast.current != .revoked { self.broadcast.set(.connected) }
                        break
                    } catch {
                        attempt += 1
                        if attempt >= self.backoff.attemptsBeforeOffline, self.broadcast.current != .revoked { self.broadcast.set(.offline) }
                    }
                    try? await Task.sleep(for: self.backoff.delay(attempt: attempt))
                }
                self?.probe.withLock { $0 = nil }
            }
        }
    }
}
