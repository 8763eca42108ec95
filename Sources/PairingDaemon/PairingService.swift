import ArgumentParser
import OptionChecks
import Foundation
import PairingAPI
import PairingEngine
import ServerVersion
import ServiceKit

public struct PairingService: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "screentime-pairingd",
        abstract: "The ScreenTime Rewards pairing service: family bootstrap, child-device invitations, short-code verification, device credentials.",
        discussion: """
            Serves the pairing.* methods on <runtime-dir>/pairing.sock (or the socket systemd passes). \
            Keeps no database of its own: its state is in the record store (<runtime-dir>/store.sock), \
            invitations in each family's internal _pairing zone. The methods: /usr/share/doc/screentime-server/protocol.md (docs/ in the source).
            """,
        version: ServerVersion.current
    )

    public init() {}

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("store-socket"), help: ArgumentHelp("The record store's socket.", discussion: "Default: <runtime-dir>/store.sock.", valueName: "path"))
    var storeSocket: String?

    @Option(name: .customLong("server-address"), help: ArgumentHelp("How devices reach this server, written into pairing URIs.", discussion: "Default: this machine's host name.", valueName: "address"))
    var serverAddress: String?

    @Option(name: .customLong("gateway-endpoint"), help: ArgumentHelp("The gateway's endpoint file (its URLs and key pin), put in invitations and enrollment codes.", discussion: "Default: <state-dir>/gateway/endpoint.json, which screentime-gatewayd writes.", valueName: "path"))
    var gatewayEndpoint: String?

    @Option(name: .customLong("gateway-url"), help: ArgumentHelp("A URL devices reach the gateway at, instead of those in the endpoint file (repeat for several, most preferred first).", valueName: "url"))
    var gatewayURLs: [String] = []

    @Option(name: .customLong("invitation-ttl"), help: ArgumentHelp("Seconds a child-device invitation stays valid.", valueName: "seconds"))
    var invitationSeconds: Double = 600

    @Option(name: .customLong("enrollment-ttl"), help: ArgumentHelp("Seconds a parent enrollment code stays valid.", valueName: "seconds"))
    var enrollmentSeconds: Double = 86_400

    @Option(name: .customLong("max-failures-per-address"), help: "Wrong pairing secrets accepted for a family from one address (an IPv6 /64 as one) within the window before that address's attempts for it are refused.")
    var failuresPerAddress: Int = 10

    @Option(name: .customLong("max-failures-per-family"), help: "Wrong pairing secrets accepted for a family from every address together within the window: a ceiling only many addresses reach.")
    var failuresPerFamily: Int = 1_000

    // Once a limit over all families together; there is none now (docs/architecture.md,
    // "Pairing's limits"). Still accepted, so that an options file naming it keeps working.
    @Option(name: .customLong("max-failures"), help: .hidden)
    var failuresTotal: Int?

    @Option(name: .customLong("failure-window"), help: ArgumentHelp("The window of those limits, in seconds.", valueName: "seconds"))
    var failureWindowSeconds: Double = 600

    public mutating func validate() throws {
        try checkOption("--invitation-ttl", self.invitationSeconds, in: 10...7 * 86_400, "seconds")
        try checkOption("--enrollment-ttl", self.enrollmentSeconds, in: 60...30 * 86_400, "seconds")
        guard self.failuresPerFamily > 0 else { throw ValidationError("--max-failures-per-family must be at least 1") }
        guard self.failuresPerAddress > 0 else { throw ValidationError("--max-failures-per-address must be at least 1") }
        try checkOption("--failure-window", self.failureWindowSeconds, in: 1...86_400, "seconds")
    }

    public func run() async throws {
        let endpointFile = self.gatewayEndpoint ?? GatewayEndpoint.path(stateDirectory: ServicePaths(options: self.options).stateDirectory)
        let urls = self.gatewayURLs
        let configuration = PairingConfiguration(
            storeSocket: self.storeSocket ?? ServicePaths(options: self.options).runtimeDirectory + "/store.sock",
            serverAddress: self.serverAddress ?? ProcessInfo.processInfo.hostName,
            invitationLifetime: .seconds(self.invitationSeconds),
            enrollmentLifetime: .seconds(self.enrollmentSeconds),
            failuresPerAddress: self.failuresPerAddress,
            failuresPerFamily: self.failuresPerFamily,
            failureWindow: .seconds(self.failureWindowSeconds),
            gateway: {
                // Read each time: the gateway may start, or change its certificate, at any moment.
                guard var endpoint = try? GatewayEndpoint.read(from: endpointFile) else { return nil }
                if !urls.isEmpty { endpoint.urls = urls }
                return endpoint
            })
        let obsoleteTotal = self.failuresTotal != nil
        try await ServiceMain.run(service: "pairing", identifier: "screentime-pairingd", version: ServerVersion.current, options: self.options) { environment in
            if obsoleteTotal {
                environment.logger.notice("--max-failures is no longer used: wrong pairing secrets are limited per family only; remove it from the options")
            }
            return try await .pairing(configuration, environment: environment)
        }
    }
}
