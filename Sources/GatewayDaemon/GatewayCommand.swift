import ArgumentParser
import OptionChecks
import Foundation
import Gateway
import Glibc
import Logging
import RPCCore
import ServerVersion
import ServiceKit
import ServiceLifecycle
import SystemdKit

public struct GatewayCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "screentime-gatewayd",
        abstract: "The ScreenTime Rewards device gateway: HTTPS and WebSocket for the family's phones and browsers, relayed to the services.",
        discussion: """
            The only ScreenTime service on the network. Serves the device API (POST /v1/rpc, \
            GET /v1/ws, GET /v1/info, GET /healthz; /usr/share/doc/screentime-server/protocol.md) and the parents' web \
            dashboard (every other path, from /; a browser signs in with an enrollment code from \
            `screentimectl parent invite`) over TLS on the TCP socket \
            systemd passes (screentime-gateway.socket, port 8443), or on --listen when started \
            by hand. Relays each device's requests to the services' sockets in <runtime-dir>, \
            allowing only what their declared method lists let a device call.

            TLS needs no certificate authority: on first start the gateway makes a P-256 key and \
            a self-signed certificate in <state-dir>/gateway (mode 0600) and devices pin its key \
            through the pairing QR code. It writes <state-dir>/gateway/endpoint.json (its URLs \
            and pin) for the pairing service and `screentimectl gateway pin`.
            """,
        version: ServerVersion.current
    )

    public init() {}

    @OptionGroup var options: ServiceOptions

    @Option(help: ArgumentHelp("Address to listen on when systemd passes no socket.", discussion: "Default: 0.0.0.0:8443. Port 0 picks a free one (see the ready log line or endpoint.json).", valueName: "host:port"))
    var listen: String?

    @Option(name: .customLong("host"), help: ArgumentHelp("A host name or IP address devices reach this server by: put in the certificate and in the URLs of pairing codes (repeat; the first is preferred).", discussion: "Default: this machine's host name, its mDNS name (<name>.local), its non-loopback addresses, then localhost, 127.0.0.1 and ::1. The dashboard answers only requests for these names.", valueName: "name"))
    var hosts: [String] = []

    @Option(name: .customLong("certificate"), help: ArgumentHelp("Serve this certificate chain (PEM) instead of a self-made one; with --private-key.", valueName: "path"))
    var certificateFile: String?

    @Option(name: .customLong("private-key"), help: ArgumentHelp("The key (PEM) of --certificate; devices then pin this key.", valueName: "path"))
    var privateKeyFile: String?

    @Option(name: .customLong("certificate-days"), help: "Validity of a self-made certificate, in days (at most 825, Apple's limit).")
    var certificateDays: Int = 825

    @Option(name: .customLong("renew-days"), help: "Renew a self-made certificate (same key, same pin) when it has fewer days left than this.")
    var renewDays: Int = 30

    @Option(name: .customLong("advertised-port"), help: ArgumentHelp("The port put in the URLs devices are given, when a port forward differs from the port listened on.", valueName: "port"))
    var advertisedPort: Int?

    @Option(name: .customLong("server-name"), help: ArgumentHelp("The server's name in /v1/info.", discussion: "Default: this machine's host name."))
    var serverName: String?

    @Option(name: .customLong("max-connections-per-address"), help: "TLS connections at once from one IP address; more are closed at accept.")
    var maximumConnectionsPerAddress: Int = 64

    @Option(name: .customLong("max-header-size"), help: ArgumentHelp("Largest request head (request line and headers), in bytes.", valueName: "bytes"))
    var maximumHeaderSize: Int = 16 << 10

    @Option(name: .customLong("max-body-size"), help: ArgumentHelp("Largest POST /v1/rpc body, in bytes (larger: 413).", valueName: "bytes"))
    var maximumBodySize: Int = 1 << 20

    @Option(name: .customLong("max-message-size"), help: ArgumentHelp("Largest WebSocket message, in bytes (larger: the socket is closed with 1009).", valueName: "bytes"))
    var maximumMessageSize: Int = 1 << 20

    @Option(name: .customLong("max-queued-replies"), help: "Stream replies waiting for a WebSocket that does not read before that stream is ended with limit_exceeded.")
    var maximumQueuedReplies: Int = 1_000

    @Option(name: .customLong("request-timeout"), help: ArgumentHelp("Seconds a connection has to finish its TLS handshake and send a whole request (slowloris).", valueName: "seconds"))
    var requestTimeoutSeconds: Double = 10

    @Option(name: .customLong("auth-timeout"), help: ArgumentHelp("Seconds a WebSocket opened without a credential has to give one (gateway.authenticate) before it is closed with 1008.", valueName: "seconds"))
    var authenticationTimeoutSeconds: Double = 10

    @Option(name: .customLong("ping-interval"), help: ArgumentHelp("Seconds between WebSocket pings; a device that misses one is disconnected.", valueName: "seconds"))
    var pingSeconds: Double = 30

    @Option(name: .customLong("unauthenticated-rate"), help: "Requests without a device credential allowed per minute and IP address (pairing steps, /v1/info, /healthz, failed authentications).")
    var unauthenticatedPerMinute: Int = 60

    @Option(name: .customLong("unauthenticated-burst"), help: "Of those, how many may come at once.")
    var unauthenticatedBurst: Int = 30

    @Option(name: .customLong("credential-recheck"), help: ArgumentHelp("While the store's credentials cannot be followed (the store is away), seconds the store's answer about a device's credential is kept.", valueName: "seconds"))
    var credentialRecheckSeconds: Double = 5

    @Option(name: .customLong("call-timeout"), help: ArgumentHelp("Seconds a relayed call may take.", valueName: "seconds"))
    var callTimeoutSeconds: Double = 30

    @Option(name: .customLong("streams-per-connection"), help: "Devices' streams (push.listen) carried by one connection to a service: at most the push service's --max-listeners-per-connection (64).")
    var streamsPerConnection: Int = 64

    @Option(name: .customLong("metrics-listen"), help: ArgumentHelp(
        "Serve the server's Prometheus metrics on GET /metrics here: PORT (on 127.0.0.1) or HOST:PORT. Off by default.",
        discussion: "Under systemd, enable screentime-metrics.socket instead (port 9464 on 127.0.0.1; the gateway may not open sockets itself).",
        valueName: "address"))
    var metricsListen: String?

    @Option(name: .customLong("metrics-token-file"), help: ArgumentHelp(
        "A file holding the bearer token a scrape must send (Authorization: Bearer …); without it, anyone who reaches the address may read the metrics.",
        valueName: "path"))
    var metricsTokenFile: String?

    @Flag(name: .customLong("init-only"), help: "Make the key and certificate (if missing), write endpoint.json for --listen's port, print the pin, and exit.")
    var initOnly = false

    public mutating func validate() throws {
        guard (self.certificateFile == nil) == (self.privateKeyFile == nil) else { throw ValidationError("--certificate and --private-key go together") }
        try checkOption("--certificate-days", self.certificateDays, in: 1...825)
        guard self.renewDays >= 1 else { throw ValidationError("--renew-days must be at least 1") }
        if let listen {
            do { _ = try GatewayListen.parse(listen) } catch { throw ValidationError(error.description) }
        }
        if let metricsListen {
            do { _ = try MetricsEndpoint.Listen.parse(metricsListen) } catch { throw ValidationError(error.description) }
        }
        if let metricsTokenFile {
            guard let token = try? String(contentsOfFile: metricsTokenFile, encoding: .utf8) else {
                throw ValidationError("--metrics-token-file: cannot read \(metricsTokenFile)")
            }
            guard !token.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw ValidationError("--metrics-token-file: \(metricsTokenFile) is empty; put the token in it (openssl rand -hex 32 > \(metricsTokenFile))")
            }
        }
        guard self.options.socket == nil, self.options.idleExitSeconds == nil else {
            throw ValidationError("--socket and --idle-exit are not for the gateway: it listens on TCP (--listen, or the socket systemd passes)")
        }
        guard self.options.maximumFrameSize == defaultMaximumFrameSize else {
            throw ValidationError("--max-frame-size is not for the gateway: use --max-body-size (POST /v1/rpc) and --max-message-size (WebSocket)")
        }
        for (name, value) in [("--max-connections-per-address", self.maximumConnectionsPerAddress), ("--max-header-size", self.maximumHeaderSize),
                              ("--max-body-size", self.maximumBodySize), ("--max-message-size", self.maximumMessageSize),
                              ("--max-queued-replies", self.maximumQueuedReplies), ("--unauthenticated-rate", self.unauthenticatedPerMinute),
                              ("--unauthenticated-burst", self.unauthenticatedBurst), ("--streams-per-connection", self.streamsPerConnection)] where value < 1 {
            throw ValidationError("\(name) must be at least 1")
        }
        for (name, value) in [("--request-timeout", self.requestTimeoutSeconds), ("--auth-timeout", self.authenticationTimeoutSeconds), ("--ping-interval", self.pingSeconds),
                              ("--credential-recheck", self.credentialRecheckSeconds), ("--call-timeout", self.callTimeoutSeconds)] where value <= 0 {
            throw ValidationError("\(name) must be a positive number of seconds")
        }
    }

    public func run() async throws {
        let configuration = self.configuration(paths: ServicePaths(options: self.options))
        if self.initOnly { return try self.initialize(configuration) }
        try await ServiceMain.run(service: "gateway", identifier: "screentime-gatewayd", version: ServerVersion.current, options: self.options) { environment in
            try .gateway(configuration, environment: environment)
        }
    }

    /// `--init-only`: the certificate and the endpoint file, then exit (printing the pin).
    func initialize(_ configuration: GatewayConfiguration) throws {
        ServiceLogging.bootstrap(identifier: "screentime-gatewayd", level: self.options.resolvedLogLevel, target: self.options.logTarget)
        var logger = Logger(label: "screentime.gateway")
        logger.logLevel = self.options.resolvedLogLevel
        do {
            let server = try GatewayServer.make(configuration, inherited: nil, logger: logger)
            var port = 8443
            if case .address(_, let given) = server.listen, given != 0 { port = given }
            let endpoint = try server.publishEndpoint(port: port)
            print("pin: sha256//\(endpoint.pin)")
            for url in endpoint.urls { print("url: \(url)") }
        } catch {
            FileHandle.standardError.write(Data("screentime-gatewayd: \(error)\n".utf8))
            Foundation.exit(1)
        }
    }

    func configuration(paths: ServicePaths) -> GatewayConfiguration {
        let limits = GatewayLimits(
            maximumHeaderSize: self.maximumHeaderSize, maximumBodySize: self.maximumBodySize, maximumMessageSize: self.maximumMessageSize,
            maximumConnections: self.options.maximumConnections, maximumConnectionsPerAddress: self.maximumConnectionsPerAddress,
            maximumInFlight: self.options.maximumInFlight, maximumQueuedReplies: self.maximumQueuedReplies,
            requestTimeout: .seconds(self.requestTimeoutSeconds),
            authenticationTimeout: .seconds(self.authenticationTimeoutSeconds), pingInterval: .seconds(self.pingSeconds),
            unauthenticatedPerMinute: self.unauthenticatedPerMinute, unauthenticatedBurst: self.unauthenticatedBurst)
        let certificate = CertificateSettings(
            hostNames: self.hosts.isEmpty ? HostNames.defaults() : self.hosts,
            certificateFile: self.certificateFile, privateKeyFile: self.privateKeyFile,
            lifetime: .seconds(self.certificateDays * 86_400), renewBefore: .seconds(self.renewDays * 86_400), advertisedPort: self.advertisedPort)
        var configuration = GatewayConfiguration(
            listen: self.listen, runtimeDirectory: paths.runtimeDirectory, stateDirectory: paths.stateDirectory, certificate: certificate,
            limits: limits, serverName: self.serverName ?? ProcessInfo.processInfo.hostName, version: ServerVersion.current,
            credentialRecheck: .seconds(self.credentialRecheckSeconds), callTimeout: .seconds(self.callTimeoutSeconds),
            shutdownTimeout: .seconds(self.options.shutdownTimeoutSeconds), streamsPerConnection: self.streamsPerConnection)
        configuration.metricsListen = self.metricsListen
        configuration.metricsToken = self.metricsTokenFile
            .flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }?.trimmingCharacters(in: .whitespacesAndNewlines)
        return configuration
    }
}

