import ChangeFeed
import EdgeLimits
import Foundation
import GatewayAPI
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import PairingAPI
import RPCCore
import RPCServer
import ServiceKit
import ServiceLifecycle
import ServiceMetrics
import Synchronization
import SystemdKit

/// Where the gateway listens: a socket systemd passed, or an address it binds itself.
public enum GatewayListen: Sendable {
    case inherited(ListenFD)
    case address(host: String, port: Int)

    /// `HOST:PORT` (`0.0.0.0:8443`, `[::]:8443`; an empty host is every IPv4 address).
    public static func parse(_ text: String) throws(GatewayError) -> GatewayListen {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw GatewayError("--listen must be HOST:PORT, such as 0.0.0.0:8443 or [::]:8443, not \(text)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return .address(host: host.isEmpty ? "0.0.0.0" : host, port: port)
    }
}

/// The gateway's server, its service's primary (``ServiceSetup/gateway(_:environment:)``):
/// listens, serves TLS connections (HTTP/1 by Hummingbird's child channel, WebSockets by
/// their own handlers), tells systemd it is ready, and drains on SIGTERM.
///
/// Hummingbird's own `Server` binds its own address and takes no inherited descriptor, so
/// the listening channel is SwiftNIO's `ServerBootstrap` (as the RPC runtime's), with
/// ``EdgeChannel`` on each connection.
public final class GatewayServer: PrimaryService, Sendable {
    let configuration: GatewayConfiguration
    /// Where it listens (the socket systemd passed, or an address it binds).
    public let listen: GatewayListen
    let keeper: CertificateKeeper
    let contexts: TLSContextHolder
    let context: GatewayContext
    let limiter: ConnectionLimiter
    let logger: Logger
    /// Where it listens, once it does (what the status line and renewals say).
    private let listening = Mutex<(label: String, port: Int)?>(nil)
    /// Stopping: connections drain, and no new WebSocket is taken (it would never be told).
    private let stopping = Mutex(false)
    private let readiness = Readiness()

    public init(configuration: GatewayConfiguration, listen: GatewayListen, keeper: CertificateKeeper, identity: TLSIdentity,
                metrics: ServiceMetrics = ServiceMetrics(service: "gateway", enabled: false), logger: Logger) throws {
        self.configuration = configuration
        self.listen = listen
        self.keeper = keeper
        self.contexts = try TLSContextHolder(identity)
        let instruments = GatewayMetrics(metrics)
        self.context = GatewayContext(configuration: configuration, relay: ServiceRelay(configuration: configuration, logger: logger),
                                      metrics: instruments, logger: logger)
        self.limiter = ConnectionLimiter(
            total: configuration.limits.maximumConnections, perAddress: configuration.limits.maximumConnectionsPerAddress, metrics: instruments, logger: logger)
        self.logger = logger
    }

    public func run() async throws {
        defer { self.readiness.ended() }
        let group = MultiThreadedEventLoopGroup.singleton
        let limits = self.configuration.limits
        let limiter = self.limiter
        let quiescing = ServerQuiescingHelper(group: group)
        let metrics = self.context.metrics
        let child = RenewableTLSChannel(base: self.makeHTTPChannel(), contexts: self.contexts, metrics: metrics)
        let logger = self.logger
        let requestTimeout = TimeAmount(limits.requestTimeout)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(limiter)
                    try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<RenewableTLSChannel<EdgeChannel>.Value> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(ByteCounter(metrics))
                try channel.pipeline.syncOperations.addHandler(RequestDeadline(timeout: requestTimeout))
            }.flatMap {
                child.setup(channel: channel, logger: logger)
            }
        }
        let server: NIOAsyncChannel<EdgeChannel.Value, Never>
        let label: String
        switch self.listen {
        case .inherited(let fd):
            guard SocketActivation.isListeningStream(fd.fd) else {
                throw GatewayError("fd \(fd.fd) (\(fd.name)) is not a listening TCP socket; check the .socket unit's ListenStream=")
            }
            server = try await bootstrap.bind(fd.fd, serverBackPressureStrategy: nil, childChannelInitializer: initializer)
            label = "fd \(fd.fd) (\(fd.name)), \(server.channel.localAddress.map { "\($0)" } ?? "?")"
        case .address(let host, let port):
            do {
                server = try await bootstrap.bind(host: host, port: port, serverBackPressureStrategy: nil, childChannelInitializer: initializer)
            } catch {
                throw GatewayError("cannot listen on \(host):\(port): \(error); choose another --listen address or stop what uses it")
            }
            label = "\(server.channel.localAddress.map { "\($0)" } ?? "\(host):\(port)")"
        }
        let port = server.channel.localAddress?.port ?? 8443
        self.listening.withLock { $0 = (label, port) }
        let endpoint = try self.publishEndpoint(port: port)
        ServiceNotifier.ready(status: "Serving HTTPS on \(label)")
        self.readiness.serving()
        self.logger.notice("ready", metadata: [
            "listen": "\(label)", "port": "\(port)", "pin": "\(endpoint.pin)", "urls": "\(endpoint.urls.joined(separator: " "))",
            "certificate": "\(endpoint.certificate)", "not_valid_after": "\(endpoint.notValidAfter)",
        ])

