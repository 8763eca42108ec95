import ArgumentParser
import Foundation
import LineLogging
import Logging
import NIOCore
import OptionChecks
import RelayCore
import RelayServer
import ServerVersion
import ServiceLifecycle

/// `screentime-relayd`: the wake relay the app's publisher runs on the internet (never on a
/// home server). It holds the app's APNs key and wakes sleeping iPhones for home servers
/// that sign their wakes with their own key; it keeps no database (docs/relay.md).
@main
struct RelayMain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-relayd",
        abstract: "Wakes sleeping iPhones for ScreenTime Rewards home servers, through APNs, keeping no registrations.",
        discussion: """
            Run by the app's publisher, not on a home server. Apps seal their APNs token with POST /v1/seal; \
            home servers wake them with POST /v1/wake, signed with the key their devices pinned. See docs/relay.md.

            Example:
              screentime-relayd --topic com.example.screentime
                --apns-key-file AuthKey_ABC123DEFG.p8 --apns-key-id ABC123DEFG
                --apns-team-id DEF123GHIJ --tls-certificate fullchain.pem
                --tls-key privkey.pem --sealing-key-file sealing.key
            """,
        version: ServerVersion.current)

    @Option(help: ArgumentHelp("Address to listen on (:: is every address, IPv6 and IPv4).", valueName: "address")) var host = "::"
    @Option(help: ArgumentHelp("Port to listen on (0: any free one, logged).", valueName: "port")) var port = 8443
    @Option(name: .customLong("tls-certificate"), help: ArgumentHelp("The certificate chain to serve (PEM).", valueName: "file")) var tlsCertificate: String?
    @Option(name: .customLong("tls-key"), help: ArgumentHelp("Its private key (PEM).", valueName: "file")) var tlsKey: String?
    @Flag(name: .customLong("plain-http"), help: "Serve plain HTTP, for a reverse proxy in front that terminates TLS.") var plainHTTP = false
    @Option(name: .customLong("sealing-key-file"), help: ArgumentHelp("The key handles are sealed with (the first made on first start, mode 0600). Repeat it to rotate: the first seals, the others (older keys) still open their handles. Losing a key voids its handles: apps then register again.", valueName: "file"))
    var sealingKeyFiles: [String] = []
    @Option(name: .customLong("handle-lifetime-days"), help: ArgumentHelp("Days a handle is good for after it was sealed (the app seals again at each launch).", valueName: "days"))
    var handleLifetimeDays = 30
    @Option(name: .customLong("alerts-per-hour"), help: ArgumentHelp("Visible alerts one device may be sent an hour.", valueName: "count"))
    var alertsPerHour = 10
    @Option(name: .customLong("state-database"), help: ArgumentHelp("Where copies of the relay behind one address share their counts and the wakes taken: postgres://user@host/database (?host=/run/postgresql for a Unix socket; a password in PGPASSWORD). Without it, one copy keeps them in memory.", valueName: "url"))
    var stateDatabase: String?
    @Option(name: .customLong("seals-per-hour"), help: ArgumentHelp("Handles one device may be sent an hour (the app asks for one at each launch).", valueName: "count"))
    var sealsPerHour = 20
    @Option(name: .customLong("apns-pushes-per-second"), help: ArgumentHelp("Pushes a second to APNs at most, over every caller (what the publisher allows).", valueName: "count"))
    var apnsPushesPerSecond = 2_000
    @Option(name: .customLong("apns-key-file"), help: ArgumentHelp("The app's APNs authentication key (.p8).", valueName: "file")) var apnsKeyFile: String
    @Option(name: .customLong("apns-key-id"), help: ArgumentHelp("Its key id (10 characters).", valueName: "id")) var apnsKeyId: String
    @Option(name: .customLong("apns-team-id"), help: ArgumentHelp("The developer team id (10 characters).", valueName: "id")) var apnsTeamId: String
    @Option(name: .customLong("topic"), help: ArgumentHelp("An app bundle id the key may push to (repeat for several).", valueName: "bundle-id")) var topics: [String] = []
    @Option(name: .customLong("wakes-per-minute"), help: ArgumentHelp("Wakes one home server may send a minute.", valueName: "count")) var wakesPerMinute = 120
    @Option(name: .customLong("wakes-per-minute-per-address"), help: ArgumentHelp("Wakes one client address (an IPv6 /64 as one) may send a minute, counted before any signature is checked.", valueName: "count"))
    var wakesPerMinutePerAddress = 600
    @Option(name: .customLong("max-connections"), help: ArgumentHelp("Connections open at once in all; more are closed as they come (keep LimitNOFILE above it).", valueName: "count"))
    var maximumConnections = 10_000
    @Option(name: .customLong("max-connections-per-address"), help: ArgumentHelp("Connections open at once from one address (an IPv6 /64 as one).", valueName: "count"))
    var maximumConnectionsPerAddress = 32
    @Option(name: .customLong("request-timeout"), help: ArgumentHelp("Seconds a new connection has for its TLS handshake and first request, and a request for its body.", valueName: "seconds"))
    var requestTimeout = 10
    @Option(name: .customLong("idle-timeout"), help: ArgumentHelp("Seconds a kept-alive connection may stay silent.", valueName: "seconds"))
    var idleTimeout = 120
    @Option(name: .customLong("max-seen-wakes"), help: ArgumentHelp("Wakes remembered to refuse a replay (10 minutes each); past that wakes are refused with 503.", valueName: "count"))
    var maximumSeenWakes = 1_000_000
    @Option(name: .customLong("seals-per-minute"), help: ArgumentHelp("Seals one client address may ask for a minute (an app seals at most once a launch).", valueName: "count")) var sealsPerMinute = 60
    @Flag(name: .customLong("trust-forwarded-for"), help: "Behind a reverse proxy: take the client's address from the last X-Forwarded-For entry (the proxy's), for --seals-per-minute.") var trustForwardedFor = false
    @Option(name: .customLong("apns-url"), help: ArgumentHelp("APNs's base URL instead of Apple's (a stand-in for tests).", valueName: "url")) var apnsURL: String?
    @Option(name: .customLong("apns-ca-file"), help: ArgumentHelp("A CA to trust for APNs instead of the system's (a stand-in's).", valueName: "file")) var apnsCAFile: String?
    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", valueName: "level")) var logLevel = "info"

    func validate() throws {
        if (self.tlsCertificate == nil) != (self.tlsKey == nil) { throw ValidationError("give --tls-certificate and --tls-key together") }
        if self.tlsCertificate == nil && !self.plainHTTP { throw ValidationError("give --tls-certificate and --tls-key, or --plain-http behind a reverse proxy that terminates TLS") }
        if self.topics.isEmpty { throw ValidationError("give at least one --topic (the app's bundle id)") }
        if self.sealingKeyFiles.isEmpty { throw ValidationError("give --sealing-key-file (made on first start; repeat it to rotate keys)") }
        try checkOption("--handle-lifetime-days", self.handleLifetimeDays, in: 1...3650)
        try checkOption("--alerts-per-hour", self.alertsPerHour, in: 1...100_000)
        try checkOption("--seals-per-hour", self.sealsPerHour, in: 1...100_000)
        try checkOption("--apns-pushes-per-second", self.apnsPushesPerSecond, in: 1...10_000_000)
        try checkOption("--wakes-per-minute", self.wakesPerMinute, in: 1...10_000_000)
        try checkOption("--seals-per-minute", self.sealsPerMinute, in: 1...10_000_000)
        try checkOption("--wakes-per-minute-per-address", self.wakesPerMinutePerAddress, in: 1...10_000_000)
        try checkOption("--max-connections", self.maximumConnections, in: 1...1_000_000)
        try checkOption("--max-connections-per-address", self.maximumConnectionsPerAddress, in: 1...1_000_000)
        try checkOption("--request-timeout", self.requestTimeout, in: 1...600)
        try checkOption("--idle-timeout", self.idleTimeout, in: 1...86_400)
        try checkOption("--max-seen-wakes", self.maximumSeenWakes, in: 1_000...100_000_000)
        try checkOption("--port", self.port, in: 0...65535)
        if Logger.Level(rawValue: self.logLevel) == nil { throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: self.logLevel) ?? .info
        // Lines on stderr (the journal under systemd), every value escaped: nothing a caller
        // sends can make a second line.
        LoggingSystem.bootstrap { label in
            var handler = StderrLogHandler(label: label, identifier: "screentime-relayd")
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "screentime-relayd")
        do {
            try await self.serve(logger)
        } catch let failure as RelayConfigurationError {
            // A start-up problem: a sentence and exit status 1, never a trap.
            FileHandle.standardError.write(Data("screentime-relayd: \(failure.description)\n".utf8))
            throw ExitCode.failure
        }
    }

    private func serve(_ logger: Logger) async throws {
        let apnsKey: String
        do {
            apnsKey = try String(contentsOfFile: self.apnsKeyFile, encoding: .utf8)
        } catch {
            throw RelayConfigurationError("cannot read --apns-key-file \(self.apnsKeyFile) (\(RelayService.reason(error, file: self.apnsKeyFile)))")
        }
        let configuration = RelayConfiguration(
            host: self.host, port: self.port, tls: self.tlsCertificate.map { ($0, self.tlsKey!) }, sealingKeys: try self.sealingKeys(),
            topics: Set(self.topics), apnsKeyId: self.apnsKeyId, apnsTeamId: self.apnsTeamId, apnsKey: apnsKey,
            apnsURL: self.apnsURL, apnsCAFile: self.apnsCAFile, wakesPerMinutePerServer: self.wakesPerMinute,
            wakesPerMinutePerAddress: self.wakesPerMinutePerAddress, sealsPerMinutePerAddress: self.sealsPerMinute,
            trustForwardedFor: self.trustForwardedFor, maximumConnections: self.maximumConnections,
            maximumConnectionsPerAddress: self.maximumConnectionsPerAddress, requestTimeout: .seconds(self.requestTimeout),
            idleTimeout: .seconds(self.idleTimeout), maximumSeenWakes: self.maximumSeenWakes,
            handleLifetime: TimeInterval(self.handleLifetimeDays) * 86_400, alertsPerHourPerDevice: self.alertsPerHour,
            sealsPerHourPerDevice: self.sealsPerHour, apnsPushesPerSecond: self.apnsPushesPerSecond, stateDatabase: self.stateDatabase)
        let service = try RelayService(configuration, logger: logger) { port in
            logger.notice("ready", metadata: ["port": "\(port)", "topics": "\(self.topics.sorted().joined(separator: ","))", "tls": "\(self.tlsCertificate != nil)"])
        }
        // Made only once every other file was found good: a bad option leaves nothing behind.
        if !FileManager.default.fileExists(atPath: self.sealingKeyFiles[0]) { try self.writeSealingKey(configuration.sealingKeys[0], logger) }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as IOError {
            throw RelayConfigurationError("cannot listen on [\(self.host)]:\(self.port): \(error.description)")
        }
    }

    /// The sealing keys from their files, the first new when it has none yet (written once
    /// the other files were found good); an older key's file must exist.
    private func sealingKeys() throws -> [String] {
        try self.sealingKeyFiles.enumerated().map { index, file in
            guard FileManager.default.fileExists(atPath: file) else {
                guard index == 0 else { throw RelayConfigurationError("--sealing-key-file \(file) does not exist: an older key is kept to open its handles, not made") }
                return HandleSealer.newKeyText()
            }
            // Never made again over one that exists: that would void every handle.
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw RelayConfigurationError("cannot read --sealing-key-file \(file) (\(RelayService.reason(CocoaError(.fileReadUnknown), file: file))); it is kept as it is")
            }
            guard HandleSealer.key(fromText: text) != nil else {
                throw RelayConfigurationError("\(file) is not a sealing key (base64 of 32 bytes); move it away to have one made (handles made with it stop working)")
            }
            return text
        }
    }

    /// Keeps a new sealing key in its file (0600).
    private func writeSealingKey(_ text: String, _ logger: Logger) throws {
        let file = self.sealingKeyFiles[0]
        let directory = (file as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw RelayConfigurationError("cannot make the directory of --sealing-key-file, \(directory): \(error.localizedDescription)")
            }
        }
        guard FileManager.default.createFile(atPath: file, contents: Data((text + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
            throw RelayConfigurationError("cannot write --sealing-key-file \(file) (is its directory writable by this user?)")
        }
        logger.notice("made a new sealing key", metadata: ["file": "\(file)"])
    }
}
