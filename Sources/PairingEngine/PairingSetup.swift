import Foundation
import Logging
import PairingAPI
import RPCClient
import ServiceKit

/// How the pairing service runs: what its options say.
public struct PairingConfiguration: Sendable {
    /// The record store's socket.
    public var storeSocket: String
    /// How devices reach this server, written into pairing URIs.
    public var serverAddress: String
    public var invitationLifetime: Duration
    public var enrollmentLifetime: Duration
    /// Wrong secrets accepted for one family from one address (an IPv6 /64 as one) within
    /// `failureWindow`.
    public var failuresPerAddress: Int
    /// Wrong secrets accepted for one family from every address together within
    /// `failureWindow`: a ceiling only many addresses reach.
    public var failuresPerFamily: Int
    public var failureWindow: Duration
    /// Where the gateway is and its pin, for invitations and enrollment codes (nil: none yet).
    public var gateway: @Sendable () -> GatewayEndpoint?

    public init(storeSocket: String, serverAddress: String, invitationLifetime: Duration = .seconds(600), enrollmentLifetime: Duration = .seconds(86_400),
                failuresPerAddress: Int = 10, failuresPerFamily: Int = 1_000, failureWindow: Duration = .seconds(600),
                gateway: @escaping @Sendable () -> GatewayEndpoint? = { nil }) {
        self.storeSocket = storeSocket
        self.serverAddress = serverAddress
        self.invitationLifetime = invitationLifetime
        self.enrollmentLifetime = enrollmentLifetime
        self.failuresPerAddress = failuresPerAddress
        self.failuresPerFamily = failuresPerFamily
        self.failureWindow = failureWindow
        self.gateway = gateway
    }
}

extension ServiceSetup {
    /// The pairing service: its methods over one shared connection to the store, and the
    /// hourly purge of unusable invitations beside them.
    public static func pairing(_ configuration: PairingConfiguration, environment: ServiceEnvironment) async throws -> ServiceSetup {
        let store = PairingStore(client: RPCClient(configuration: ClientConfiguration(socketPath: configuration.storeSocket, connectTimeout: .seconds(10))))
        var settings = PairingFlows.Settings(
            serverAddress: configuration.serverAddress,
            invitationLifetime: configuration.invitationLifetime,
            enrollmentLifetime: configuration.enrollmentLifetime)
        settings.gateway = configuration.gateway
        try FileManager.default.createDirectory(atPath: environment.paths.stateDirectory, withIntermediateDirectories: true)
        let attempts = environment.paths.stateDirectory + "/" + AttemptLimiter.fileName
        let limiter = AttemptLimiter(AttemptLimiter.Limits(
            perAddress: configuration.failuresPerAddress, perFamily: configuration.failuresPerFamily, window: configuration.failureWindow),
            file: attempts, logger: environment.logger)
        environment.logger.info("using the store", metadata: ["socket": "\(configuration.storeSocket)", "attempts_file": "\(attempts)"])
        var pairing = PairingFlows(store: store, settings: settings, limiter: limiter, serializer: KeyedSerializer(), logger: environment.logger)
        pairing.metrics = PairingMetrics(environment.metrics)
        return ServiceSetup(
            methods: PairingHandlers.table(pairing),
            background: [InvitationPurge(store: store, logger: environment.logger)])
    }
}
