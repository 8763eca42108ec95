import ChangeFeed
import Foundation
import Logging
import NIOCore
import NIOPosix
import RPCClient
import RPCCore

/// Passes a device's requests to the services, as that device: the allowlist first, then
/// the device's own credential in `auth` so each service checks it again.
///
/// Unary calls of every device share one connection per service and event loop (the
/// client numbers the requests itself, so ids of different devices never collide; the
/// caller puts its device's id back on the reply). A device's calls go on its socket's
/// event loop's connection, so the reply comes back on the thread that writes it to the
/// device. Streams run on connections of their own, a few streams to each
/// (``StreamConnections``).
public final class ServiceRelay: Sendable {
    public let allowlist: Allowlist
    public let authenticator: DeviceAuthenticator
    let clients: [String: RPCClient]
    /// For devices' unary calls: by service, then by event loop.
    let loopClients: [String: [ObjectIdentifier: RPCClient]]
    /// For `/healthz`: connections of their own, quick to give up on a service that is down.
    let healthClients: [String: RPCClient]
    /// Connections for streams, by service.
    let streams: [String: StreamConnections]
    let configuration: GatewayConfiguration

    public init(configuration: GatewayConfiguration, allowlist: Allowlist = .standard, logger: Logger = Logger(label: "gateway")) {
        self.configuration = configuration
        self.allowlist = allowlist
        var clients: [String: RPCClient] = [:]
        for service in allowlist.services {
            clients[service] = RPCClient(configuration: Self.clientConfiguration(configuration, service: service))
        }
        self.clients = clients
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
        var loopClients: [String: [ObjectIdentifier: RPCClient]] = [:]
        for service in allowlist.services {
            for loop in loops {
                loopClients[service, default: [:]][ObjectIdentifier(loop)] = RPCClient(
                    configuration: Self.clientConfiguration(configuration, service: service), eventLoopGroup: loop)
            }
        }
        self.loopClients = loopClients
        self.healthClients = clients.mapValues { client in
            var quick = client.configuration
            quick.connectTimeout = .seconds(2)
            quick.callTimeout = .seconds(3)
            return RPCClient(configuration: quick)
        }
        var streams: [String: StreamConnections] = [:]
        for service in allowlist.services {
            streams[service] = StreamConnections(streamsPerConnection: configuration.streamsPerConnection) { loop in
                RPCClient(configuration: Self.clientConfiguration(configuration, service: service), eventLoopGroup: loop)
            }
        }
        self.streams = streams
        self.authenticator = DeviceAuthenticator(
            store: clients["store"]!, credentials: CredentialTable(store: clients["store"]!, logger: logger), ttl: configuration.credentialRecheck)
    }

    static func clientConfiguration(_ configuration: GatewayConfiguration, service: String) -> ClientConfiguration {
        // A service that is socket-activated may take a moment to start.
        ClientConfiguration(socketPath: configuration.socketPath(for: service), callTimeout: configuration.callTimeout, connectTimeout: .seconds(5))
    }

    /// The method a device may call, or why not: `method_not_found` for a name no service
    /// declares, `forbidden` for a local-only method or another role's, `unauthorized`
    /// when it needs a credential and there is none.
    public func admit(_ name: String, as caller: Caller?) throws(RPCError) -> DeviceMethod {
        guard let method = self.allowlist.method(named: name) else {
            if self.allowlist.isDeclared(name) {
                throw RPCError(.forbidden, "\(name) is for the server's administrator and cannot be called through the gateway")
            }
            throw RPCError(.methodNotFound, "no method \(name) is available through the gateway; GET /v1/info lists those that are")
        }
        guard self.allowlist.admits(method, as: caller) else {
            if caller == nil {
                throw RPCError(.unauthorized, "\(name) needs a device credential: send Authorization: Bearer <token>")
            }
            throw RPCError(.forbidden, "\(name) is not for a \(caller!.rawValue) device")
        }
        return method
    }

    /// Calls a unary method as the device (or with no credential, for the pairing steps);
    /// the result as the service wrote it. `loop`: the device's socket's event loop.
    /// `from`: the network address (``AddressKey``) of a call with no credential, which
    /// pairing counts wrong secrets by; nil for a device's own calls.
    func call(_ method: DeviceMethod, params: JSONValue?, identity: DeviceIdentity?, from: String?, on loop: (any EventLoop)? = nil) async throws(RPCError) -> EncodedJSON {
        let auth = self.forwardedAuth(method, identity)
        do {
            return try await self.client(method.service, on: loop).relay(method.name, params: params, auth: auth, from: from)
        } catch {
            throw Self.presentable(error, service: method.service)
        }
    }

    /// Starts a unary call as the device on `loop`'s connection, if it can start at once
    /// (see ``RPCClient/relayNow(_:params:auth:timeout:completion:)``); `completion` runs on
    /// `loop` with what the device is to be told.
    func callNow(
        _ method: DeviceMethod, params: JSONValue?, identity: DeviceIdentity, on loop: any EventLoop,
        completion: @escaping @Sendable (Result<EncodedJSON, RPCError>) -> Void
    ) -> RelayedCall? {
        let service = method.service
        return self.client(service, on: loop).relayNow(method.name, params: params, auth: self.forwardedAuth(method, identity)) { result in
            completion(result.mapError { Self.presentable($0, service: service) })
        }
    }

    private func client(_ service: String, on loop: (any EventLoop)?) -> RPCClient {
        loop.flatMap { self.loopClients[service]?[ObjectIdentifier($0)] } ?? self.clients[service]!
    }

    /// The credential passed on: the device's own when its role is what admits it.
    func forwardedAuth(_ method: DeviceMethod, _ identity: DeviceIdentity?) -> Auth? {
        guard let identity, method.callers.contains(Callers(identity.caller)) else { return nil }
        return Auth(token: identity.token)
    }

    /// What a device is told of a failure: the services' own errors as they are, except
    /// what would describe the server (socket paths, internal failures).
    public static func presentable(_ error: RPCError, service: String) -> RPCError {
        switch error.code {
        case .unavailable where error.isConnectionFailure:
            return RPCError(.unavailable, "the \(service) service is not available right now; try again shortly")
        case .internal:
            return RPCError(.internal, "the server could not handle this request; its administrator will find the details in its journal")
        default:
            return error
        }
    }

    /// Whether each service answers `rpc.ping` (for `/healthz`).
    func health() async -> [String: Bool] {
        await withTaskGroup(of: (String, Bool).self) { group in
            for (service, client) in self.healthClients {
                group.addTask {
                    do {
                        _ = try await client.call(Builtin.ping, Empty())
                        return (service, true)
                    } catch {
                        return (service, false)
                    }
                }
            }
            var result: [String: Bool] = [:]
            for await (service, healthy) in group { result[service] = healthy }
            return result
        }
    }

    public func close() async {
        for client in Array(self.clients.values) + Array(self.healthClients.values) + self.loopClients.values.flatMap(\.values) { await client.close() }
        for streams in self.streams.values { await streams.closeAll() }
    }
}
