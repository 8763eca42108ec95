import Foundation

/// How the relay runs: what `screentime-relayd`'s options say.
public struct RelayConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// The certificate chain and key it serves with (PEM, whatever the files are named);
    /// nil: plain HTTP (behind a reverse proxy that terminates TLS).
    public var tls: (certificateFile: String, keyFile: String)?
    /// The sealing keys' texts (base64 of 32 bytes): the first seals, every one opens (an
    /// older key kept while its handles are still in use).
    public var sealingKeys: [String]
    /// How long a handle is good for after it was sealed.
    public var handleLifetime: TimeInterval
    /// Visible alerts one device may be sent an hour.
    public var alertsPerHourPerDevice: Int
    /// Handles one device may be sent an hour (one per app launch is the usual).
    public var sealsPerHourPerDevice: Int
    /// Pushes a second to APNs at most, over every caller: what the publisher allows.
    public var apnsPushesPerSecond: Int
    public var topics: Set<String>
    public var apnsKeyId: String
    public var apnsTeamId: String
    /// The `.p8` key's PEM.
    public var apnsKey: String
    /// Apple's hosts, unless a stand-in's base URL is given (tests).
    public var apnsURL: String?
    /// A CA to trust for APNs (a stand-in's, in tests); nil: the system's.
    public var apnsCAFile: String?
    public var wakesPerMinutePerServer: Int
    /// Wakes one client address (an IPv6 /64 as one) may send a minute, counted before any
    /// signature is checked.
    public var wakesPerMinutePerAddress: Int
    /// Seals one client address may ask for a minute.
    public var sealsPerMinutePerAddress: Int
    /// Behind a reverse proxy: the client's address is the last `X-Forwarded-For` entry
    /// (the one the proxy added), not the connection's.
    public var trustForwardedFor: Bool
    public var apnsAttempts: Int
    /// Connections open at once, in all and from one address (an IPv6 /64 as one); more are
    /// closed as they are accepted.
    public var maximumConnections: Int
    public var maximumConnectionsPerAddress: Int
    /// A new connection's TLS handshake and first request head must arrive within this,
    /// and each request's body.
    public var requestTimeout: Duration
    /// A kept-alive connection with no request under way is closed after this.
    public var idleTimeout: Duration
    /// Wakes remembered (to refuse one sent again) at most; past that wakes are refused
    /// with 503 until the oldest expire.
    public var maximumSeenWakes: Int
    /// Keys (addresses, servers, devices) each limiter counts at most in a minute; past
    /// that a new key is refused with 503.
    public var maximumLimitedKeys: Int
    /// Where copies share their counts and the wakes taken: a PostgreSQL URL
    /// (`postgres://user@host/database`); nil: in memory, for one copy.
    public var stateDatabase: String?

    public init(host: String, port: Int, tls: (certificateFile: String, keyFile: String)?, sealingKeys: [String], topics: Set<String>,
                apnsKeyId: String, apnsTeamId: String, apnsKey: String, apnsURL: String? = nil, apnsCAFile: String? = nil,
                wakesPerMinutePerServer: Int = 120, wakesPerMinutePerAddress: Int = 600, sealsPerMinutePerAddress: Int = 60,
                trustForwardedFor: Bool = false, apnsAttempts: Int = 3, maximumConnections: Int = 10_000,
                maximumConnectionsPerAddress: Int = 32, requestTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(120),
                maximumSeenWakes: Int = 1_000_000, maximumLimitedKeys: Int = 1_000_000, handleLifetime: TimeInterval = 30 * 86_400,
                alertsPerHourPerDevice: Int = 10, sealsPerHourPerDevice: Int = 20, apnsPushesPerSecond: Int = 2_000, stateDatabase: String? = nil) {
        self.stateDatabase = stateDatabase
        self.host = host
        self.port = port
        self.tls = tls
        self.sealingKeys = sealingKeys
        self.handleLifetime = handleLifetime
        self.alertsPerHourPerDevice = alertsPerHourPerDevice
        self.sealsPerHourPerDevice = sealsPerHourPerDevice
        self.apnsPushesPerSecond = apnsPushesPerSecond
        self.topics = topics
        self.apnsKeyId = apnsKeyId
        self.apnsTeamId = apnsTeamId
        self.apnsKey = apnsKey
        self.apnsURL = apnsURL
        self.apnsCAFile = apnsCAFile
        self.wakesPerMinutePerServer = wakesPerMinutePerServer
        self.wakesPerMinutePerAddress = wakesPerMinutePerAddress
        self.sealsPerMinutePerAddress = sealsPerMinutePerAddress
        self.trustForwardedFor = trustForwardedFor
        self.apnsAttempts = apnsAttempts
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerAddress = maximumConnectionsPerAddress
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.maximumSeenWakes = maximumSeenWakes
        self.maximumLimitedKeys = maximumLimitedKeys
    }
}

/// A start-up problem, as a sentence that says what to change.
public struct RelayConfigurationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
    public static func unreadable(_ why: String) -> Self { Self(why) }
}
