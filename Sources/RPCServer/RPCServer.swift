import Synchronization
import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import RPCCore
import ServiceLifecycle
import ServiceMetrics
import SystemdKit

/// A service's RPC server: give it a configuration and a ``MethodTable``, run it in a
/// `ServiceGroup`, done. It adds `rpc.ping`, `rpc.describe` and `rpc.cancel`, talks to
/// systemd (`READY=1`, `STATUS=`, `WATCHDOG=1`, `STOPPING=1`), enforces the limits, and
/// on SIGTERM stops accepting, lets requests in flight finish (up to `shutdownTimeout`),
/// ends streams with a final reply and returns.
public final class RPCServer: Service, Sendable {
    public let configuration: ServerConfiguration
    private let table: MethodTable
    /// The service's own methods, checked against their declared list before serving.
    private let serviceMethods: MethodTable
    private let logger: Logger
    private let group: any EventLoopGroup
    private let state = ServerState()
    private let startedAt = ContinuousClock.now
    private let readiness = Readiness()
    /// One executor per event loop, shared by the connections on that loop.
    private let executors: [ObjectIdentifier: EventLoopExecutor]
    private let metrics: RequestMetrics
    private let endedIdle = Mutex(false)

    public init(
        configuration: ServerConfiguration,
        methods: MethodTable,
        logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.logger = logger
        self.group = eventLoopGroup
        self.executors = Dictionary(uniqueKeysWithValues: eventLoopGroup.makeIterator().map { (ObjectIdentifier($0), EventLoopExecutor($0)) })
        var table = MethodTable()
        Self.addBuiltins(to: &table, configuration: configuration, startedAt: self.startedAt, serviceMethods: methods)
        table.merge(methods)
        self.table = table
        self.metrics = RequestMetrics(configuration.metrics, methods: table.order, state: self.state)
        self.serviceMethods = methods
    }

