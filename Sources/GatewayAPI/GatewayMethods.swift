import RPCCore

/// What the gateway answers itself, on a WebSocket or `POST /v1/rpc`, besides relaying:
/// `rpc.ping`, `rpc.describe` (the methods a device may call), `rpc.cancel` (WebSocket),
/// and `gateway.authenticate` (WebSocket: a browser's way to give its credential).
public enum GatewayMethods {
    public static let authenticate = MethodSpec<AuthenticateParams, AuthenticateResult>(
        "gateway.authenticate",
        summary: "Gives a WebSocket its device credential, when the upgrade request carried none (browsers cannot set headers on a WebSocket). Once per connection.",
        callers: .unauthenticated, errors: [.unauthorized, .rateLimited])

    /// The gateway's own methods, for `rpc.describe` and `/v1/info`.
    public static let list = MethodList(service: "gateway", [authenticate])
}

public struct AuthenticateParams: Codable, Sendable, Hashable {
    public var token: String
}

/// Who the gateway takes the connection for from now on.
public struct AuthenticateResult: Codable, Sendable, Hashable {
    public var deviceId: String
    public var family: String
    /// `parent` or `child`.
    public var role: Caller
    public init(deviceId: String, family: String, role: Caller) {
        self.deviceId = deviceId
        self.family = family
        self.role = role
    }
}

/// `GET /v1/info`.
public struct GatewayInfo: Codable, Sendable, Hashable {
    /// The server's name (its host name unless configured).
    public var server: String
    /// The gateway's version.
    public var version: String
    /// The wire protocol's version (`rpc.describe`'s `protocolVersion`).
    public var apiVersion: Int
    /// What a device may call, and with which credential.
    public var methods: [InfoMethod]

    public init(server: String, version: String, apiVersion: Int, methods: [InfoMethod]) {
        self.server = server
        self.version = version
        self.apiVersion = apiVersion
        self.methods = methods
    }
}

public struct InfoMethod: Codable, Sendable, Hashable {
    public var name: String
    /// `unary` (`POST /v1/rpc` or WebSocket) or `stream` (WebSocket only).
    public var kind: MethodDescription.Kind
    /// Of `parent`, `child`, `unauthenticated`.
    public var callers: [Caller]
    public init(name: String, kind: MethodDescription.Kind, callers: [Caller]) {
        self.name = name
        self.kind = kind
        self.callers = callers
    }
}

/// `GET /healthz`: 200 when every service answers `rpc.ping`, else 503.
public struct HealthReport: Codable, Sendable, Hashable {
    /// `ok` or `degraded`.
    public var status: String
    /// Each service: `ok` or `unavailable`.
    public var services: [String: String]
    public init(status: String, services: [String: String]) {
        self.status = status
        self.services = services
    }
}

/// The reasons the gateway gives when it closes a device's WebSocket (close code 1008).
public enum GatewayCloseReason {
    /// No credential within `--auth-timeout`, and no request of the socket under way: none
    /// it sent was carried out, nor will be, so a client may send them again on a new socket.
    public static let noCredential = "no credential in time"
    /// No credential within the deadline moved once for a request in flight, still in
    /// flight: that request may have been carried out.
    public static let noCredentialCutOff = "no credential in time; requests in flight were cut off"
    public static let deviceRevoked = "device revoked"
    public static let credentialNotValid = "credential not valid"
}
