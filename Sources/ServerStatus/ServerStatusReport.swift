import AggregatorAPI
import Foundation
import Glibc
import PairingAPI
import ServerVersion

/// One service as the administrator sees it.
public struct ServiceStatus: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, Hashable {
        case running
        /// Exited after its idle time; systemd starts it on the next connection. Healthy.
        case idleExited = "idle-exited"
        case stopped
        case failed
        /// Not started since the server booted (socket-activated services wait for their
        /// first connection), or it writes no state file.
        case notStarted = "not-started"
    }

    public var service: String
    public var state: State
    public var pid: Int32?
    /// Since when it runs, or when it ended (seconds since 1970).
    public var since: Double?
    public var restarts: Int
    public var version: String?
    public var error: String?

    public init(service: String, state: State, pid: Int32? = nil, since: Double? = nil, restarts: Int = 0, version: String? = nil, error: String? = nil) {
        self.service = service
        self.state = state
        self.pid = pid
        self.since = since
        self.restarts = restarts
        self.version = version
        self.error = error
    }

    init(_ service: String, _ run: ServiceRunState?) {
        guard let run else {
            self.init(service: service, state: .notStarted)
            return
        }
        let state: State = switch run.state {
        case .running: .running
        case .idleExited: .idleExited
        case .stopped: .stopped
        case .failed: .failed
        }
        self.init(service: service, state: state, pid: state == .running ? run.pid : nil, since: state == .running ? run.startedAt : run.endedAt ?? run.startedAt,
                  restarts: run.restarts, version: run.version, error: state == .failed ? run.error : nil)
    }

    /// Running, or idle and waiting for its socket: what a healthy server's services are.
    public var isHealthy: Bool { self.state != .failed }
}

/// Free space of the file system that holds the state directory.
public struct DiskSpace: Codable, Sendable, Hashable {
    public var path: String
    public var availableBytes: Int64
    public var totalBytes: Int64

    public init(path: String, availableBytes: Int64, totalBytes: Int64) {
        self.path = path
        self.availableBytes = availableBytes
        self.totalBytes = totalBytes
    }
}

/// What `screentimectl status` prints and the dashboard's Settings show: the server's
/// version, each service's state, the disk, the gateway's certificate, the devices
/// connected now and the last backup.
public struct ServerStatusReport: Codable, Sendable, Hashable {
    public var version: String
    public var services: [ServiceStatus]
    public var disk: DiskSpace?
    /// When the gateway's certificate expires (it renews itself before); nil: no gateway yet.
    public var certificateNotValidAfter: Date?
    /// WebSockets open at the gateway (as it last wrote them); nil: the gateway is not running.
    public var devicesConnected: Int?
    /// Nil when it was not asked (or the aggregator could not say).
    public var backup: ServerBackupState?

    public init(version: String, services: [ServiceStatus], disk: DiskSpace?, certificateNotValidAfter: Date?, devicesConnected: Int?, backup: ServerBackupState?) {
        self.version = version
        self.services = services
        self.disk = disk
        self.certificateNotValidAfter = certificateNotValidAfter
        self.devicesConnected = devicesConnected
        self.backup = backup
    }
}

/// Reads the server's state from its files, without connecting to any service's socket
/// (which would start an idle one).
public enum ServerStatus {
    /// Every service the server runs, the gateway last.
    public static let services = ["store", "pairing", "push", "aggregator", "gateway"]

    public static func services(runtimeDirectory: String) -> [ServiceStatus] {
        self.services.map { ServiceStatus($0, ServiceRunState.read(service: $0, runtimeDirectory: runtimeDirectory)) }
    }

    /// `statvfs` of the state directory (nil if it does not exist).
    public static func disk(stateDirectory: String) -> DiskSpace? {
        var stats = statvfs()
        guard statvfs(stateDirectory, &stats) == 0 else { return nil }
        let block = Int64(stats.f_frsize)
        return DiskSpace(path: stateDirectory, availableBytes: Int64(stats.f_bavail) * block, totalBytes: Int64(stats.f_blocks) * block)
    }

    /// The report without the backup (which only the aggregator can say).
    public static func report(runtimeDirectory: String, stateDirectory: String) -> ServerStatusReport {
        let services = self.services(runtimeDirectory: runtimeDirectory)
        let endpoint = try? GatewayEndpoint.read(from: GatewayEndpoint.path(stateDirectory: stateDirectory))
        let gateway = ServiceRunState.read(service: "gateway", runtimeDirectory: runtimeDirectory)
        let connected = gateway?.state == .running ? gateway?.details?["devicesConnected"] ?? 0 : nil
        return ServerStatusReport(version: ServerVersion.current, services: services, disk: self.disk(stateDirectory: stateDirectory),
                                  certificateNotValidAfter: endpoint?.notValidAfter, devicesConnected: connected, backup: nil)
    }
}
