import Synchronization
import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import RPCCore
import ServiceLifecycle
import SystemdKit

/// A service's RPC server: give it a configuration and a ``MethodTable``, run it in a
/// `ServiceGroup`, done. It adds `rpc.ping`, `rpc.describe` and `rpc.cancel`, talks to
/// systemd (`READY=1`, `STATUS=`, `WATCHDOG=1`, `STOPPING=1`), enforces the limits, and
/// on SIGTERM stops accepting, lets requests in flight finish (up to `shutdownTimeout`),
/// ends streams with a final reply and returns.
public final class RPCServer: Service, Sendable {
    public let configuration: ServerConfiguration
    private let table: MethodTable
    private let logger: Logger
    private let group: any EventLoopGroup
    private let state = ServerState()
    private let startedAt = ContinuousClock.now

    public init(
        configuration: ServerConfiguration,
        methods: MethodTable,
        logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.logger = logger
        self.group = eventLoopGroup
        var table = MethodTable()
        Self.addBuiltins(to: &table, configuration: configuration, startedAt: self.startedAt, serviceMethods: methods)
        for name in methods.order { table.entries[name] = methods.entries[name]; table.order.append(name) }
        self.table = table
    }

    public func run() async throws {
        let listeners = try await Listener.open(
            self.configuration.endpoint,
            group: self.group,
            state: self.state,
            maximumFrameSize: self.configuration.maximumFrameSize
        )
        let where_ = listeners.map(\.label).joined(separator: ", ")
        ServiceNotifier.ready(status: "Serving on \(where_)")
        self.logger.notice("ready", metadata: ServiceEvent.ready.metadata.merging([
            "socket": "\(where_)", "version": "\(self.configuration.version)",
            "max_frame_size": "\(self.configuration.maximumFrameSize)",
        ]) { _, new in new })

        let drainTimer = Mutex<Task<Void, Never>?>(nil)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { background in
                background.addTask { await self.keepSystemdInformed() }
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
            self.state.beginShutdown()
            for listener in listeners { listener.channel.channel.close(promise: nil) }
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
        for path in listeners.compactMap(\.ownedPath) { unlink(path) }
        self.logger.notice("stopped", metadata: ServiceEvent.stopped.metadata.merging([
            "requests_served": "\(self.state.summary.served)",
        ]) { _, new in new })
    }

    /// Accepts on every listener until each is closed, then waits for its connections.
    private func serve(_ listeners: [Listener]) async {
        await withDiscardingTaskGroup { group in
            for listener in listeners {
                group.addTask { await self.acceptLoop(listener) }
            }
        }
    }

    private func acceptLoop(_ listener: Listener) async {
        do {
            try await listener.channel.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { connections in
                    for try await channel in inbound {
                        let executor = EventLoopExecutor(channel.channel.eventLoop)
                        guard let connection = self.state.open(
                            limit: self.configuration.maximumConnections,
                            inFlightLimit: self.configuration.maximumInFlightPerConnection,
                            executor: executor
                        ) else {
                            connections.addTask { await self.reject(channel) }
                            continue
                        }
                        connections.addTask(executorPreference: executor) {
                            let peer = await peerCredentials(of: channel.channel)
                            let handler = ConnectionHandler(table: self.table, state: self.state, connection: connection, logger: self.logger)
                            await handler.serve(channel, peer: peer)
                            self.state.close(connection)
                        }
                    }
                }
            }
        } catch {
            if !self.state.isShuttingDown {
                self.logger.error("listener failed", metadata: ["socket": "\(listener.label)", "error": "\(error)"])
            }
        }
    }

    private func reject(_ channel: ConnectionChannel) async {
        self.logger.warning("connection limit reached; refusing a connection", metadata: ServiceEvent.connectionRejected.metadata.merging([
            "max_connections": "\(self.configuration.maximumConnections)",
        ]) { _, new in new })
        try? await channel.executeThenClose { _, outbound in
            try await outbound.write(ByteBuffer(bytes: ReplyEncoding.error(id: nil, RPCError(
                .limitExceeded,
                "the service has reached its limit of \(self.configuration.maximumConnections) connections; try again later"
            ))))
        }
    }

    /// `WATCHDOG=1` at half the interval, but only after every event loop has run a task:
    /// a hung loop stops the keep-alives and systemd restarts the service. Also refreshes
    /// `STATUS=`.
    private func keepSystemdInformed() async {
        guard ServiceNotifier.isSupervised else { return }
        let watchdog = ServiceNotifier.watchdogInterval()
        let tick = watchdog.map { $0 / 2 } ?? .seconds(5)
        while !Task.isCancelled {
            try? await Task.sleep(for: tick)
            if Task.isCancelled { return }
            if watchdog != nil {
                var loopsAlive = true
                for loop in self.group.makeIterator() {
                    if (try? await loop.submit({}).get()) == nil { loopsAlive = false }
                }
                if loopsAlive { ServiceNotifier.watchdog() }
            }
            if !self.state.isShuttingDown {
                let summary = self.state.summary
                ServiceNotifier.status("Serving: \(summary.connections) connections, \(summary.served) requests served")
            }
        }
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
            for listener in listeners { try? await listener.channel.channel.setOption(.autoRead, value: false).get() }
            // Reading is paused: nothing new is accepted. Exit only if no connection is open
            // or queued; one that races in after this stays queued for systemd, which then
            // starts the service again.
            if self.state.isQuiet && !listeners.contains(where: \.hasPendingConnection) {
                self.logger.notice("idle; exiting until the next connection", metadata: ServiceEvent.idleExit.metadata.merging([
                    "idle_seconds": "\(after / .seconds(1))",
                ]) { _, new in new })
                ServiceNotifier.stopping(status: "Idle; exiting until the next connection")
                self.state.beginShutdown()
                for listener in listeners { try? await listener.channel.channel.close() }
                return
            }
            for listener in listeners { try? await listener.channel.channel.setOption(.autoRead, value: true).get() }
        }
    }

    private static func addBuiltins(to table: inout MethodTable, configuration: ServerConfiguration, startedAt: ContinuousClock.Instant, serviceMethods: MethodTable) {
        table.on(Builtin.ping) { _, _ in
            let uptime = ContinuousClock.now - startedAt
            return PingResult(
                service: configuration.service,
                version: configuration.version,
                uptimeSeconds: Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18,
                pid: getpid()
            )
        }
        let builtins = [Builtin.ping.describedAs, Builtin.describe.describedAs, Builtin.cancel.describedAs]
        let all = builtins + serviceMethods.descriptions
        table.on(Builtin.describe) { params, _ in
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
                errorCodes: ErrorCode.protocolCodes
            )
        }
        // Answered by the connection itself (it needs the connection's requests); declared
        // here so rpc.describe lists it.
        table.on(Builtin.cancel) { _, _ in CancelResult(cancelled: false) }
    }
}