    public func run() async throws {
        defer { self.readiness.ended() }
        try self.serviceMethods.validate()
        let listeners = try await Listener.open(
            self.configuration.endpoint,
            group: self.group,
            state: self.state,
            childChannelInitializer: self.setUpConnection
        )
        let where_ = listeners.map(\.label).joined(separator: ", ")
        ServiceNotifier.ready(status: "Serving on \(where_)")
        self.readiness.serving()
        self.logger.notice("ready", metadata: ServiceEvent.ready.metadata.merging([
            "socket": "\(where_)", "version": "\(self.configuration.version)",
            "max_frame_size": "\(self.configuration.maximumFrameSize)",
        ]) { _, new in new })

        let drainTimer = Mutex<Task<Void, Never>?>(nil)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { background in
                if let idle = self.configuration.idleExitAfter {
                    if case .inherited = self.configuration.endpoint {
                        background.addTask { await self.exitWhenIdle(after: idle, listeners: listeners) }
                    } else {
                        self.logger.warning("--idle-exit applies only under socket activation; ignoring it")
                    }
                }
                await self.serve(listeners)
                background.cancelAll()
            }
        } onGracefulShutdown: {
            let summary = self.state.summary
            ServiceNotifier.stopping(status: "Stopping: finishing \(summary.inFlight) requests on \(summary.connections) connections")
            self.logger.notice("stopping", metadata: ServiceEvent.stopping.metadata.merging([
                "connections": "\(summary.connections)", "in_flight": "\(summary.inFlight)",
            ]) { _, new in new })
            guard self.state.beginShutdown() else { return }
            for listener in listeners { listener.channel.close(promise: nil) }
            self.state.stopReadingAll()
            let timeout = self.configuration.shutdownTimeout
            drainTimer.withLock {
                $0 = Task {
                    try? await Task.sleep(for: timeout)
                    guard !Task.isCancelled else { return }
                    self.logger.warning("requests still running after the shutdown timeout; cancelling them")
                    self.state.cancelEverything(reason: .shutdown)
                }
            }
        }
        drainTimer.withLock { $0?.cancel() }
        self.state.stopped()
        for path in listeners.compactMap(\.ownedPath) { unlink(path) }
        self.logger.notice("stopped", metadata: ServiceEvent.stopped.metadata.merging([
            "requests_served": "\(self.state.summary.served)",
        ]) { _, new in new })
    }

    /// Serves until every listener is closed and the connections they accepted are done.
    private func serve(_ listeners: [Listener]) async {
        for listener in listeners {
            try? await listener.channel.closeFuture.get()
            if !self.state.isShuttingDown {
                self.logger.error("listener closed unexpectedly", metadata: ["socket": "\(listener.label)"])
            }
        }
        await self.state.waitUntilQuiet()
    }

    /// Sets up a connection the kernel handed over: the frame codec, then either the
    /// connection's handler or, over the connection limit, a refusal.
    private func setUpConnection(_ channel: any Channel) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            guard let connection = self.state.open(
                limit: self.configuration.maximumConnections,
                inFlightLimit: self.configuration.maximumInFlightPerConnection,
                executor: self.executors[ObjectIdentifier(channel.eventLoop)] ?? EventLoopExecutor(channel.eventLoop),
                channel: channel
            ) else {
                self.logger.warning("connection limit reached; refusing a connection", metadata: ServiceEvent.connectionRejected.metadata.merging([
                    "max_connections": "\(self.configuration.maximumConnections)",
                ]) { _, new in new })
                self.metrics.refused.increment()
                try pipeline.addFrameCodec(maximumFrameSize: self.configuration.maximumFrameSize)
                try pipeline.addHandler(RefusingHandler(maximumConnections: self.configuration.maximumConnections))
                return
            }
            let handler = ConnectionHandler(
                table: self.table, state: self.state, connection: connection, limits: self.connectionLimits,
                channel: channel, metrics: self.metrics, logger: self.logger)
            try pipeline.addHandler(ReadMeter(connection: handler, aroundRead: self.table.aroundRead))
            try pipeline.addFrameCodec(maximumFrameSize: self.configuration.maximumFrameSize, prependingLengths: false)
            try pipeline.addHandler(handler)
        }
    }

    private var connectionLimits: ConnectionLimits {
        ConnectionLimits(
            readAhead: self.configuration.readAhead,
            idleTimeout: self.configuration.idleTimeout.map(TimeAmount.init),
            frameTimeout: TimeAmount(self.configuration.frameTimeout)
        )
    }

    /// What it is doing, for systemd's `STATUS=` (``SystemdKeepAlive``); nil while stopping.
    public var statusLine: String? {
        guard !self.state.isShuttingDown else { return nil }
        let summary = self.state.summary
        return "Serving: \(summary.connections) connections, \(summary.served) requests served"
    }

    /// Under socket activation: after `after` with no connection, stop accepting, make sure
    /// no connection slipped in meanwhile, and close the listeners so `run` returns. The
    /// socket stays with systemd, which starts the service again on the next connection.
    private func exitWhenIdle(after: Duration, listeners: [Listener]) async {
        while !Task.isCancelled {
            let idleSince = self.state.idleSince
            let wait = idleSince.map { after - (ContinuousClock.now - $0) } ?? after
            try? await Task.sleep(for: max(wait, .milliseconds(50)))
            if Task.isCancelled || self.state.isShuttingDown { return }
            guard let since = self.state.idleSince, ContinuousClock.now - since >= after else { continue }
            for listener in listeners { try? await listener.channel.setOption(.autoRead, value: false).get() }
            // Reading is paused: nothing new is accepted. Exit only if no connection is open
            // or queued; one that races in after this stays queued for systemd, which then
            // starts the service again.
            if self.state.isQuiet && !listeners.contains(where: \.hasPendingConnection) {
                self.logger.notice("idle; exiting until the next connection", metadata: ServiceEvent.idleExit.metadata.merging([
                    "idle_seconds": "\(after / .seconds(1))",
                ]) { _, new in new })
                ServiceNotifier.stopping(status: "Idle; exiting until the next connection")
                self.endedIdle.withLock { $0 = true }
                self.state.beginShutdown()
                for listener in listeners { try? await listener.channel.close() }
                return
            }
            for listener in listeners { try? await listener.channel.setOption(.autoRead, value: true).get() }
        }
    }

    /// True once it has stopped because it was idle (``ServerConfiguration/idleExitAfter``).
    public var exitedIdle: Bool { self.endedIdle.withLock { $0 } }

    /// Waits until the server serves (its listeners are open): true, or false if it stopped
    /// or failed before that.
    public func waitUntilServing() async -> Bool {
        await self.readiness.wait()
    }

    private static func addBuiltins(to table: inout MethodTable, configuration: ServerConfiguration, startedAt: ContinuousClock.Instant, serviceMethods: MethodTable) {
        let ping = { @Sendable () -> PingResult in
            let uptime = ContinuousClock.now - startedAt
            return PingResult(
                service: configuration.service,
                version: configuration.version,
                uptimeSeconds: Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18,
                pid: getpid()
            )
        }
        table.on(Builtin.ping, immediately: { _, _ in ping() }, otherwise: { _, _ in ping() })
        // Read off the methods' types when first asked, then kept.
        let described = Lazy<([MethodDescription], [ErrorCode])> {
            let builtins = [Builtin.ping.describedAs, Builtin.describe.describedAs, Builtin.cancel.describedAs, Builtin.metrics.describedAs]
            let all = builtins + serviceMethods.descriptions
            // The protocol's codes, then the service's own, in the order its methods name them.
            let errorCodes = ErrorCode.protocolCodes + MethodDescription.errors(all.flatMap(\.errors)).filter { !ErrorCode.protocolCodes.contains($0) }
            return (all, errorCodes)
        }
        table.on(Builtin.describe) { params, _ in
            let (all, errorCodes) = described.value
            var methods = all
            if let name = params.method {
                methods = all.filter { $0.name == name }
                if methods.isEmpty {
                    throw RPCError(.notFound, "this service has no method \"\(name)\"", data: ["method": .string(name)])
                }
            }
            return DescribeResult(
                service: configuration.service,
                version: configuration.version,
                protocolVersion: rpcProtocolVersion,
                maximumFrameSize: configuration.maximumFrameSize,
                methods: methods,
                errorCodes: errorCodes
            )
        }
        // Answered by the connection itself (it needs the connection's requests); declared
        // here so rpc.describe lists it.
        table.on(Builtin.cancel) { _, _ in CancelResult(cancelled: false) }
        let wallStart = Date().timeIntervalSince1970
        table.on(Builtin.metrics) { _, _ in
            MetricsResult(service: configuration.service, version: configuration.version, pid: getpid(), startedAt: wallStart,
                          text: await configuration.metrics.exposition())
        }
    }
}
