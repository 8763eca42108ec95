import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Who may do what: parents, children, shares, pending and revoked credentials")
struct AccessTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    @Test("a child reads and writes its own zone and cannot read another child's")
    func childZones() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.child2.save([Make.usage("secret", device: "c2", start: Self.start, seconds: 60)], zone: FamilyFixture.zone2)
            #expect(try await family.child1.save([Make.usage("mine", start: Self.start, seconds: 60)], zone: FamilyFixture.zone1).allSucceeded)
            #expect(try await family.child1.fetch(["mine"], zone: FamilyFixture.zone1).records.count == 1)

            await expectError(.forbidden) { _ = try await family.child1.fetch(["secret"], zone: FamilyFixture.zone2) }
            await expectError(.forbidden) {
                _ = try await family.child1.call(StoreMethods.query, QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone2, recordType: "UsageRecord"))
            }
            await expectError(.forbidden) {
                _ = try await family.child1.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: FamilyFixture.zone2))
            }
            await expectError(.forbidden) { try await family.child1.save([Make.usage("x", device: "c1", start: Self.start, seconds: 1)], zone: FamilyFixture.zone2) }
            await expectError(.forbidden) { _ = try await family.child1.fetch([FamilyFixture.family], zone: "default") }
            let zones = try await family.child1.call(StoreMethods.listZones, FamilyParams(family: FamilyFixture.family))
            #expect(zones.zones.map(\.name) == [FamilyFixture.zone1])
            // Parents see everything of the family.
            #expect(try await family.parent.fetch(["secret", "mine"], zone: FamilyFixture.zone2).records.map(\.recordName) == ["secret"])
            #expect(try await family.parent.call(StoreMethods.listZones, FamilyParams(family: FamilyFixture.family)).zones.count == 3)
        }
    }

    @Test("a child writes only the record types and fields the schema allows it, as itself")
    func childRecordRules() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let zone = FamilyFixture.zone1
            // Rules and the ledger are the parents'.
            #expect(try await family.child1.save([Make.appRule("org.khan")], zone: zone).saved[0].error?.code == .forbidden)
            let adjustment = RecordSave(recordType: "PointsLedgerEntry", recordName: "l1", fields: [
                "familyRef": .reference(FamilyFixture.family, zone: "default"), "childRef": .reference("child-1", zone: "default"),
                "type": "adjustment", "amount": 1000, "timestamp": .date(Self.start)])
            #expect(try await family.child1.save([adjustment], zone: zone).saved[0].error?.code == .forbidden)
            // Usage must be the child's own.
            let spoofed = try await family.child1.save([Make.usage("u", device: "c2", start: Self.start, seconds: 5)], zone: zone).saved[0]
            #expect(spoofed.error?.code == .forbidden && spoofed.error?.field == "deviceID")

            // Commands: the parent creates; the child may only report status.
            try await family.parent.save([RecordSave(recordType: "ConfigurationCommand", recordName: "cmd-1", fields: [
                "targetDeviceID": "c1", "commandType": "updateApp", "status": "pending", "payloadJSON": "{}"])], zone: zone)
            let command = try #require(try await family.child1.fetch(["cmd-1"], zone: zone).records.first)
            var executed = RecordSave(recordType: command.recordType, recordName: command.recordName, fields: command.fields, changeTag: command.changeTag)
            executed.fields["status"] = "executed"
            executed.fields["executedAt"] = .date(Self.start)
            var tampered = executed
            tampered.fields["payloadJSON"] = "{\"pointsPerMinute\":100}"
            let refused = try await family.child1.save([tampered], zone: zone).saved[0]
            #expect(refused.error?.code == .forbidden && refused.error?.field == "payloadJSON")
            #expect(try await family.child1.save([executed], zone: zone).allSucceeded)
            let created = try await family.child1.save([RecordSave(recordType: "ConfigurationCommand", recordName: "cmd-2", fields: [
                "targetDeviceID": "c1", "commandType": "x", "status": "pending"])], zone: zone).saved[0]
            #expect(created.error?.code == .forbidden)
        }
    }

    @Test("a zone is shared only with the family's own devices: a device of another family, or an unknown one, is refused and nothing changes")
    func shareOnlyWithinTheFamily() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            _ = try await family.admin.call(StoreMethods.createFamily, CreateFamilyParams(family: "fam-jones"))
            _ = try await family.admin.call(StoreMethods.putCredential, PutCredentialParams(
                family: "fam-jones", deviceId: "j1", role: .child, tokenSHA256: FamilyFixture.sha256("jones-child-token-0123")))
            let error = await expectError(.invalidParams) {
                _ = try await family.parent.call(StoreMethods.share, ShareParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, participants: [
                    ShareParticipant(deviceId: "c2", permission: .readOnly), ShareParticipant(deviceId: "j1", permission: .readWrite)]))
            }
            #expect(error?.data?["parameter"] == "params.participants[1].deviceId", "\(String(describing: error))")
            #expect(error?.message.contains("j1") == true && error?.message.contains(FamilyFixture.family) == true, "\(String(describing: error))")
            // Local callers too, and a device no family has.
            await expectError(.invalidParams) {
                _ = try await family.admin.call(StoreMethods.share, ShareParams(family: FamilyFixture.family, zone: FamilyFixture.zone1,
                    participants: [ShareParticipant(deviceId: "nobody", permission: .readOnly)]))
            }
            // Nothing was applied: the zone is still shared with c1 alone.
            let info = try await family.parent.call(StoreMethods.shareInfo, ZoneParams(family: FamilyFixture.family, zone: FamilyFixture.zone1))
            #expect(info.participants.map(\.deviceId) == ["c1"])
            // The family's own devices still can be.
            let shared = try await family.parent.call(StoreMethods.share, ShareParams(family: FamilyFixture.family, zone: FamilyFixture.zone1,
                participants: [ShareParticipant(deviceId: "c2", permission: .readOnly)]))
            #expect(Set(shared.participants.map(\.deviceId)) == ["c1", "c2"])
        }
    }

    @Test("a read-only share lets the child read but not write")
    func readOnlyShare() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            _ = try await family.parent.call(StoreMethods.share, ShareParams(family: FamilyFixture.family, zone: FamilyFixture.zone1,
                participants: [ShareParticipant(deviceId: "c1", permission: .readOnly)]))
            #expect(try await family.child1.fetch(["x"], zone: FamilyFixture.zone1).missing == ["x"])
            let error = await expectError(.forbidden) { try await family.child1.save([Make.usage("u", start: Self.start, seconds: 5)], zone: FamilyFixture.zone1) }
            #expect(error?.message.contains("read-only") == true)
            let info = try await family.parent.call(StoreMethods.shareInfo, ZoneParams(family: FamilyFixture.family, zone: FamilyFixture.zone1))
            #expect(info.participants.map(\.permission) == [.readOnly])
        }
    }

    @Test("until a parent confirms, a paired child may read but every write gets pairing_unconfirmed")
    func pendingChild() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store, child1Status: .pending)
            #expect(try await family.child1.fetch(["x"], zone: FamilyFixture.zone1).missing == ["x"])
            let error = await expectError(.pairingUnconfirmed) {
                try await family.child1.save([Make.usage("u", start: Self.start, seconds: 5)], zone: FamilyFixture.zone1)
            }
            #expect(error?.message.contains("confirm") == true)
            _ = try await family.admin.call(StoreMethods.updateCredential, UpdateCredentialParams(family: FamilyFixture.family, deviceId: "c1", status: .active))
            #expect(try await family.child1.save([Make.usage("u", start: Self.start, seconds: 5)], zone: FamilyFixture.zone1).allSucceeded)
        }
    }

    @Test("revocation takes effect on the very next request: unsharing, then revoking the credential")
    func revocation() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.child1.save([Make.usage("u1", start: Self.start, seconds: 5)], zone: FamilyFixture.zone1)
            _ = try await family.parent.call(StoreMethods.unshare, UnshareParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, deviceIds: ["c1"]))
            await expectError(.forbidden) { _ = try await family.child1.fetch(["u1"], zone: FamilyFixture.zone1) }

            _ = try await family.admin.call(StoreMethods.updateCredential, UpdateCredentialParams(family: FamilyFixture.family, deviceId: "c1", status: .revoked))
            let error = await expectError(.deviceRevoked) { _ = try await family.child1.call(StoreMethods.whoami, Empty()) }
            #expect(error?.message.contains("removed from the family") == true && error?.data?["deviceId"] == "c1")
            let credentials = try await family.admin.call(StoreMethods.listCredentials, ListCredentialsParams(family: FamilyFixture.family))
            #expect(credentials.credentials.first { $0.deviceId == "c1" }?.status == .revoked)
            #expect(credentials.credentials.count > 1)
            let one = try await family.admin.call(StoreMethods.listCredentials, ListCredentialsParams(family: FamilyFixture.family, deviceId: "c1"))
            #expect(one.credentials.map(\.deviceId) == ["c1"] && one.credentials.first?.status == .revoked)
            let none = try await family.admin.call(StoreMethods.listCredentials, ListCredentialsParams(family: FamilyFixture.family, deviceId: "nobody"))
            #expect(none.credentials.isEmpty)
            // A conditional change from a status the credential no longer has is refused.
            let stale = await expectError(.conflict) {
                _ = try await family.admin.call(StoreMethods.updateCredential, UpdateCredentialParams(
                    family: FamilyFixture.family, deviceId: "c1", status: .active, ifStatus: .pending))
            }
            #expect(stale?.message == "device c1's credential is revoked, not pending")
            await expectError(.deviceRevoked) { _ = try await family.child1.call(StoreMethods.whoami, Empty()) }
        }
    }

    @Test("unknown tokens, other families, internal zones and local-only methods are refused")
    func refusals() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let stranger = store.client(token: "made-up-token")
            await expectError(.unauthorized) { _ = try await stranger.fetch(["x"]) }

            // A parent of another family.
            _ = try await family.admin.call(StoreMethods.createFamily, CreateFamilyParams(family: "fam-jones"))
            _ = try await family.admin.call(StoreMethods.putCredential, PutCredentialParams(family: "fam-jones", deviceId: "jp", role: .admin,
                tokenSHA256: FamilyFixture.sha256("jones-parent")))
            let jones = store.client(token: "jones-parent")
            await expectError(.forbidden) { _ = try await jones.fetch(["x"]) }
            await expectError(.forbidden) { _ = try await jones.call(StoreMethods.listZones, FamilyParams(family: FamilyFixture.family)) }
            await expectError(.forbidden) {
                _ = try await jones.call(StoreMethods.query, QueryParams(family: FamilyFixture.family, recordType: "UsageRecord"))
            }

            // The services' internal zones are hidden from devices, parents included.
            _ = try await family.admin.call(StoreMethods.createZone, ZoneParams(family: FamilyFixture.family, zone: "_pairing"))
            await expectError(.forbidden) { _ = try await family.parent.fetch(["x"], zone: "_pairing") }
            await expectError(.invalidParams) { _ = try await family.parent.call(StoreMethods.createZone, ZoneParams(family: FamilyFixture.family, zone: "_mine")) }
            #expect(try await family.parent.call(StoreMethods.listZones, FamilyParams(family: FamilyFixture.family)).zones.map(\.name).contains("_pairing") == false)

            // Local-only methods.
            await expectError(.forbidden) { _ = try await family.parent.call(StoreMethods.createFamily, CreateFamilyParams(family: "mine")) }
            await expectError(.forbidden) {
                _ = try await family.parent.call(StoreMethods.putCredential, PutCredentialParams(family: FamilyFixture.family, deviceId: "evil", role: .admin,
                    tokenSHA256: FamilyFixture.sha256("evil")))
            }
            await expectError(.forbidden) { _ = try await family.parent.call(StoreMethods.backup, BackupParams()) }
            await expectError(.forbidden) { _ = try await family.parent.call(StoreMethods.purge, PurgeParams()) }
            await expectError(.forbidden) { _ = try await family.parent.call(StoreMethods.stats, Empty()) }
            // Children do not manage zones or shares.
            await expectError(.forbidden) { _ = try await family.child1.call(StoreMethods.createZone, ZoneParams(family: FamilyFixture.family, zone: "games")) }
            await expectError(.forbidden) {
                _ = try await family.child1.call(StoreMethods.share, ShareParams(family: FamilyFixture.family, zone: FamilyFixture.zone1,
                    participants: [ShareParticipant(deviceId: "friend", permission: .readWrite)]))
            }
            let me = try await family.child1.call(StoreMethods.whoami, Empty())
            #expect(me.deviceId == "c1" && me.role == .child && me.status == .active)
            #expect(try await family.admin.call(StoreMethods.whoami, Empty()).principal == "local")
        }
    }
}
