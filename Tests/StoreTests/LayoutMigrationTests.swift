import Foundation
import GRDB
import RPCClient
import RPCCore
import ServiceHarness
import StoreAPI
import Testing
import TestSupport

/// What a save writes shrank between layouts (docs/architecture.md, "What a save writes"):
/// a database an earlier version wrote must come out of its migration with every number,
/// token and record as it was.
@Suite("The store's earlier layout migrated on start, and the change log's numbers never given twice")
struct LayoutMigrationTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/store-0.9").path

    @Test("0.9's database (made by Tests/Fixtures/store-0.9/make.py): the log goes on from its counter, the zone's and the family's tokens still hold, the indexes a save no longer needs are gone, index rows included, and what is left answers queries")
    func earlierLayout() async throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.fixture + "/store.sqlite", toPath: state + "/store.sqlite")
        let tokens = try JSONDecoder().decode([String: String].self, from: Data(contentsOf: URL(fileURLWithPath: Self.fixture + "/tokens.json")))
        let store = try await ServiceProcess.start("screentime-stored", service: "store", in: directory, stateDirectory: state)
        defer { store.stopNow() }
        let client = RPCClient(configuration: ClientConfiguration(socketPath: store.socketPath))
        let zone = "ChildMonitoring-emma"

        // Nothing changed since the tokens: the zone has nothing new, the family no zone.
        let quiet = try await client.call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone, since: tokens["zone"]))
        #expect(quiet.records.isEmpty && quiet.deletions.isEmpty)
        let quietFamily = try await client.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: "smith", since: tokens["database"]))
        #expect(quietFamily.changedZones.isEmpty && quietFamily.deletedZones.isEmpty, "\(quietFamily)")
        let kept = try await client.call(StoreMethods.fetch, FetchParams(family: "smith", zone: zone, recordNames: ["u0", "u1"]))
        #expect(kept.records.map(\.recordName) == ["u0", "u1"])

        // A save is numbered after the counter 0.9 left (1,000,000), not after its newest entry.
        let saved = try await client.call(StoreMethods.modify, ModifyParams(family: "smith", zone: zone, saves: [
            RecordSave(recordType: "UsageRecord", recordName: "u3", fields: [
                "logicalID": "org.khan", "deviceID": "emma-ipad", "category": "learning", "totalSeconds": 600,
                "sessionStart": "2026-10-04T16:00:00Z", "sessionEnd": "2026-10-04T16:10:00Z",
            ]),
        ]))
        let tag = try #require(saved.saved.first?.record?.changeTag)
        #expect(Int64(tag, radix: 36) == 1_000_001, "change tag \(tag)")
        let changed = try await client.call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone, since: tokens["zone"]))
        #expect(changed.records.map(\.recordName) == ["u3"] && changed.deletions.isEmpty)
        let changedFamily = try await client.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: "smith", since: tokens["database"]))
        #expect(changedFamily.changedZones == [zone], "the zone's newest record makes it changed: \(changedFamily)")
        var watched: [ChangeEvent] = []
        for try await event in client.stream(StoreMethods.watch, WatchParams(after: 4, follow: false)) {
            if case .item(let change) = event { watched.append(change) }
        }
        #expect(watched.map(\.seq) == [5, 6, 1_000_001], "the log as it was, then on from the counter")
        let sessions = try await client.call(StoreMethods.query, QueryParams(
            family: "smith", zone: zone, recordType: "UsageRecord",
            filters: [QueryFilter("deviceID", .equal, "emma-ipad"), QueryFilter("sessionStart", .greaterOrEqual, "2026-10-02T00:00:00Z")],
            sort: QuerySort("sessionStart", descending: true)))
        #expect(sessions.records.map(\.recordName) == ["u3", "u1"], "the index 0.9 wrote answers queries")
        let all = try await client.call(StoreMethods.query, QueryParams(family: "smith", zone: zone, recordType: "UsageRecord"))
        #expect(all.records.map(\.recordName) == ["u0", "u1", "u3"], "every usage record, in the order they were made")
        await client.close()
        await store.stop()

        let (layout, usageIndexes, indexKeys, byType) = try await DatabaseQueue(path: state + "/store.sqlite").read { db in
            (try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name"),
             try String.fetchAll(db, sql: "SELECT DISTINCT k.field FROM field_index f JOIN field_keys k ON k.key = f.key WHERE k.type = 'UsageRecord' ORDER BY k.field"),
             try Row.fetchAll(db, sql: "PRAGMA foreign_key_list(field_index)").count,
             try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'records_by_type'"))
        }
        #expect(byType?.hasSuffix("WHERE type NOT IN ('UsageRecord')") == true, "usage records are not in the index by type: \(byType ?? "no index")")
        #expect(indexKeys == 0, "the field index has no foreign key to search at each record's deletion")
        for gone in ["changes_by_time", "zones_by_change", "field_index_by_record"] {
            #expect(!layout.contains(gone), "\(gone) is gone: \(layout)")
        }
        #expect(usageIndexes == ["sessionStart"], "a usage record keeps sessionStart's entries only: its other fields are no longer indexed or are read from the records")
    }

    @Test("after a purge of the whole log and a restart, the next change is numbered after every change before it")
    func numbersAfterWholeLogPurged() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let base = Date(timeIntervalSince1970: 1_790_000_000)
        try await family.child1.save((0..<3).map { Make.usage("u\($0)", start: base, seconds: 5) }, zone: FamilyFixture.zone1)
        let before = try await ChangeFeedTests.watchAll(family.admin, WatchParams(follow: false))
        let purged = try await family.admin.call(StoreMethods.purge, PurgeParams(olderThanSeconds: 0))
        #expect(purged.watchHorizon == before.end.lastSeq, "the whole log went: \(purged)")

        try await store.restart()
        let writer = store.client(token: FamilyFixture.child1Token)
        try await writer.save([Make.usage("u3", start: base, seconds: 5)], zone: FamilyFixture.zone1)
        let after = try await ChangeFeedTests.watchAll(store.client(), WatchParams(after: purged.watchHorizon, follow: false))
        #expect(after.events.map(\.recordName) == ["u3"])
        #expect(after.events.first!.seq > before.end.lastSeq, "\(after.events.first!.seq) after \(before.end.lastSeq)")
    }
}
