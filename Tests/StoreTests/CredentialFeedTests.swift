import ChangeFeed
import Foundation
import Logging
import RPCClient
import RPCCore
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// Credentials in the store's change log, and `CredentialTable`, what push, the aggregator
/// and the gateway keep them in, against a real store.
@Suite("Credentials in the change feed: who a device is, known by the services that follow the store")
struct CredentialFeedTests {
    @Test("store.credentialSnapshot gives every credential with its token's hash at a position; credentialChanged follows from there, only to a watch that names it")
    func snapshotAndEvents() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let snapshot = try await family.admin.call(StoreMethods.credentialSnapshot, Empty())
        #expect(snapshot.credentials.map(\.deviceId).sorted() == ["c1", "c2", "p1"])
        #expect(snapshot.credentials.first { $0.deviceId == "c1" }?.tokenSHA256 == FamilyFixture.sha256(FamilyFixture.child1Token))
        #expect(snapshot.seq == (try await family.admin.call(StoreMethods.stats, Empty()).head))
        await expectError(.forbidden) { _ = try await family.parent.call(StoreMethods.credentialSnapshot, Empty()) }

        _ = try await family.admin.call(StoreMethods.updateCredential, UpdateCredentialParams(family: FamilyFixture.family, deviceId: "c2", status: .revoked))
        _ = try await family.admin.call(StoreMethods.putCredential, PutCredentialParams(
            family: FamilyFixture.family, deviceId: "c1", role: .child, tokenSHA256: FamilyFixture.sha256("c1-new-token-0123456789")))
        let credentials = try await ChangeFeedTests.watchAll(family.admin, WatchParams(after: snapshot.seq, kinds: [.credentialChanged], follow: false))
        #expect(credentials.events.map(\.kind) == [.credentialChanged, .credentialChanged])
        #expect(credentials.events.map(\.recordName) == ["c2", "c1"])
        #expect(credentials.events.allSatisfy { $0.zone.isEmpty && $0.changeTag == nil && $0.family == FamilyFixture.family })
        #expect(credentials.events[0].credential?.status == .revoked)
        #expect(credentials.events[1].credential?.tokenSHA256 == FamilyFixture.sha256("c1-new-token-0123456789"))

