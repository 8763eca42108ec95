import Crypto
import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import RPCCore
import ServerStatus
import ServiceLifecycle
import ServiceMetrics
import Synchronization
import SystemdKit

/// The server's metrics for Prometheus, in plain HTTP on an address of the administrator's
/// choosing (off unless asked: `--metrics-listen`, or the `screentime-metrics.socket`
/// unit, whose socket systemd passes named `metrics`): `GET /metrics` answers the gateway's
/// own instruments and those of every running service (``ServerMetrics``), with a bearer
/// token when one is set. Everything else is 404.
public struct MetricsEndpoint: Service {
    public enum Listen: Sendable {
        case inherited(ListenFD)
        case address(host: String, port: Int)

        /// `PORT` (on 127.0.0.1) or `HOST:PORT` (`[::1]:9464`, `0.0.0.0:9464`).
        public static func parse(_ text: String) throws(GatewayError) -> Listen {
            if let port = Int(text) {
                guard (0...65535).contains(port) else { throw GatewayError("--metrics-listen's port must be 0 to 65535, not \(text)") }
                return .address(host: "127.0.0.1", port: port)
            }
            guard case .address(let host, let port) = try? GatewayListen.parse(text) else {
                throw GatewayError("--metrics-listen must be PORT (on 127.0.0.1) or HOST:PORT, such as 9464 or 127.0.0.1:9464, not \(text)")
            }
            return .address(host: host, port: port)
        }
    }

    /// The name systemd gives the socket of `screentime-metrics.socket`
    /// (`FileDescriptorName=`).
    static let socketName = "metrics"

    /// The endpoint the configuration or systemd asks for, or nil (off).
    public static func configured(_ configuration: GatewayConfiguration, inherited: [ListenFD], metrics: ServiceMetrics, logger: Logger) throws -> MetricsEndpoint? {
        let listen: Listen
        if let fd = inherited.first(where: { $0.name == Self.socketName }) {
            listen = .inherited(fd)
        } else if let address = configuration.metricsListen {
            listen = try Listen.parse(address)
        } else {
            return nil
        }
        return MetricsEndpoint(listen: listen, token: configuration.metricsToken, runtimeDirectory: configuration.runtimeDirectory,
                               socketPath: { [configuration] in configuration.socketPath(for: $0) }, metrics: metrics, logger: logger)
    }

    let listen: Listen
    /// The bearer token a scrape must send (`Authorization: Bearer …`); nil: none asked.
    let token: String?
    let runtimeDirectory: String
    let socketPath: @Sendable (String) -> String
    let metrics: ServiceMetrics
    let logger: Logger
    /// Where it listens once it does (tests read the port).
    let bound = ListeningAddress()

    public func run() async throws {
        let child = HTTP1Channel(responder: { request, writer, _ in
            let response = await self.respond(request)
            try await writer.write(response: response.head, body: response.body)
        })
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<HTTP1Channel.Value> = { channel in child.setup(channel: channel, logger: self.logger) }
        let server: NIOAsyncChannel<HTTP1Channel.Value, Never>
        do {
            switch self.listen {
            case .inherited(let fd):
                guard SocketActivation.isListeningStream(fd.fd) else {
                    throw GatewayError("fd \(fd.fd) (\(fd.name)) is not a listening TCP socket; check screentime-metrics.socket's ListenStream=")
                }
                server = try await bootstrap.bind(fd.fd, serverBackPressureStrategy: nil, childChannelInitializer: initializer)
            case .address(let host, let port):
                do {
                    server = try await bootstrap.bind(host: host, port: port, serverBackPressureStrategy: nil, childChannelInitializer: initializer)
                } catch {
                    throw GatewayError("cannot listen for metrics on \(host):\(port): \(error); choose another --metrics-listen address or stop what uses it")
                }
            }
        } catch {
            // The metrics are optional: the families' gateway runs on without them.
            self.logger.error("metrics not served", metadata: ["error": "\(error)"])
            try? await gracefulShutdown()
            return
        }
        let address = server.channel.localAddress.map { "\($0)" } ?? "?"
        self.bound.set(server.channel.localAddress?.port)
        self.logger.notice("serving metrics", metadata: ["listen": "\(address)", "path": "/metrics", "token": "\(self.token == nil ? "none" : "required")"])
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { tasks in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        tasks.addTask { await child.handle(value: connection, logger: self.logger) }
                    }
                }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }

    func respond(_ request: Request) async -> Response {
        guard request.uri.path == "/metrics" else {
            return Self.text(.notFound, "Nothing here: the metrics are at /metrics.\n")
        }
        guard request.method == .get || request.method == .head else {
            return Self.text(.methodNotAllowed, "Metrics are read with GET.\n", extra: [.allow: "GET, HEAD"])
        }
        if let token = self.token {
            let given = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            guard let given, Self.same(given, token) else {
                return Self.text(.unauthorized, "A bearer token is needed: set bearer_token_file (or authorization.credentials_file) in the scrape config to the file given to --metrics-token-file.\n",
                                 extra: [.wwwAuthenticate: "Bearer realm=\"screentime metrics\""])
            }
        }
        let text = await ServerMetrics.scrape(runtimeDirectory: self.runtimeDirectory, socketPath: self.socketPath, own: await self.metrics.exposition())
        return Self.text(.ok, text, contentType: "text/plain; version=0.0.4; charset=utf-8")
    }

    /// In constant time: comparing their digests.
    static func same(_ given: String, _ token: String) -> Bool {
        SHA256.hash(data: Data(given.utf8)) == SHA256.hash(data: Data(token.utf8))
    }

    static func text(_ status: HTTPResponse.Status, _ body: String, contentType: String = "text/plain; charset=utf-8", extra: HTTPFields = [:]) -> Response {
        WebResponse.make(status, contentType: contentType, body: body, extra: extra)
    }
}

/// The port a listener got, once it has one.
final class ListeningAddress: Sendable {
    private let port = Mutex<Int?>(nil)
    func set(_ port: Int?) { self.port.withLock { $0 = port } }
    var value: Int? { self.port.withLock { $0 } }
}
