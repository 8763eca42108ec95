import Foundation
import PairingAPI
import PairingEngine
import RecordStore
import RPCClient
import RPCCore
import ServiceHarness
import ServiceKit
import StoreAPI
import Synchronization
import TestSupport

/// A store and a pairing service side by side in one runtime directory, as systemd would
/// run them: either their engines in the test's own process (``inProcess(configure:_:)``:
/// for tests of pairing's logic), or the real binaries (``start(pairingArguments:activated:storeArguments:)``:
/// for what needs a process: activation, restarts, logs; and for the stacks that add push,
/// the aggregator or the gateway as processes beside them).
public final class PairingHarness: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let state: String
    public let storeSocket: String
    public let pairingSocket: String
    private let processes: (store: ServiceProcess, pairing: ServiceProcess)?
    /// In process: the store's and pairing's engines, which a test may restart.
    private let engines: (store: RestartableService, pairing: RestartableService)?
    private var restartedPairing: ServiceProcess?
    private let pairingArguments: [String]
    private let clients = Mutex<[RPCClient]>([])

    private init(directory: TemporaryDirectory, state: String, storeSocket: String, pairingSocket: String,
                 processes: (store: ServiceProcess, pairing: ServiceProcess)?, engines: (store: RestartableService, pairing: RestartableService)? = nil,
                 pairingArguments: [String]) {
        self.directory = directory
        self.state = state
        self.storeSocket = storeSocket
        self.pairingSocket = pairingSocket
        self.processes = processes
        self.engines = engines
        self.pairingArguments = pairingArguments
    }

    public static func start(pairingArguments: [String] = [], activated: Bool = false, storeArguments: [String] = []) async throws -> PairingHarness {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let store = try await ServiceProcess.start("screentime-stored", service: "store", in: directory, stateDirectory: state, arguments: storeArguments)
        let arguments = ["--server-address", "home.example"] + pairingArguments
        let pairing = activated
            ? try await ServiceProcess.startSocketActivated("screentime-pairingd", service: "pairing", in: directory, stateDirectory: state, arguments: arguments)
            : try await ServiceProcess.start("screentime-pairingd", service: "pairing", in: directory, stateDirectory: state, arguments: arguments)
        return PairingHarness(directory: directory, state: state, storeSocket: store.socketPath, pairingSocket: pairing.socketPath,
                              processes: (store, pairing), pairingArguments: arguments)
    }

    /// Runs `body` with the store's and pairing's engines serving in this process (pairing
    /// writes `home.example` into its URIs; `configure` changes the rest), then stops both
    /// gracefully.
    public static func inProcess<T: Sendable>(configure: @escaping @Sendable (inout PairingConfiguration) -> Void = { _ in },
                                              storeClock: @escaping @Sendable () -> Date = { Date() },
                                              _ body: @Sendable (PairingHarness) async throws -> T) async throws -> T {
        let directory = TemporaryDirectory()
        let store = try await RestartableService("store", in: directory, setup: { try await .store(StoreConfiguration(clock: storeClock), environment: $0) })
        let storeSocket = store.socketPath
        let pairing: RestartableService
        do {
            pairing = try await RestartableService("pairing", in: directory, setup: { environment in
                var configuration = PairingConfiguration(storeSocket: storeSocket, serverAddress: "home.example")
                configure(&configuration)
                return try await .pairing(configuration, environment: environment)
            })
        } catch {
            try? await store.stop()
            throw error
        }
        let harness = PairingHarness(directory: directory, state: directory.file("state"), storeSocket: storeSocket,
                                     pairingSocket: pairing.socketPath, processes: nil, engines: (store, pairing), pairingArguments: [])
        let result: T
        do {
            result = try await withCleanup { try await body(harness) } afterwards: { await harness.closeClients() }
        } catch {
            try? await pairing.stop()
            try? await store.stop()
            throw error
        }
        try await pairing.stop()
        try await store.stop()
        return result
    }

    /// In process: stops the store's engine gracefully and starts it again (pairing and
    /// the services beside it keep running, and connect again).
    public func restartStoreEngine() async throws {
        guard let engines = self.engines else { preconditionFailure("the services run as processes") }
        try await engines.store.restart()
    }

    /// In process: stops pairing's engine gracefully and starts it again.
    public func restartPairingEngine() async throws {
        guard let engines = self.engines else { preconditionFailure("the services run as processes") }
        try await engines.pairing.restart()
    }

    /// The store's process (a harness made by ``start(pairingArguments:activated:storeArguments:)`` only).
    public var store: ServiceProcess {
        guard let processes = self.processes else { preconditionFailure("the services run in the test's process: start them with PairingHarness.start to have processes") }
        return processes.store
    }

    /// The pairing service's process (a harness made by ``start(pairingArguments:activated:storeArguments:)`` only).
    public var pairing: ServiceProcess {
        guard let processes = self.processes else { preconditionFailure("the services run in the test's process: start them with PairingHarness.start to have processes") }
        return self.restartedPairing ?? processes.pairing
    }

    /// Where the services' sockets are: the directory itself for processes, its `run/` in process.
    public var runtimeDirectory: String {
        (self.pairingSocket as NSString).deletingLastPathComponent
    }

    /// The socket of `service` beside the store and pairing (push's, the aggregator's).
    public func socketPath(for service: String) -> String {
        self.runtimeDirectory + "/\(service).sock"
    }

    /// The pairing service as the server's administrator (no credential) or as a device.
    public func pairingClient(token: String? = nil) -> RPCClient {
        self.track(RPCClient(configuration: ClientConfiguration(
            socketPath: self.pairingSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10), auth: token.map(Auth.init(token:)))))
    }

    public func storeClient(token: String? = nil) -> RPCClient {
        self.track(RPCClient(configuration: ClientConfiguration(
            socketPath: self.storeSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10), auth: token.map(Auth.init(token:)))))
    }

    /// Stops the pairing service (SIGTERM) and starts it again; the store keeps running.
    public func restartPairing() async throws {
        await self.pairing.stop()
        self.restartedPairing = try await ServiceProcess.start("screentime-pairingd", service: "pairing", in: self.directory, stateDirectory: self.state,
                                                               arguments: self.pairingArguments)
    }

    public func stopNow() {
        self.pairing.stopNow()
        self.store.stopNow()
    }

    private func track(_ client: RPCClient) -> RPCClient {
        self.clients.withLock { $0.append(client) }
        return client
    }

    private func closeClients() async {
        for client in self.clients.withLock({ $0 }) { await client.close() }
    }
}