        // Watchers that do not ask for them never see them: the log as before.
        let everything = try await ChangeFeedTests.watchAll(family.admin, WatchParams(after: 0, follow: false))
        #expect(!everything.events.isEmpty && everything.events.allSatisfy { $0.kind != .credentialChanged })
        let zonesOnly = try await ChangeFeedTests.watchAll(family.admin, WatchParams(after: 0, kinds: [.zoneCreated], follow: false))
        #expect(zonesOnly.events.map(\.kind) == [.zoneCreated, .zoneCreated, .zoneCreated])
        await expectError(.invalidParams, containing: "params.kinds") {
            _ = try await ChangeFeedTests.watchAll(family.admin, WatchParams(kinds: [], follow: false))
        }
        // A kind the store does not know: refused, naming the parameter; the store serves on.
        await expectError(.invalidParams, containing: "kinds") {
            for try await _ in family.admin.stream(StoreMethods.watch.name, params: ["kinds": ["nope"], "follow": false]) {}
        }
        #expect(try await family.admin.call(StoreMethods.credentialSnapshot, Empty()).credentials.count == 3)
        // Nor do a zone's change tokens move for them.
        let zone = try await family.admin.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family))
        _ = try await family.admin.call(StoreMethods.updateCredential, UpdateCredentialParams(family: FamilyFixture.family, deviceId: "c2", status: .active))
        let again = try await family.admin.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family, since: zone.token))
        #expect(again.changedZones.isEmpty)
    }

    @Test("the table follows a new device, a new token and a revocation; after the store restarts it starts again from a snapshot and tells what changed")
    func tableFollows() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let told = Mutex<[CredentialEntry]>([])
        let table = CredentialTable(store: store.client(), logger: Logger(label: "test"))
        table.observe { changed in told.withLock { $0 += changed } }
        let following = Task { try await table.run() }
        defer { following.cancel() }
        // The table's first snapshot comes from a store just started, often in the first
        // seconds of a full run when every suite starts its services at once.
        try await waitUntil("the table following the store", timeout: .seconds(30)) { table.isFollowing }
        // The first snapshot is all news.
        try await waitUntil("the first snapshot told") { told.withLock { $0.count } == 3 }
        #expect(told.withLock { Set($0.map(\.deviceId)) } == ["c1", "c2", "p1"])
        told.withLock { $0 = [] }
        #expect(table.entry(token: FamilyFixture.child1Token)?.deviceId == "c1")
        #expect(table.entry(token: "nobody's token") == nil)
        #expect(table.family(FamilyFixture.family)?.keys.sorted() == ["c1", "c2", "p1"])
        let who = try await table.whoami(Auth(token: FamilyFixture.parentToken))
        #expect(who.deviceId == "p1" && who.role == .admin && who.family == FamilyFixture.family)

        // A new device.
        _ = try await family.admin.call(StoreMethods.putCredential, PutCredentialParams(
            family: FamilyFixture.family, deviceId: "c3", role: .child, tokenSHA256: FamilyFixture.sha256("c3-token-0123456789")))
        try await waitUntil("the new device known") { table.entry(token: "c3-token-0123456789")?.deviceId == "c3" }
        // A new token: the old one is nobody's.
        _ = try await family.admin.call(StoreMethods.putCredential, PutCredentialParams(
            family: FamilyFixture.family, deviceId: "c2", role: .child, tokenSHA256: FamilyFixture.sha256("c2-new-token-0123456789")))
        try await waitUntil("the new token known") { table.entry(token: "c2-new-token-0123456789")?.deviceId == "c2" }
        #expect(table.entry(token: FamilyFixture.child2Token) == nil)
        // A revocation.
        _ = try await family.admin.call(StoreMethods.updateCredential, UpdateCredentialParams(family: FamilyFixture.family, deviceId: "c1", status: .revoked))
        try await waitUntil("the revocation told") { told.withLock { $0.contains { $0.deviceId == "c1" && $0.status == .revoked } } }
        let refused = await expectError(.deviceRevoked) { _ = try await table.whoami(Auth(token: FamilyFixture.child1Token)) }
        #expect(refused?.data?["deviceId"] == "c1")
        #expect(told.withLock { $0.map(\.deviceId) } == ["c3", "c2", "c1"])

        // The store restarts; whatever happened meanwhile comes from the new snapshot or the feed.
        told.withLock { $0 = [] }
        try await store.restart()
        let admin = store.client()
        _ = try await admin.call(StoreMethods.updateCredential, UpdateCredentialParams(family: FamilyFixture.family, deviceId: "c3", status: .revoked))
        try await waitUntil("the revocation told after the restart", timeout: .seconds(30)) {
            told.withLock { $0.contains { $0.deviceId == "c3" && $0.status == .revoked } }
        }
        try await waitUntil("the table following again", timeout: .seconds(30)) { table.isFollowing }
        #expect(table.entry(token: "c3-token-0123456789")?.status == .revoked)
        #expect(table.entry(token: FamilyFixture.parentToken)?.status == .active)
        // Nothing told twice: a restart alone changes no credential.
        #expect(told.withLock { $0.map(\.deviceId) } == ["c3"])
    }

    @Test("while the table does not follow the store it knows nobody, and whoami asks the store")
    func notFollowingAsksTheStore() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        _ = try await FamilyFixture.setUp(store)
        let table = CredentialTable(store: store.client(), logger: Logger(label: "test"))
        #expect(!table.isFollowing)
        #expect(table.entry(token: FamilyFixture.parentToken) == nil)
        #expect(table.family(FamilyFixture.family) == nil)
        #expect(try await table.whoami(Auth(token: FamilyFixture.parentToken)).deviceId == "p1")
        await expectError(.unauthorized) { _ = try await table.whoami(Auth(token: "nobody's token")) }
    }
}
