import RPCCore
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
    /// Requests in flight on one connection past this get `limit_exceeded`.
    public var maximumInFlightPerConnection: Int
    /// Exit after this long with no connection (socket activation only), so systemd starts
    /// the service again on the next connection.
    public var idleExitAfter: Duration?
    /// How long in-flight requests may take to finish after SIGTERM before they are cancelled.
    public var shutdownTimeout: Duration

    public init(
        service: String,
        version: String,
        endpoint: Endpoint,
        maximumFrameSize: Int = defaultMaximumFrameSize,
        maximumConnections: Int = 1024,
        maximumInFlightPerConnection: Int = 128,
        idleExitAfter: Duration? = nil,
        shutdownTimeout: Duration = .seconds(10)
    ) {
        self.service = service
        self.version = version
        self.endpoint = endpoint
        self.maximumFrameSize = maximumFrameSize
        self.maximumConnections = maximumConnections
        self.maximumInFlightPerConnection = maximumInFlightPerConnection
        self.idleExitAfter = idleExitAfter
        self.shutdownTimeout = shutdownTimeout
    }
}