/// A family bootstrapped through the pairing service, with its first (admin) parent enrolled.
public struct Bootstrapped: Sendable {
    public let family: String
    public let admin: RPCClient
    public let parent: RPCClient
    public let parentCredential: DeviceCredential

    public static func make(_ harness: PairingHarness, family: String = "smith", parentDevice: String = "mum-phone") async throws -> Bootstrapped {
        let admin = harness.pairingClient()
        let code = try await admin.call(PairingMethods.createFamily, NewFamilyParams(family: family, displayName: "The Smiths", timeZone: "Europe/Paris"))
        let credential = try await admin.call(PairingMethods.enrollParent, EnrollParentParams(
            family: family, code: code.code, deviceId: parentDevice, deviceName: "Mum's phone", displayName: "Mum"))
        return Bootstrapped(family: family, admin: admin, parent: harness.pairingClient(token: credential.token), parentCredential: credential)
    }

    /// Invites, accepts as `device` and (unless told not to) confirms: a paired child device.
    public func pairChild(_ harness: PairingHarness, child: String = "emma", device: String = "emma-ipad", confirm: Bool = true) async throws -> PairedChild {
        let invitation = try await self.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: child, childName: child.prefix(1).uppercased() + child.dropFirst()))
        let accepted = try await self.admin.call(PairingMethods.acceptInvitation, AcceptInvitationParams(
            family: self.family, invitationId: invitation.invitationId, secret: invitation.secret, deviceId: device, deviceName: "\(child)'s device"))
        if confirm { _ = try await self.parent.call(PairingMethods.confirm, InvitationParams(invitationId: invitation.invitationId)) }
        return PairedChild(invitation: invitation, accepted: accepted, store: harness.storeClient(token: accepted.credential.token))
    }
}

public struct PairedChild: Sendable {
    public let invitation: Invitation
    public let accepted: AcceptedInvitation
    /// The child device's own connection to the store.
    public let store: RPCClient

    public var zone: String { self.accepted.zone }
    public var deviceId: String { self.accepted.credential.deviceId }
    public var token: String { self.accepted.credential.token }

    public init(invitation: Invitation, accepted: AcceptedInvitation, store: RPCClient) {
        self.invitation = invitation
        self.accepted = accepted
        self.store = store
    }

    /// Saves one usage session as this device.
    @discardableResult
    public func saveUsage(_ name: String, family: String, seconds: Int64 = 600) async throws -> ModifyResult {
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        return try await self.store.call(StoreMethods.modify, ModifyParams(family: family, zone: self.zone, saves: [
            RecordSave(recordType: "UsageRecord", recordName: name, fields: [
                "logicalID": "org.khan", "deviceID": .string(self.deviceId), "category": "learning",
                "sessionStart": .date(start), "sessionEnd": .date(start.addingTimeInterval(Double(seconds))), "totalSeconds": .int(seconds),
            ]),
        ], atomic: true))
    }
}