        let drained = group.next().makePromise(of: Void.self)
        await withGracefulShutdownHandler {
            // Returns once the listening socket is closed and every connection has ended:
            // on SIGTERM, each finishes what it was doing (bounded by the service group's
            // maximum shutdown duration, after which they are cancelled).
            await withDiscardingTaskGroup { tasks in
                do {
                    try await server.executeThenClose { connections in
                        for try await connection in connections {
                            tasks.addTask { await child.handle(value: connection, logger: logger) }
                        }
                    }
                } catch {
                    logger.error("accepting connections failed", metadata: ["error": "\(error)"])
                }
            }
        } onGracefulShutdown: {
            ServiceNotifier.stopping(status: "Stopping: finishing \(limiter.openConnections) connections")
            logger.notice("stopping", metadata: ["connections": "\(limiter.openConnections)"])
            // Stop accepting; each connection finishes its request in progress and closes,
            // WebSockets get a close frame (`goingAway`); `drained` once all have closed.
            self.stopping.withLock { $0 = true }
            quiescing.initiateShutdown(promise: drained)
        }
        // WebSockets are served without a task of their own: wait for them to close (each
        // within 2 s of its close frame), unless the service group gives up first.
        if self.stopping.withLock({ $0 }) {
            await withTaskCancellationHandler { _ = try? await drained.futureResult.get() } onCancel: { drained.succeed() }
        } else {
            drained.succeed()
        }
        await self.context.relay.close()
        self.logger.notice("stopped")
    }

    /// The HTTP/1 channel with the WebSocket upgrade on `/v1/ws`.
    func makeHTTPChannel() -> EdgeChannel {
        let api = DeviceAPI(gateway: self.context)
        let context = self.context
        let limiter = self.limiter
        return EdgeChannel(
            limits: self.configuration.limits,
            responder: { request, writer, channel in
                // A connection over a limit gets its reason, then is closed.
                if let refusal = limiter.refusal(for: channel) {
                    let response = JSONResponse.error(refusal, extra: [.connection: "close"])
                    try await writer.write(response: response.head, body: response.body)
                    channel.close(promise: nil)
                    return
                }
                try await api.respond(to: request, writer: writer, channel: channel)
            },
            shouldUpgrade: { head, channel in
                if self.stopping.withLock({ $0 }) {
                    return .refuse(.init(status: .serviceUnavailable, error: RPCError(.unavailable, "the server is stopping; connect again in a moment")))
                }
                if let refusal = limiter.refusal(for: channel) {
                    return .refuse(.init(status: .tooManyRequests, error: refusal))
                }
                guard (head.path ?? "").split(separator: "?").first == "/v1/ws" else {
                    return .refuse(.init(status: .notFound, error: RPCError(.notFound, "the WebSocket is at /v1/ws")))
                }
                guard head.method == .get else {
                    return .refuse(.init(status: .methodNotAllowed, error: RPCError(.invalidRequest, "a WebSocket is opened with GET")))
                }
                let token = DeviceAPI.bearerToken(head.headerFields) ?? DeviceAPI.sessionCookie(head.headerFields, origins: context.origins)
                let address = channel.remoteAddress?.ipAddress ?? "unknown"
                return .accept { channel in
                    try DeviceSocket(gateway: context, address: address, channel: channel, logger: context.logger).open(token: token)
                }
            }
        )
    }

    /// Writes `<state-dir>/gateway/endpoint.json` (URLs and pin) for the pairing service
    /// and `screentimectl gateway pin`.
    public func publishEndpoint(port: Int) throws -> GatewayEndpoint {
        let identity = self.contexts.identity
        let advertised = self.configuration.certificate.advertisedPort ?? port
        let hosts = identity.selfMade ? self.configuration.certificate.hostNames : (identity.hostNames.isEmpty ? self.configuration.certificate.hostNames : identity.hostNames)
        self.context.origins.publish(hostNames: hosts, ports: advertised == port ? [port] : [port, advertised])
        let endpoint = GatewayEndpoint(
            urls: hosts.filter { !$0.hasPrefix("*") }.map { "https://\($0.contains(":") ? "[\($0)]" : $0):\(advertised)" },
            pin: identity.pin, certificate: identity.certificateFile, notValidAfter: identity.notValidAfter)
        do {
            try endpoint.write(to: GatewayEndpoint.path(stateDirectory: self.configuration.stateDirectory))
        } catch {
            throw GatewayError("cannot write the endpoint file in \(self.configuration.stateDirectory): \(error)")
        }
        return endpoint
    }

    /// True once it listens and has published its endpoint; false if it stopped first.
    public func waitUntilServing() async -> Bool {
        await self.readiness.wait()
    }

    /// What it is doing, for systemd's `STATUS=`.
    public var statusLine: String? {
        guard let listening = self.listening.withLock({ $0 }) else { return nil }
        return "Serving HTTPS on \(listening.label): \(self.limiter.openConnections) connections"
    }

    /// Serves a renewed certificate (same key, same pin) from now on, if the keeper made
    /// one (run twice a day).
    func renewCertificate() {
        guard let port = self.listening.withLock({ $0?.port }) else { return }
        do {
            let identity = try self.keeper.load()
            if identity.notValidAfter != self.contexts.identity.notValidAfter {
                try self.contexts.replace(with: identity)
                _ = try self.publishEndpoint(port: port)
                self.logger.notice("serving the renewed certificate", metadata: ["pin": "\(identity.pin)", "not_valid_after": "\(identity.notValidAfter)"])
            }
        } catch {
            self.logger.error("cannot renew the certificate", metadata: ["error": "\(error)"])
        }
    }

    /// The store's credentials as the gateway keeps them (a service of its group).
    var credentials: CredentialTable { self.context.relay.authenticator.credentials }
}

/// The gateway cannot start; the message says what to do.
public struct GatewayError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
