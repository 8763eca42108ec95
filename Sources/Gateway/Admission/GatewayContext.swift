import EdgeLimits
import Foundation
import GatewayAPI
import Logging
import NIOCore
import RPCClient
import RPCCore

/// What every connection of the gateway shares: its configuration, the relay, the rate
/// limiter, and the answers to the gateway's own methods.
final class GatewayContext: Sendable {
    let configuration: GatewayConfiguration
    let relay: ServiceRelay
    let rateLimiter: RateLimiter
    let credentialWatch: CredentialWatch
    /// The gateway's own web origins, known once it listens.
    let origins = Origins()
    let logger: Logger
    let info: GatewayInfo
    /// What `rpc.describe` lists, read off the methods' types once, when first asked (any
    /// device may ask, unauthenticated: never once per request).
    private let described: Lazy<[MethodDescription]>
    let started = ContinuousClock.now

    let metrics: GatewayMetrics

    init(configuration: GatewayConfiguration, relay: ServiceRelay, metrics: GatewayMetrics, logger: Logger) {
        self.configuration = configuration
        self.metrics = metrics
        self.relay = relay
        self.logger = logger
        self.rateLimiter = RateLimiter(perMinute: configuration.limits.unauthenticatedPerMinute, burst: configuration.limits.unauthenticatedBurst)
        self.credentialWatch = CredentialWatch(credentials: relay.authenticator.credentials)
        self.described = Lazy { [allowlist = relay.allowlist] in
            var methods = allowlist.all.map(\.description) + GatewayMethods.list.methods.map(\.describedAs)
                + [Builtin.ping.describedAs, Builtin.describe.describedAs, Builtin.cancel.describedAs]
            for index in methods.indices { methods[index].callers.removeAll { $0 == .local } }
            return methods
        }
        let gatewayOwn = GatewayMethods.list.methods.map { InfoMethod(name: $0.name, kind: $0.kind, callers: $0.callers.list) }
        self.info = GatewayInfo(
            server: configuration.serverName, version: configuration.version, apiVersion: rpcProtocolVersion,
            methods: relay.allowlist.all.map { InfoMethod(name: $0.name, kind: $0.kind, callers: $0.callers.list.filter { $0 != .local }) } + gatewayOwn)
    }

    /// Answers one request that came over HTTP: admitted once, then the gateway's own
    /// answer or the service's, encoded as the service wrote it (passed on without parsing).
    func answer(_ request: DeviceRequest, identity: DeviceIdentity?, address: String, on loop: (any EventLoop)? = nil) async throws(RPCError) -> EncodedJSON {
        switch try self.admit(request, identity: identity, transport: .http) {
        case .ping:
            return self.ping()
        case .describe(let params):
            return Self.encoded(self.describe(params))
        case .cancel, .authenticate:
            throw RPCError(.invalidRequest, "\(request.head.method) is for a WebSocket at /v1/ws")  // admit refuses them over HTTP
        case .relayed(let method):
            return try await self.call(method, params: request.params, identity: identity, address: address, on: loop)
        }
    }

    /// A unary call relayed to its service as the device; one without a credential (the
    /// pairing steps) counts against its address's limit.
    func call(_ method: DeviceMethod, params: JSONValue?, identity: DeviceIdentity?, address: String, on loop: (any EventLoop)?) async throws(RPCError) -> EncodedJSON {
        if identity == nil, !self.rateLimiter.allow(address) { throw DeviceAPI.rateLimited }
        // The address goes with a call that has no credential: pairing counts wrong secrets by it.
        return try await self.relay.call(method, params: params, identity: identity, from: identity == nil ? AddressKey.of(address) : nil, on: loop)
    }

    /// `rpc.ping` through the gateway: the gateway answers it itself.
    func ping() -> EncodedJSON {
        Self.encoded(PingResult(service: "gateway", version: self.configuration.version,
                                uptimeSeconds: (ContinuousClock.now - self.started).seconds, pid: getpid()))
    }

    /// `rpc.describe` through the gateway: the methods a device may call, as declared.
    func describe(_ params: DescribeParams) -> DescribeResult {
        var methods = self.described.value
        if let name = params.method { methods = methods.filter { $0.name == name } }
        return DescribeResult(
            service: "gateway", version: self.configuration.version, protocolVersion: rpcProtocolVersion,
            maximumFrameSize: self.configuration.limits.maximumMessageSize, methods: methods.sorted { $0.name < $1.name },
            errorCodes: ErrorCode.protocolCodes)
    }

    static func encoded<T: Encodable>(_ value: T) -> EncodedJSON {
        (try? RPCJSON.encode(value)).map(EncodedJSON.init) ?? EncodedJSON("null")
    }

    static func json<T: Encodable>(_ value: T) -> JSONValue {
        guard let bytes = try? RPCJSON.encode(value), let json = try? JSONParser.parse(bytes: bytes) else { return .null }
        return json
    }
}

