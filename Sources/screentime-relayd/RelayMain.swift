import ArgumentParser
import OptionChecks
import Foundation
import Logging
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

    @Option(help: ArgumentHelp("Address to listen on.", valueName: "address")) var host = "0.0.0.0"
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
        let apnsKey: String
        do {
            apnsKey = try String(contentsOfFile: self.apnsKeyFile, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read --apns-key-file \(self.apnsKeyFile): \(error.localizedDescription)")
        }
        let configuration = RelayConfiguration(
            host: self.host, port: self.port, tls: self.tlsCertificate.map { ($0, self.tlsKey!) }, sealingKey: try self.sealingKey(logger),
            topics: Set(self.topics), apnsKeyId: self.apnsKeyId, apnsTeamId: self.apnsTeamId, apnsKey: apnsKey,
            apnsURL: self.apnsURL, apnsCAFile: self.apnsCAFile, wakesPerMinutePerServer: self.wakesPerMinute,
            sealsPerMinutePerAddress: self.sealsPerMinute, trustForwardedFor: self.trustForwardedFor)
        let service: RelayService
        do {
            service = try RelayService(configuration, logger: logger) { port in
                logger.notice("ready", metadata: ["port": "\(port)", "topics": "\(self.topics.sorted().joined(separator: ","))", "tls": "\(self.tlsCertificate != nil)"])
            }
        } catch {
            throw ValidationError("\(error)")
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// The sealing key from its file, made (0600) when there is none.
    private func sealingKey(_ logger: Logger) throws -> String {
        if FileManager.default.fileExists(atPath: self.sealingKeyFile) {
            // Never made again over one that exists: that would void every handle.
            guard let text = try? String(contentsOfFile: self.sealingKeyFile, encoding: .utf8) else {
                throw ValidationError("cannot read --sealing-key-file \(self.sealingKeyFile); it is kept as it is")
            }
            guard HandleSealer.key(fromText: text) != nil else {
                throw ValidationError("\(self.sealingKeyFile) is not a sealing key (base64 of 32 bytes); move it away to have one made (handles made with it stop working)")
            }
            return text
        }
        let text = HandleSealer.newKeyText()
        let directory = (self.sealingKeyFile as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) }
        guard FileManager.default.createFile(atPath: self.sealingKeyFile, contents: Data((text + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write --sealing-key-file \(self.sealingKeyFile)")
        }
        logger.notice("made a new sealing key", metadata: ["file": "\(self.sealingKeyFile)"])
        return text
    }
}
