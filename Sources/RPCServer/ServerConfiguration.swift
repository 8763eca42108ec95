import RPCCore
import ServiceMetrics
import SystemdKit

/// Where a server listens.
public enum Endpoint: Sendable, Hashable {
    /// Sockets handed over by systemd (socket activation).
    case inherited([ListenFD])
    /// A socket path bound by the service itself, with its file mode (e.g. 0o660).
    case path(String, mode: UInt32)
}

/// Everything a server needs to know; immutable once the server starts.
public struct ServerConfiguration: Sendable {
    /// The short service name (`store`, `pairing`, …), reported by `rpc.ping`.
    public var service: String
    public var version: String
    public var endpoint: Endpoint
    /// The largest request payload accepted; a larger frame gets `frame_too_large` and the
    /// connection is closed (it cannot be resynchronised).
    public var maximumFrameSize: Int
    /// Connections past this get `limit_exceeded` and are closed.
    public var maximumConnections: Int
    /// Requests running at once on one connection, streams included; one read past this
    /// gets `limit_exceeded`. (Unary requests never reach it: see ``readAhead``.)
    public var maximumInFlightPerConnection: Int
    /// Close a connection after this long with nothing arriving on it and none of its
    /// requests running (a live stream is running); nil: never.
    public var idleTimeout: Duration?
    /// How long a frame may take to arrive once its first byte has; then the connection
    /// gets `invalid_frame` and is closed.
    public var frameTimeout: Duration
    /// Exit after this long with no connection (socket activation only), so systemd starts
    /// the service again on the next connection.
    public var idleExitAfter: Duration?
    /// How long in-flight requests may take to finish after SIGTERM before they are cancelled.
    public var shutdownTimeout: Duration
    /// Where the server counts its requests and connections, beside the service's own
    /// instruments (`rpc.metrics` serves them all).
    public var metrics: ServiceMetrics

    public init(
        service: String,
        version: String,
        endpoint: Endpoint,
        maximumFrameSize: Int = defaultMaximumFrameSize,
        maximumConnections: Int = 1024,
        maximumInFlightPerConnection: Int = 128,
        idleTimeout: Duration? = defaultIdleTimeout,
        frameTimeout: Duration = defaultFrameTimeout,
        idleExitAfter: Duration? = nil,
        shutdownTimeout: Duration = .seconds(10),
        metrics: ServiceMetrics? = nil
    ) {
        self.service = service
        self.version = version
        self.endpoint = endpoint
        self.maximumFrameSize = maximumFrameSize
        self.maximumConnections = maximumConnections
        self.maximumInFlightPerConnection = maximumInFlightPerConnection
        self.idleTimeout = idleTimeout
        self.frameTimeout = frameTimeout
        self.idleExitAfter = idleExitAfter
        self.shutdownTimeout = shutdownTimeout
        self.metrics = metrics ?? ServiceMetrics(service: service)
    }

    /// Unary requests a connection reads ahead of their replies: 32, or the in-flight
    /// limit if lower. Further requests wait in the socket until replies go out, so they
    /// are never refused for being too many.
    public var readAhead: Int { min(maximumReadAhead, self.maximumInFlightPerConnection) }
}

/// The most unary requests a connection reads ahead of their replies.
public let maximumReadAhead = 32
/// Default ``ServerConfiguration/idleTimeout``.
public let defaultIdleTimeout: Duration = .seconds(300)
/// Default ``ServerConfiguration/frameTimeout``.
public let defaultFrameTimeout: Duration = .seconds(10)
