import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Pairing flows: bootstrap, invite, accept, verify, revoke")
struct FlowTests {
    @Test("bootstrap → invite → accept → verify → the child writes usage → revoke → the child is refused")
    func wholePath() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            #expect(family.parentCredential.role == .admin && family.parentCredential.status == .active)

            let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma", childName: "Emma"))
            #expect(invitation.zone.hasPrefix("ChildMonitoring-") && invitation.parentDeviceId == "mum-phone")
            let uri = try #require(PairingURI(invitation.uri))
            #expect(uri == PairingURI(server: "home.example", family: "smith", invitationId: invitation.invitationId, secret: invitation.secret))
            #expect(invitation.expiresAt.timeIntervalSinceNow > 500 && invitation.expiresAt.timeIntervalSinceNow <= 600)

            // The child scans the QR code and accepts.
            let accepted = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                family: uri.family, invitationId: uri.invitationId, secret: uri.secret, deviceId: "emma-ipad", deviceName: "Emma's iPad"))
            #expect(accepted.credential.status == .pending && accepted.credential.role == .child && accepted.zone == invitation.zone)
            let child = PairedChild(invitation: invitation, accepted: accepted, store: harness.storeClient(token: accepted.credential.token))

            // Until the parent confirms, the child may read but not write.
            await expectError(.pairingUnconfirmed) { _ = try await child.saveUsage("u1", family: "smith") }
            _ = try await child.store.call(StoreMethods.fetch, FetchParams(family: "smith", zone: child.zone, recordNames: ["session"]))

            // The parent derives the same code from the secret and the device that accepted.
            let status = try await family.parent.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitation.invitationId))
            #expect(status.status == .accepted && status.deviceId == "emma-ipad" && status.deviceName == "Emma's iPad")
            let parentsCode = ShortCode(secret: invitation.secret, invitationId: invitation.invitationId, parentDeviceId: "mum-phone",
                                        childDeviceId: try #require(status.deviceId))
            #expect(parentsCode == accepted.shortCode)
            #expect(try await family.parent.call(PairingMethods.confirm, InvitationParams(invitationId: invitation.invitationId)).status == .confirmed)

            #expect(try await child.saveUsage("u1", family: "smith").allSucceeded)
            let parentStore = harness.storeClient(token: family.parentCredential.token)
            let session = try #require(try await parentStore.call(StoreMethods.fetch, FetchParams(family: "smith", zone: child.zone, recordNames: ["session", "device-emma-ipad", "u1"])).records.first { $0.recordName == "session" })
            #expect(session.fields["status"] == "active" && session.fields["deviceID"] == "emma-ipad")
            let context = try #require(try await parentStore.call(StoreMethods.fetch, FetchParams(family: "smith", zone: "default", recordNames: ["child-emma"])).records.first)
            #expect(context.fields["pairedDeviceIds"] == ["emma-ipad"])

            let devices = try await family.parent.call(PairingMethods.listDevices, Empty())
            let ipad = try #require(devices.devices.first { $0.deviceId == "emma-ipad" })
            #expect(ipad.status == .active && ipad.childId == "emma" && ipad.zone == child.zone && ipad.deviceName == "Emma's iPad" && ipad.lastSeenAt != nil)
            #expect(devices.devices.first { $0.deviceId == "mum-phone" }?.role == .admin)

            // Revocation: the very next request is refused; the data stays for the parent.
            let revoked = try await family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "emma-ipad"))
            #expect(revoked.status == .revoked)
            await expectError(.deviceRevoked) { _ = try await child.saveUsage("u2", family: "smith") }
            await expectError(.deviceRevoked) { _ = try await child.store.call(StoreMethods.fetch, FetchParams(family: "smith", zone: child.zone, recordNames: ["u1"])) }
            let kept = try await parentStore.call(StoreMethods.fetch, FetchParams(family: "smith", zone: child.zone, recordNames: ["u1", "device-emma-ipad"]))
            #expect(kept.records.count == 2 && kept.records.first { $0.recordName == "device-emma-ipad" }?.fields["isActive"] == false)
            #expect(try await parentStore.call(StoreMethods.shareInfo, ZoneParams(family: "smith", zone: child.zone)).participants.isEmpty)

            // Every step left an audit entry.
            let audit = try await parentStore.call(StoreMethods.query, QueryParams(family: "smith", zone: "default", recordType: "AuditEntry", limit: 100))
            let actions = Set(audit.records.compactMap { $0.fields["action"]?.stringValue })
            #expect(actions.isSuperset(of: ["family.create", "parent.enroll", "invitation.create", "invitation.accept", "device.confirm", "device.revoke"]))
        }
    }

    @Test("a co-parent enrolls with an admin's code; only admins hand out codes")
    func coParent() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams())
            #expect(code.role == .coParent)
            let dad = try await harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(
                family: "smith", code: code.code, deviceId: "dad-phone", deviceName: "Dad's phone"))
            #expect(dad.role == .coParent && dad.status == .active)
            let coParent = harness.pairingClient(token: dad.token)
            await expectError(.forbidden) { _ = try await coParent.call(PairingMethods.inviteParent, InviteParentParams()) }
            // A co-parent pairs children like any parent.
            _ = try await coParent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "tom"))
            // The code was single use.
            await expectError(.invitationInvalid) {
                _ = try await harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(
                    family: "smith", code: code.code, deviceId: "intruder", deviceName: "?"))
            }
        }
    }

    @Test("reject burns the invitation and revokes the device that accepted it")
    func reject() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness, confirm: false)
            let rejected = try await family.parent.call(PairingMethods.reject, InvitationParams(invitationId: child.invitation.invitationId))
            #expect(rejected.status == .rejected)
            await expectError(.deviceRevoked) { _ = try await child.saveUsage("u1", family: "smith") }
            await expectError(.conflict) { _ = try await family.parent.call(PairingMethods.confirm, InvitationParams(invitationId: child.invitation.invitationId)) }
            // An open invitation can be burned before anyone uses it.
            let unused = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            _ = try await family.parent.call(PairingMethods.reject, InvitationParams(invitationId: unused.invitationId))
            await expectError(.invitationInvalid) {
                _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, AcceptInvitationParams(
                    family: "smith", invitationId: unused.invitationId, secret: unused.secret, deviceId: "emma-phone", deviceName: "Phone"))
            }
        }
    }

    @Test("a device rotates its credential: the new token works, the old one is refused")
    func rotation() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness)
            let rotated = try await harness.pairingClient(token: child.accepted.credential.token).call(PairingMethods.rotateCredential, Empty())
            #expect(rotated.token != child.accepted.credential.token && rotated.status == .active && rotated.deviceId == "emma-ipad")
            await expectError(.unauthorized) { _ = try await child.saveUsage("u1", family: "smith") }
            let renewed = PairedChild(invitation: child.invitation, accepted: child.accepted, store: harness.storeClient(token: rotated.token))
            #expect(try await renewed.saveUsage("u1", family: "smith").allSucceeded)
        }
    }

    @Test("two children, and one child with two devices; removing a child deletes its zones and revokes its devices")
    func childrenAndDevices() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let ipad = try await family.pairChild(harness, child: "emma", device: "emma-ipad")
            let phone = try await family.pairChild(harness, child: "emma", device: "emma-phone")
            let tom = try await family.pairChild(harness, child: "tom", device: "tom-ipad")
            #expect(Set([ipad.zone, phone.zone, tom.zone]).count == 3)
            // Each device writes its own zone, not a sibling's.
            #expect(try await phone.saveUsage("p1", family: "smith").allSucceeded)
            await expectError(.forbidden) {
                _ = try await tom.store.call(StoreMethods.fetch, FetchParams(family: "smith", zone: ipad.zone, recordNames: ["session"]))
            }
            let parentStore = harness.storeClient(token: family.parentCredential.token)
            let emma = try #require(try await parentStore.call(StoreMethods.fetch, FetchParams(family: "smith", zone: "default", recordNames: ["child-emma"])).records.first)
            #expect(Set(emma.fields["pairedDeviceIds"]?.arrayValue?.compactMap(\.stringValue) ?? []) == ["emma-ipad", "emma-phone"])

            let removed = try await family.parent.call(PairingMethods.removeChild, RemoveChildParams(childId: "emma"))
            #expect(Set(removed.zones) == [ipad.zone, phone.zone] && Set(removed.revokedDevices) == ["emma-ipad", "emma-phone"])
            await expectError(.deviceRevoked) { _ = try await phone.saveUsage("p2", family: "smith") }
            let zones = try await parentStore.call(StoreMethods.listZones, FamilyParams(family: "smith")).zones.map(\.name)
            #expect(!zones.contains(ipad.zone) && zones.contains(tom.zone))
            #expect(try await tom.saveUsage("t1", family: "smith").allSucceeded)
            await expectError(.notFound) { _ = try await family.parent.call(PairingMethods.removeChild, RemoveChildParams(childId: "emma")) }
        }
    }

    @Test("a revoked device pairs again; a device already paired cannot accept another invitation")
    func repairing() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            _ = try await family.pairChild(harness)
            let second = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
            let accept = AcceptInvitationParams(family: "smith", invitationId: second.invitationId, secret: second.secret, deviceId: "emma-ipad", deviceName: "iPad")
            await expectError(.conflict) { _ = try await harness.pairingClient().call(PairingMethods.acceptInvitation, accept) }
            _ = try await family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "emma-ipad"))
            let again = try await harness.pairingClient().call(PairingMethods.acceptInvitation, accept)
            _ = try await family.parent.call(PairingMethods.confirm, InvitationParams(invitationId: second.invitationId))
            let child = PairedChild(invitation: second, accepted: again, store: harness.storeClient(token: again.credential.token))
            #expect(try await child.saveUsage("u1", family: "smith").allSucceeded)
        }
    }

    @Test("revoking a device that is still waiting for confirmation: a later confirm does not bring it back")
    func revokeBeforeConfirm() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness, confirm: false)
            _ = try await family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: child.deviceId))
            await expectError(.conflict) { _ = try await family.parent.call(PairingMethods.confirm, InvitationParams(invitationId: child.invitation.invitationId)) }
            await expectError(.deviceRevoked) { _ = try await child.saveUsage("u1", family: "smith") }
        }
    }
}
