import Foundation
import LineLogging
import Logging
import RPCCore
import RPCServer
import ServiceLifecycle
import ServiceMetrics
import SystemdKit

/// What a service's setup code gets: its paths, its logger, and the sockets systemd passed.
public struct ServiceEnvironment: Sendable {
    public var service: String
    public var paths: ServicePaths
    public var logger: Logger
    /// The listening sockets systemd passed (socket activation); empty when started by hand.
    public var inheritedSockets: [ListenFD]
    /// The service's instruments (`rpc.metrics` serves them with the RPC runtime's own).
    public var metrics: ServiceMetrics
    /// Its `<runtime-dir>/status/<service>.json` (nil in a test that runs its setup alone).
    public var runState: RunStateFile?

    public init(service: String, paths: ServicePaths, logger: Logger, inheritedSockets: [ListenFD] = [], metrics: ServiceMetrics? = nil,
                runState: RunStateFile? = nil) {
        self.service = service
        self.paths = paths
        self.logger = logger
        self.inheritedSockets = inheritedSockets
        self.metrics = metrics ?? ServiceMetrics(service: service)
        self.runState = runState
    }
}

/// A service's own server, run in place of the RPC runtime on a Unix socket (the gateway's
/// HTTPS listener): ``ServiceMain`` runs it first in the service group, its end stops the
/// service, and it tells systemd it is ready itself.
public protocol PrimaryService: Service {
    /// What it is doing, for systemd's `STATUS=`; nil to leave it (while stopping).
    var statusLine: String? { get }
    /// True once it serves; false if it stopped first (what a test running the service in
    /// its own process waits for).
    func waitUntilServing() async -> Bool
}

/// What a service's engine hands its main once it has opened its state: what serves (the
/// RPC runtime with its method table, or a server of its own), the services that run
/// beside it, and what to do after a clean stop.
public struct ServiceSetup: Sendable {
    public enum Server: Sendable {
        /// The RPC runtime on the service's Unix socket, serving this method table.
        case rpc(MethodTable)
        /// A server of the service's own.
        case own(any PrimaryService)
    }

    public var server: Server
    public var background: [any Service]
    /// Runs once the server and the background services have stopped cleanly.
    public var afterStop: @Sendable () async -> Void

    public init(methods: MethodTable, background: [any Service] = [], afterStop: @escaping @Sendable () async -> Void = {}) {
        self.init(server: .rpc(methods), background: background, afterStop: afterStop)
    }

    public init(server: Server, background: [any Service] = [], afterStop: @escaping @Sendable () async -> Void = {}) {
        self.server = server
        self.background = background
        self.afterStop = afterStop
    }
}

/// The whole life of a service executable: logging, paths, sockets (inherited or bound),
/// the RPC server and any background services, signals, exit.
///
/// ```swift
/// try await ServiceMain.run(service: "push", identifier: "screentime-pushd", version: "1.0.0", options: options) { environment in
///     try await .push(configuration, environment: environment)
/// }
/// ```
public enum ServiceMain {
    public static func run(
        service: String,
        identifier: String,
        version: String,
        options: ServiceOptions,
        setup: @Sendable (ServiceEnvironment) async throws -> ServiceSetup
    ) async throws {
        ServiceLogging.bootstrap(identifier: identifier, level: options.resolvedLogLevel, target: options.logTarget)
        var logger = Logger(label: "screentime.\(service)")
        logger.logLevel = options.resolvedLogLevel
        let paths = ServicePaths(options: options)
        let openFiles = OpenFileLimit.raiseToHard()
        logger.info("starting", metadata: ServiceEvent.started.metadata.merging([
            "version": "\(version)", "runtime_dir": "\(paths.runtimeDirectory)", "state_dir": "\(paths.stateDirectory)",
            "pid": "\(getpid())", "open_files_limit": "\(openFiles)",
        ]) { _, new in new })
        if openFiles >= 0, options.maximumConnections + 64 > openFiles {
            logger.warning("--max-connections is above what the open files limit allows; raise LimitNOFILE= or lower it", metadata: [
                "max_connections": "\(options.maximumConnections)", "open_files_limit": "\(openFiles)",
            ])
        }

        let runState = RunStateFile(service: service, version: version, runtimeDirectory: paths.runtimeDirectory)
        if let error = runState.write(runState.started) {
            logger.debug("cannot write the service's state file", metadata: ["path": "\(runState.path)", "error": "\(error)"])
        }
        do {
            let inherited = try SocketActivation.takeListenFDs()
            if !inherited.isEmpty {
                logger.info("using sockets passed by systemd", metadata: ["fds": "\(inherited.map { "\($0.fd):\($0.name)" })"])
            }
            let metrics = ServiceMetrics(service: service, enabled: !options.noMetrics)
            let environment = ServiceEnvironment(service: service, paths: paths, logger: logger, inheritedSockets: inherited, metrics: metrics, runState: runState)
            let setup = try await setup(environment)
            let primary: any PrimaryService
            switch setup.server {
            case .own(let own):
                primary = own
            case .rpc(let methods):
                // Before anything of the service runs: a method table that is not its
                // declared list is a bug that must stop the service, not half-start it.
                try methods.validate()
                primary = RPCServer(
                    configuration: ServerConfiguration(
                        service: service,
                        version: version,
                        endpoint: try Self.endpoint(service: service, paths: paths, options: options, inherited: inherited),
                        maximumFrameSize: options.maximumFrameSize,
                        maximumConnections: options.maximumConnections,
                        maximumInFlightPerConnection: options.maximumInFlight,
                        idleTimeout: options.idleTimeout,
                        frameTimeout: options.frameTimeout,
                        idleExitAfter: options.idleExitSeconds.map { .seconds($0) },
                        shutdownTimeout: .seconds(options.shutdownTimeoutSeconds),
                        metrics: metrics
                    ),
                    methods: methods,
                    logger: logger
                )
            }
            // A group stops its services in the reverse order: the keep-alive last, so the
            // watchdog is fed while the server drains.
            let services: [ServiceGroupConfiguration.ServiceConfiguration] =
                [.init(service: SystemdKeepAlive { primary.statusLine }, successTerminationBehavior: .ignore)]
                + [.init(service: primary, successTerminationBehavior: .gracefullyShutdownGroup)]
                + setup.background.map { .init(service: $0) }
                + (options.debugWedgeOnSIGUSR2 ? [.init(service: DebugWedge(logger: logger))] : [])
            var configuration = ServiceGroupConfiguration(services: services, logger: logger)
            configuration.gracefulShutdownSignals = [.sigterm, .sigint]
            // A backstop past the server's own drain bound, below systemd's TimeoutStopSec.
            configuration.maximumGracefulShutdownDuration = .seconds(options.shutdownTimeoutSeconds) + .seconds(5)
            try await ServiceGroup(configuration: configuration).run()
            await setup.afterStop()
            runState.ended((primary as? RPCServer)?.exitedIdle == true ? .idleExited : .stopped)
        } catch {
            runState.ended(.failed, error: "\(error)")
            logger.critical("cannot run", metadata: ["error": "\(error)"])
            StandardError.write("\(identifier): \(error)\n")
            ServiceNotifier.status("Failed: \(error)")
            exit(1)
        }
    }

    private static func endpoint(service: String, paths: ServicePaths, options: ServiceOptions, inherited: [ListenFD]) throws -> Endpoint {
        if !inherited.isEmpty { return .inherited(inherited) }
        let path = options.socket ?? paths.socketPath(for: service)
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return .path(path, mode: UInt32(options.socketMode, radix: 8) ?? 0o660)
    }
}

extension RPCServer: PrimaryService {}
