/// The methods every service answers, whatever else it does.
public enum Builtin {
    public static let ping = MethodSpec<Empty, PingResult>(
        "rpc.ping",
        summary: "Checks that the service answers; says which service, which version, and for how long it has run.", callers: .anyone
    )
    public static let describe = MethodSpec<DescribeParams, DescribeResult>(
        "rpc.describe",
        summary: "Lists the service's methods with their parameters, results and errors, and the protocol's error codes.", callers: .anyone,
        errors: [.notFound]
    )
    public static let metrics = MethodSpec<Empty, MetricsResult>(
        "rpc.metrics",
        summary: "The service's metrics in the Prometheus text format (requests, durations, connections and the service's own), for the gateway's metrics endpoint and screentimectl status.",
        callers: .local
    )
    public static let cancel = MethodSpec<CancelParams, CancelResult>(
        "rpc.cancel",
        summary: "Cancels a request of this connection still in flight (typically a stream); it ends with a `cancelled` error reply.", callers: .anyone
    )
}

public struct PingResult: Codable, Sendable, Hashable, JSONWritable {
    public var service: String
    public var version: String
    public var uptimeSeconds: Double
    public var pid: Int32

    public init(service: String, version: String, uptimeSeconds: Double, pid: Int32) {
        self.service = service
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.pid = pid
    }

    /// By hand: every health check asks for it.
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("service", self.service)
        writer.member("version", self.version)
        writer.member("uptimeSeconds")
        try writer.double(self.uptimeSeconds)
        writer.member("pid", Int(self.pid))
        writer.endObject()
    }
}

public struct DescribeParams: Codable, Sendable, Hashable {
    /// Only this method; all when absent.
    public var method: String?
    public init(method: String? = nil) { self.method = method }
}

public struct DescribeResult: Codable, Sendable, Hashable {
    public var service: String
    public var version: String
    /// The wire protocol's version; it changes only on an incompatible change.
    public var protocolVersion: Int
    public var maximumFrameSize: Int
    public var methods: [MethodDescription]
    /// Every error code of the base protocol, then the service's own (those its methods name
    /// beyond the protocol's).
    public var errorCodes: [ErrorCode]

    public init(service: String, version: String, protocolVersion: Int, maximumFrameSize: Int, methods: [MethodDescription], errorCodes: [ErrorCode]) {
        self.service = service
        self.version = version
        self.protocolVersion = protocolVersion
        self.maximumFrameSize = maximumFrameSize
        self.methods = methods
        self.errorCodes = errorCodes
    }
}

public struct MetricsResult: Codable, Sendable, Hashable {
    public var service: String
    public var version: String
    public var pid: Int32
    /// When the process started, in seconds since 1970.
    public var startedAt: Double
    /// The Prometheus text exposition format (version 0.0.4); empty when the service runs
    /// with `--no-metrics`.
    public var text: String

    public init(service: String, version: String, pid: Int32, startedAt: Double, text: String) {
        self.service = service
        self.version = version
        self.pid = pid
        self.startedAt = startedAt
        self.text = text
    }
}

public struct CancelParams: Codable, Sendable, Hashable {
    /// The id of the request to cancel.
    public var id: RequestID
    public init(id: RequestID) { self.id = id }
}

public struct CancelResult: Codable, Sendable, Hashable {
    /// False when no request with that id was in flight (it may have just finished).
    public var cancelled: Bool
    public init(cancelled: Bool) { self.cancelled = cancelled }
}

/// The wire protocol's version, reported by `rpc.describe`.
public let rpcProtocolVersion = 1

/// The default largest frame payload a service accepts: 1 MiB.
public let defaultMaximumFrameSize = 1 << 20
