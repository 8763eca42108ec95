import Foundation

/// Everything the gateway needs to run, resolved from the command line once at start.
/// Every limit has a default a home server can keep (docs/operations.md, "Gateway").
public struct GatewayConfiguration: Sendable {
    /// Where to listen when systemd passes no socket: `host:port`.
    public var listen: String?
    /// Directory of the four services' sockets.
    public var runtimeDirectory: String
    /// The services' state directory; the gateway's own files (key, certificate, endpoint
    /// file) are in its `gateway/` subdirectory.
    public var stateDirectory: String
    public var certificate: CertificateSettings
    public var limits: GatewayLimits
    /// The server's name in `/v1/info`.
    public var serverName: String
    public var version: String
    /// While the store's credentials cannot be followed: how long the store's answer about
    /// a device's credential is kept.
    public var credentialRecheck: Duration
    /// Deadline of one relayed call.
    public var callTimeout: Duration
    /// Seconds requests in flight may take to finish after SIGTERM.
    public var shutdownTimeout: Duration
    /// Devices' streams carried by one connection to a service; at most what the push
    /// service takes on one connection (its `--max-listeners-per-connection`, 64).
    public var streamsPerConnection: Int
    /// Where the Prometheus metrics are served (`PORT` on 127.0.0.1, or `HOST:PORT`); nil:
    /// not served, unless systemd passes a socket named `metrics`.
    public var metricsListen: String?
    /// The bearer token a scrape must send; nil: none.
    public var metricsToken: String?

    public init(
        listen: String?, runtimeDirectory: String, stateDirectory: String, certificate: CertificateSettings,
        limits: GatewayLimits = GatewayLimits(), serverName: String, version: String,
        credentialRecheck: Duration = .seconds(5), callTimeout: Duration = .seconds(30), shutdownTimeout: Duration = .seconds(10),
        streamsPerConnection: Int = 64
    ) {
        self.listen = listen
        self.runtimeDirectory = runtimeDirectory
        self.stateDirectory = stateDirectory
        self.certificate = certificate
        self.limits = limits
        self.serverName = serverName
        self.version = version
        self.credentialRecheck = credentialRecheck
        self.callTimeout = callTimeout
        self.shutdownTimeout = shutdownTimeout
        self.streamsPerConnection = streamsPerConnection
    }

    /// `<state-dir>/gateway`.
    public var gatewayDirectory: String { (self.stateDirectory as NSString).appendingPathComponent("gateway") }

    /// `<runtime-dir>/<service>.sock`.
    public func socketPath(for service: String) -> String {
        (self.runtimeDirectory as NSString).appendingPathComponent("\(service).sock")
    }
}

/// The gateway's certificate: made by itself (the default) or given by the administrator.
public struct CertificateSettings: Sendable {
    /// Host names and IP addresses put in a self-made certificate, and in the URLs devices
    /// are given (the first is preferred).
    public var hostNames: [String]
    /// An administrator's certificate chain (PEM) and key, used instead of a self-made one.
    public var certificateFile: String?
    public var privateKeyFile: String?
    /// Validity of a self-made certificate (Apple accepts at most 825 days).
    public var lifetime: Duration
    /// A self-made certificate is renewed (same key) when it has less than this left.
    public var renewBefore: Duration
    /// The port put in the URLs devices are given, when it differs from the one listened on
    /// (a port forward).
    public var advertisedPort: Int?

    public init(
        hostNames: [String], certificateFile: String? = nil, privateKeyFile: String? = nil,
        lifetime: Duration = .seconds(825 * 86_400), renewBefore: Duration = .seconds(30 * 86_400), advertisedPort: Int? = nil
    ) {
        self.hostNames = hostNames
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
        self.lifetime = lifetime
        self.renewBefore = renewBefore
        self.advertisedPort = advertisedPort
    }
}

/// What a hostile network may not exceed.
public struct GatewayLimits: Sendable {
    /// Request line and headers together, in bytes (larger: 431, or 414 for the request
    /// line alone, and closed).
    public var maximumHeaderSize: Int
    /// A request body, in bytes (larger: 413; a larger `Content-Length` before any of the
    /// body is read, and closed).
    public var maximumBodySize: Int
    /// One WebSocket message, in bytes (larger: closed with 1009).
    public var maximumMessageSize: Int
    /// TLS connections at once (more are closed at accept).
    public var maximumConnections: Int
    /// TLS connections at once from one IP address.
    public var maximumConnectionsPerAddress: Int
    /// Requests in flight on one WebSocket (more get `limit_exceeded`).
    public var maximumInFlight: Int
    /// Stream replies waiting for a slow WebSocket before that stream is ended with
    /// `limit_exceeded`.
    public var maximumQueuedReplies: Int
    /// A connection must complete its TLS handshake and send a whole request (head and
    /// body) within this (slowloris); a keep-alive connection, its next request within
    /// this of the last response.
    public var requestTimeout: Duration
    /// A WebSocket opened without a credential must give one within this, or it is closed
    /// (1008): an unauthenticated socket costs the gateway memory and a keep-alive timer.
    public var authenticationTimeout: Duration
    /// WebSocket ping period; a peer that does not answer within another is closed.
    public var pingInterval: Duration
    /// Requests without a device credential (pairing steps, /v1/info, /healthz, failed
    /// authentications) per IP address: a burst of `unauthenticatedBurst`, refilled at
    /// `unauthenticatedPerMinute`.
    public var unauthenticatedPerMinute: Int
    public var unauthenticatedBurst: Int

    public init(
        maximumHeaderSize: Int = 16 << 10, maximumBodySize: Int = 1 << 20, maximumMessageSize: Int = 1 << 20,
        maximumConnections: Int = 10_000, maximumConnectionsPerAddress: Int = 64, maximumInFlight: Int = 32,
        maximumQueuedReplies: Int = 1_000, requestTimeout: Duration = .seconds(10), authenticationTimeout: Duration = .seconds(10),
        pingInterval: Duration = .seconds(30), unauthenticatedPerMinute: Int = 60, unauthenticatedBurst: Int = 30
    ) {
        self.maximumHeaderSize = maximumHeaderSize
        self.maximumBodySize = maximumBodySize
        self.maximumMessageSize = maximumMessageSize
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerAddress = maximumConnectionsPerAddress
        self.maximumInFlight = maximumInFlight
        self.maximumQueuedReplies = maximumQueuedReplies
        self.requestTimeout = requestTimeout
        self.authenticationTimeout = authenticationTimeout
        self.pingInterval = pingInterval
        self.unauthenticatedPerMinute = unauthenticatedPerMinute
        self.unauthenticatedBurst = unauthenticatedBurst
    }
}
