import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StoreAPI
import Testing
import StackSupport
import TestSupport

@Suite("The pairing service as a process: activation, restarts, bad input")
struct ServiceTests {
    @Test("started by systemd-socket-activate, it pairs a child like one started by hand")
    func socketActivated() async throws {
        let harness = try await PairingHarness.start(activated: true)
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let child = try await family.pairChild(harness)
        #expect(try await child.saveUsage("u1", family: "smith").allSucceeded)
        let described = try await harness.pairingClient().call("rpc.describe")
        let names = Set(described["methods"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        #expect(names.isSuperset(of: ["pairing.createFamily", "pairing.enrollParent", "pairing.createInvitation", "pairing.acceptInvitation",
                                      "pairing.confirm", "pairing.reject", "pairing.revokeDevice", "pairing.removeChild",
                                      "pairing.rotateCredential", "pairing.listDevices"]))
    }

    @Test("restarted between invite and accept, the service still honours the invitation")
    func restartBetweenInviteAndAccept() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
        try await harness.restartPairing()
        let accepted = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
            family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
        #expect(accepted.shortCode == ShortCode(secret: invitation.secret, invitationId: invitation.invitationId, parentDeviceId: "mum-phone", childDeviceId: "emma-ipad"))
        let parent = harness.pairingClient(token: family.parentCredential.token)
        #expect(try await parent.call(PairingMethods.confirm, InvitationParams(invitationId: invitation.invitationId)).status == .confirmed)
    }

    struct BadCall: Sendable, CustomTestStringConvertible {
        enum Caller: Sendable { case local, parent, child, stranger }
        var caller: Caller
        var method: String
        var params: JSONValue
        var code: ErrorCode
        var mentions: String
        var testDescription: String { "\(self.method) \(self.mentions) → \(self.code)" }
    }

    static let badCalls: [BadCall] = [
        BadCall(caller: .parent, method: "pairing.createFamily", params: ["family": "other"], code: .forbidden, mentions: "administrator"),
        BadCall(caller: .local, method: "pairing.createFamily", params: ["family": "bad family!"], code: .invalidParams, mentions: "params.family"),
        BadCall(caller: .local, method: "pairing.createFamily", params: ["family": "ok", "timeZone": "Mars/Olympus"], code: .invalidParams, mentions: "timeZone"),
        BadCall(caller: .local, method: "pairing.createFamily", params: ["family": "smith"], code: .conflict, mentions: "smith"),
        BadCall(caller: .local, method: "pairing.createFamily", params: [:], code: .invalidParams, mentions: "params.family"),
        BadCall(caller: .local, method: "pairing.createInvitation", params: ["childId": "emma"], code: .unauthorized, mentions: "auth.token"),
        BadCall(caller: .stranger, method: "pairing.createInvitation", params: ["childId": "emma"], code: .unauthorized, mentions: "token"),
        BadCall(caller: .child, method: "pairing.createInvitation", params: ["childId": "emma"], code: .forbidden, mentions: "parent"),
        BadCall(caller: .parent, method: "pairing.createInvitation", params: ["childId": "emma", "expiresInSeconds": 0], code: .invalidParams, mentions: "expiresInSeconds"),
        BadCall(caller: .parent, method: "pairing.createInvitation", params: ["childId": ""], code: .invalidParams, mentions: "params.childId"),
        BadCall(caller: .parent, method: "pairing.createInvitation", params: ["childId": 7], code: .invalidParams, mentions: "childId"),
        BadCall(caller: .local, method: "pairing.acceptInvitation", params: ["family": "smith", "invitationId": "x", "secret": "y", "deviceId": "a b", "deviceName": "X"],
                code: .invalidParams, mentions: "params.deviceId"),
        BadCall(caller: .local, method: "pairing.acceptInvitation", params: ["family": "smith", "invitationId": "x", "secret": "y", "deviceId": "ab", "deviceName": ""],
                code: .invalidParams, mentions: "params.deviceName"),
        BadCall(caller: .local, method: "pairing.enrollParent", params: ["family": "smith", "code": "no-dot", "deviceId": "p2", "deviceName": "P"],
                code: .invitationInvalid, mentions: "cannot be used"),
        BadCall(caller: .parent, method: "pairing.revokeDevice", params: ["deviceId": "mum-phone"], code: .invalidParams, mentions: "itself"),
        BadCall(caller: .parent, method: "pairing.revokeDevice", params: ["deviceId": "nobody"], code: .notFound, mentions: "nobody"),
        BadCall(caller: .parent, method: "pairing.confirm", params: ["invitationId": "0123456789abcdef"], code: .notFound, mentions: "0123456789abcdef"),
        BadCall(caller: .child, method: "pairing.listDevices", params: [:], code: .forbidden, mentions: "parent"),
        BadCall(caller: .child, method: "pairing.removeChild", params: ["childId": "emma"], code: .forbidden, mentions: "parent"),
        BadCall(caller: .parent, method: "pairing.inviteParent", params: ["role": "child"], code: .invalidParams, mentions: "role"),
        BadCall(caller: .parent, method: "pairing.inviteParent", params: ["role": "king"], code: .invalidParams, mentions: "role"),
    ]

    @Test("bad input gets a clear error and the service stays up", arguments: badCalls)
    func badInput(_ bad: BadCall) async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let child = try await family.pairChild(harness)
        let client: RPCClient = switch bad.caller {
        case .local: harness.pairingClient()
        case .parent: family.parent
        case .child: harness.pairingClient(token: child.accepted.credential.token)
        case .stranger: harness.pairingClient(token: "made-up-token")
        }
        let error = await expectError(bad.code) { _ = try await client.call(bad.method, params: bad.params) }
        #expect(error.map { "\($0.message) \($0.data.map { "\($0)" } ?? "")".contains(bad.mentions) } == true, "\(String(describing: error))")
        _ = try await client.call("rpc.ping")
        #expect(harness.pairing.isRunning)
    }

    @Test("the store being down gets unavailable, not a pairing error; the service carries on when it is back")
    func storeDown() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
        await harness.store.stop()
        await expectError(.unavailable) {
            _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                family: "smith", invitationId: invitation.invitationId, secret: invitation.secret, deviceId: "emma-ipad", deviceName: "iPad"))
        }
        #expect(harness.pairing.isRunning)
    }
}
