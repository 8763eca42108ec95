import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StoreAPI
import TestSupport

/// A real store and a real pairing service (and, for the push tests, a real push
/// service), side by side in one runtime directory, as systemd would run them.
public final class PairingHarness: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let state: String
    public let store: ServiceProcess
    public private(set) var pairing: ServiceProcess
    private let pairingArguments: [String]

    private init(directory: TemporaryDirectory, state: String, store: ServiceProcess, pairing: ServiceProcess, pairingArguments: [String]) {
        self.directory = directory
        self.state = state
        self.store = store
        self.pairing = pairing
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
        return PairingHarness(directory: directory, state: state, store: store, pairing: pairing, pairingArguments: arguments)
    }

    /// The pairing service as the server's administrator (no credential) or as a device.
    public func pairingClient(token: String? = nil) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(
            socketPath: self.pairing.socketPath, callTimeout: .seconds(30), connectTimeout: .seconds(10), auth: token.map(Auth.init(token:))))
    }

    public func storeClient(token: String? = nil) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(
            socketPath: self.store.socketPath, callTimeout: .seconds(30), connectTimeout: .seconds(10), auth: token.map(Auth.init(token:))))
    }

    /// Stops the pairing service (SIGTERM) and starts it again; the store keeps running.
    public func restartPairing() async throws {
        await self.pairing.stop()
        self.pairing = try await ServiceProcess.start("screentime-pairingd", service: "pairing", in: self.directory, stateDirectory: self.state,
                                                      arguments: self.pairingArguments)
    }

    public func stopNow() {
        self.pairing.stopNow()
        self.store.stopNow()
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
        let invitation = try await self.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: child, childName: "Emma"))
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
