import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StoreAPI
import Testing
import StackSupport
import TestSupport

/// Who may revoke a parent: only an admin, and never so that the family is left without
/// one.
@Suite("Parents' rights: only an admin revokes a parent; a family always keeps an admin")
struct ParentRightsTests {
    /// Enrolls another parent with an admin's code.
    static func enroll(_ harness: PairingHarness, _ family: Bootstrapped, device: String, role: DeviceRole) async throws -> RPCClient {
        let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: role))
        let credential = try await harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(
            family: family.family, code: code.code, deviceId: device, deviceName: device))
        return harness.pairingClient(token: credential.token)
    }

    static func status(_ client: RPCClient, _ device: String) async throws -> CredentialStatus? {
        try await client.call(PairingMethods.listDevices, Empty()).devices.first { $0.deviceId == device }?.status
    }

    @Test("a co-parent cannot revoke the admin, nor another parent; it still revokes children; the admin revokes the co-parent")
    func coParentCannotRevokeParents() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let dad = try await Self.enroll(harness, family, device: "dad-phone", role: .coParent)
            _ = try await Self.enroll(harness, family, device: "gran-phone", role: .coParent)
            let child = try await family.pairChild(harness)

            let error = await expectError(.forbidden) { _ = try await dad.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "mum-phone")) }
            #expect(error?.message.contains("admin") == true, "\(String(describing: error))")
            await expectError(.forbidden) { _ = try await dad.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "gran-phone")) }
            #expect(try await Self.status(family.parent, "mum-phone") == .active)
            #expect(try await Self.status(family.parent, "gran-phone") == .active)

            #expect(try await dad.call(PairingMethods.revokeDevice, DeviceParams(deviceId: child.deviceId)).status == .revoked)
            #expect(try await family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "dad-phone")).status == .revoked)
            await expectError(.deviceRevoked) { _ = try await dad.call(PairingMethods.listDevices, Empty()) }
        }
    }

    @Test("two admins revoking each other at once: one wins, and the family keeps an active admin")
    func adminsRevokingEachOther() async throws {
        try await PairingHarness.inProcess { harness in
            for round in 0..<3 {
                let family = try await Bootstrapped.make(harness, family: "f\(round)", parentDevice: "mum-\(round)")
                let gran = try await Self.enroll(harness, family, device: "gran-\(round)", role: .admin)
                async let first = try? family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "gran-\(round)"))
                async let second = try? gran.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "mum-\(round)"))
                let (mumWon, granWon) = await (first != nil, second != nil)
                #expect(mumWon != granWon, "round \(round): exactly one revocation wins")
                let survivor = mumWon ? family.parent : gran
                let devices = try await survivor.call(PairingMethods.listDevices, Empty()).devices
                #expect(devices.filter { $0.role == .admin && $0.status == .active }.count == 1, "round \(round): \(devices)")
            }
        }
    }

    @Test("removing a child revokes only child devices, even when its record names a parent's device")
    func removeChildSparesParents() async throws {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            _ = try await Self.enroll(harness, family, device: "dad-phone", role: .coParent)
            let child = try await family.pairChild(harness)
            // A parent may write the family's records: a ChildContext that names the admin's device.
            let store = harness.storeClient(token: family.parentCredential.token)
            _ = try await store.call(StoreMethods.modify, ModifyParams(family: "smith", zone: "default", saves: [
                RecordSave(recordType: "ChildContext", recordName: "child-emma", fields: ["pairedDeviceIds": ["mum-phone", "dad-phone"]]),
            ], savePolicy: .changedKeys, atomic: true))
            let removed = try await family.parent.call(PairingMethods.removeChild, RemoveChildParams(childId: "emma"))
            #expect(removed.revokedDevices == [child.deviceId], "\(removed)")
            #expect(try await Self.status(family.parent, "mum-phone") == .active)
            #expect(try await Self.status(family.parent, "dad-phone") == .active)
            #expect(try await Self.status(family.parent, child.deviceId) == .revoked)
        }
    }
}
