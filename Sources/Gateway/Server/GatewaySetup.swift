import Logging
import ServiceKit
import ServiceLifecycle
import ServiceMetrics
import SystemdKit

extension ServiceSetup {
    /// The gateway as ``ServiceMain`` runs it: its HTTPS server (on the socket systemd
    /// passed, else `configuration.listen`, by default `0.0.0.0:8443`) as the primary, and
    /// beside it the certificate's renewal (twice a day), the store's credentials, kept
    /// from its change feed (who a device is; sockets of revoked devices are cut off), the
    /// metrics endpoint when asked for, and the note of the devices connected.
    public static func gateway(_ configuration: GatewayConfiguration, environment: ServiceEnvironment) throws -> ServiceSetup {
        let sockets = environment.inheritedSockets
        let server = try GatewayServer.make(configuration, inherited: sockets.first { $0.name != MetricsEndpoint.socketName }, metrics: environment.metrics,
                                            logger: environment.logger)
        var background: [any Service] = [
            Periodic(every: .seconds(12 * 3600)) { server.renewCertificate() },
            server.credentials,
        ]
        if let endpoint = try MetricsEndpoint.configured(configuration, inherited: sockets, metrics: environment.metrics, logger: environment.logger) {
            background.append(endpoint)
        }
        // The devices connected now, in its state file (for screentimectl status).
        if let runState = environment.runState {
            background.append(Periodic(every: .seconds(5)) { runState.note(["devicesConnected": server.context.metrics.websocketsOpen]) })
        }
        return ServiceSetup(server: .own(server), background: background)
    }
}

extension GatewayServer {
    /// The server with its certificate (made on first start, renewed when due), listening
    /// on `inherited` or on `configuration.listen`.
    public static func make(_ configuration: GatewayConfiguration, inherited: ListenFD?,
                            metrics: ServiceMetrics = ServiceMetrics(service: "gateway", enabled: false), logger: Logger) throws -> GatewayServer {
        let keeper = CertificateKeeper(settings: configuration.certificate, directory: configuration.gatewayDirectory, logger: logger)
        let identity = try keeper.load()
        let listen = try inherited.map(GatewayListen.inherited) ?? GatewayListen.parse(configuration.listen ?? "0.0.0.0:8443")
        return try GatewayServer(configuration: configuration, listen: listen, keeper: keeper, identity: identity, metrics: metrics, logger: logger)
    }
}
