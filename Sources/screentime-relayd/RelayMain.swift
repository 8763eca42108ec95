import ArgumentParser
import Foundation
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
    @Option(name: .customLong("sealing-key-file"), help: ArgumentHelp("The key handles are sealed with (made on first start, mode 0600). Losing it voids every handle: apps then register again.", valueName: "file"))
    var sealingKeyFile: String
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
    @Option(name: .customLong("request-timeout"), help: ArgumentHelp("Seconds a new connection has for its TLS handshake and first request, and any request for its body.", valueName: "seconds"))
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
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
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
            host: self.host, port: self.port, tls: self.tlsCertificate.map { ($0, self.tlsKey!) }, sealingKey: try self.sealingKey() ?? HandleSealer.newKeyText(),
            topics: Set(self.topics), apnsKeyId: self.apnsKeyId, apnsTeamId: self.apnsTeamId, apnsKey: apnsKey,
            apnsURL: self.apnsURL, apnsCAFile: self.apnsCAFile, wakesPerMinutePerServer: self.wakesPerMinute,
            wakesPerMinutePerAddress: self.wakesPerMinutePerAddress, sealsPerMinutePerAddress: self.sealsPerMinute,
            trustForwardedFor: self.trustForwardedFor, maximumConnections: self.maximumConnections,
            maximumConnectionsPerAddress: self.maximumConnectionsPerAddress, requestTimeout: .seconds(self.requestTimeout),
            idleTimeout: .seconds(self.idleTimeout), maximumSeenWakes: self.maximumSeenWakes)
        let service = try RelayService(configuration, logger: logger) { port in
            logger.notice("ready", metadata: ["port": "\(port)", "topics": "\(self.topics.sorted().joined(separator: ","))", "tls": "\(self.tlsCertificate != nil)"])
        }
        // Made only once every other file was found good: a bad option leaves nothing behind.
        if !FileManager.default.fileExists(atPath: self.sealingKeyFile) { try self.writeSealingKey(configuration.sealingKey, logger) }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as IOError {
            throw RelayConfigurationError("cannot listen on [\(self.host)]:\(self.port): \(error.description)")
        }
    }

    /// The sealing key from its file; nil when there is none yet.
    private func sealingKey() throws -> String? {
        guard FileManager.default.fileExists(atPath: self.sealingKeyFile) else { return nil }
        // Never made again over one that exists: that would void every handle.
        guard let text = try? String(contentsOfFile: self.sealingKeyFile, encoding: .utf8) else {
            throw RelayConfigurationError("cannot read --sealing-key-file \(self.sealingKeyFile) (\(RelayService.reason(CocoaError(.fileReadUnknown), file: self.sealingKeyFile))); it is kept as it is")
        }
        guard HandleSealer.key(fromText: text) != nil else {
            throw RelayConfigurationError("\(self.sealingKeyFile) is not a sealing key (base64 of 32 bytes); move it away to have one made (handles made with it stop working)")
        }
        return text
    }

    /// Keeps a new sealing key in its file (0600).
    private func writeSealingKey(_ text: String, _ logger: Logger) throws {
        let directory = (self.sealingKeyFile as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw RelayConfigurationError("cannot make the directory of --sealing-key-file, \(directory): \(error.localizedDescription)")
            }
        }
        guard FileManager.default.createFile(atPath: self.sealingKeyFile, contents: Data((text + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
            throw RelayConfigurationError("cannot write --sealing-key-file \(self.sealingKeyFile) (is its directory writable by this user?)")
        }
        logger.notice("made a new sealing key", metadata: ["file": "\(self.sealingKeyFile)"])
    }
}
