import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Change feeds: zone changes, database changes, token expiry, store.watch")
struct ChangeFeedTests {
    static let base = Date(timeIntervalSince1970: 1_790_000_000)

    /// Follows a zone from `token` to the end; returns what it saw and the last token.
    static func drain(_ client: RPCClient, zone: String, since token: String?, limit: Int) async throws
        -> (records: [Record], deletions: [RecordID], token: String, calls: Int)
    {
        var records: [Record] = []
        var deletions: [RecordID] = []
        var params = ZoneChangesParams(family: FamilyFixture.family, zone: zone, since: token, limit: limit)
        var calls = 0
        while true {
            let page = try await client.call(StoreMethods.zoneChanges, params)
            calls += 1
            records += page.records
            deletions += page.deletions
            params.since = page.token
            if !page.moreComing { return (records, deletions, page.token, calls) }
        }
    }

    @Test("a save with the same content is no change: same change tag and modifiedAt, nothing in the zone's changes, with every save policy; one real change is reported once")
    func sameContentIsNoChange() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let first = try #require(try await family.parent.save([Make.appRule("org.khan")]).saved[0].record)
            let start = try await Self.drain(family.parent, zone: "default", since: nil, limit: 400).token

            let same = RecordSave(recordType: first.recordType, recordName: first.recordName, fields: first.fields, changeTag: first.changeTag)
            for policy in [SavePolicy.ifServerRecordUnchanged, .changedKeys, .allKeys] {
                let again = try #require(try await family.admin.save([same], policy: policy).saved[0].record, "\(policy)")
                #expect(again.changeTag == first.changeTag && again.modifiedAt == first.modifiedAt && again.modifiedBy == first.modifiedBy, "\(policy)")
            }
            let partial = RecordSave(recordType: first.recordType, recordName: first.recordName, fields: ["classification": first.fields["classification"]!])
            #expect(try await family.parent.save([partial], policy: .changedKeys).saved[0].record?.changeTag == first.changeTag)
            #expect(try await Self.drain(family.parent, zone: "default", since: start, limit: 400).records.isEmpty)

            var changed = same
            changed.fields["pointsPerMinute"] = 7
            let real = try #require(try await family.parent.save([changed]).saved[0].record)
            #expect(real.changeTag != first.changeTag)
            let since = try await Self.drain(family.parent, zone: "default", since: start, limit: 400)
            #expect(since.records.map(\.recordName) == [first.recordName] && since.records[0].fields["pointsPerMinute"] == 7)
        }
    }

    @Test("zone changes page through many batches, then report only what changed since the token, deletions included")
    func zoneChanges() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        for batch in 0..<10 {
            try await family.child1.save((0..<100).map { i in
                Make.usage("u\(batch * 100 + i)", start: Self.base.addingTimeInterval(Double(batch * 100 + i) * 60), seconds: 30)
            }, zone: FamilyFixture.zone1)
        }
        let everything = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: nil, limit: 150)
        #expect(everything.records.count == 1000 && everything.calls == 7 && everything.deletions.isEmpty)
        #expect(Set(everything.records.map(\.recordName)).count == 1000)

        // Nothing new: an empty page and the same position.
        let quiet = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: everything.token, limit: 150)
        #expect(quiet.records.isEmpty && quiet.deletions.isEmpty)

        // Update two, delete three, add one.
        var update = try await family.parent.fetch(["u1", "u2"], zone: FamilyFixture.zone1).records.map {
            RecordSave(recordType: $0.recordType, recordName: $0.recordName, fields: $0.fields, changeTag: $0.changeTag)
        }
        update[0].fields["earnedPoints"] = 4
        update[1].fields["earnedPoints"] = 2
        try await family.child1.save(update + [Make.usage("new", start: Self.base, seconds: 5)], zone: FamilyFixture.zone1)
        _ = try await family.child1.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: FamilyFixture.zone1,
            deletes: ["u10", "u20", "u30"].map { RecordDelete(recordName: $0) }))
        let since = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: everything.token, limit: 2)
        #expect(Set(since.records.map(\.recordName)) == ["u1", "u2", "new"])
        #expect(since.records.first { $0.recordName == "u1" }?.fields["earnedPoints"] == 4)
        #expect(Set(since.deletions.map(\.recordName)) == ["u10", "u20", "u30"])
        #expect(since.deletions.allSatisfy { $0.recordType == "UsageRecord" })
    }

    @Test("database changes list the zones created, changed and deleted since a token")
    func databaseChanges() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let start = try await family.parent.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family))
        #expect(Set(start.changedZones) == ["default", FamilyFixture.zone1, FamilyFixture.zone2])

        try await family.child1.save([Make.usage("u1", start: Self.base, seconds: 5)], zone: FamilyFixture.zone1)
        _ = try await family.parent.call(StoreMethods.createZone, ZoneParams(family: FamilyFixture.family, zone: "ChildMonitoring-c3"))
        _ = try await family.parent.call(StoreMethods.deleteZone, ZoneParams(family: FamilyFixture.family, zone: FamilyFixture.zone2))
        let next = try await family.parent.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family, since: start.token))
        #expect(Set(next.changedZones) == [FamilyFixture.zone1, "ChildMonitoring-c3"])
        #expect(next.deletedZones == [FamilyFixture.zone2])
        // A child sees only its own zone.
        let childView = try await family.child1.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family))
        #expect(childView.changedZones == [FamilyFixture.zone1] && childView.deletedZones.isEmpty)
        // A token of a recreated zone is expired.
        let zoneToken = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: "ChildMonitoring-c3")).token
        _ = try await family.parent.call(StoreMethods.deleteZone, ZoneParams(family: FamilyFixture.family, zone: "ChildMonitoring-c3"))
        _ = try await family.parent.call(StoreMethods.createZone, ZoneParams(family: FamilyFixture.family, zone: "ChildMonitoring-c3"))
        await expectError(.changeTokenExpired) {
            _ = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: "ChildMonitoring-c3", since: zoneToken))
        }
    }

    @Test("a token older than the tombstone horizon gets change_token_expired; starting over works")
    func tokenExpiry() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        try await family.child1.save([Make.usage("u1", start: Self.base, seconds: 5), Make.usage("u2", start: Self.base, seconds: 5)], zone: FamilyFixture.zone1)
        let old = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: nil, limit: 100)
        _ = try await family.child1.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, deletes: [RecordDelete(recordName: "u1")]))
        let beforePurge = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: old.token, limit: 100)
        #expect(beforePurge.deletions.map(\.recordName) == ["u1"])

        let purged = try await family.admin.call(StoreMethods.purge, PurgeParams(olderThanSeconds: 0))
        #expect(purged.tombstones == 1 && purged.changes > 0)
        let error = await expectError(.changeTokenExpired) {
            _ = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, since: old.token))
        }
        #expect(error?.message.contains("from scratch") == true)
        let fresh = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: nil, limit: 100)
        #expect(fresh.records.map(\.recordName) == ["u2"] && fresh.deletions.isEmpty)
        // The token taken after the deletion is still good.
        _ = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: beforePurge.token, limit: 100)
        // So is watching from the horizon, but not from before it.
        await expectError(.changeTokenExpired) {
            for try await _ in family.admin.stream(StoreMethods.watch, WatchParams(after: 0, follow: false)) {}
        }
        await expectError(.invalidParams) {
            _ = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, since: "garbage"))
        }
    }

    @Test("a zone whose last change was a deletion still reads as changed to a family's token from before it once the tombstone is purged; its zone token then expires")
    func purgedDeletionStillChangesTheZone() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.child1.save([Make.usage("u1", start: Self.base, seconds: 5), Make.usage("u2", start: Self.base, seconds: 5)], zone: FamilyFixture.zone1)
            let zoneToken = try await Self.drain(family.parent, zone: FamilyFixture.zone1, since: nil, limit: 100).token
            let familyToken = try await family.parent.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family)).token
            _ = try await family.child1.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, deletes: [RecordDelete(recordName: "u2")]))
            let purged = try await family.admin.call(StoreMethods.purge, PurgeParams(olderThanSeconds: 0))
            #expect(purged.tombstones == 1)

            let changed = try await family.parent.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family, since: familyToken))
            #expect(changed.changedZones == [FamilyFixture.zone1], "the deletion's zone is still reported: \(changed)")
            await expectError(.changeTokenExpired) {
                _ = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, since: zoneToken))
            }
            let after = try await family.parent.call(StoreMethods.databaseChanges, DatabaseChangesParams(family: FamilyFixture.family, since: changed.token))
            #expect(after.changedZones.isEmpty, "and only once: \(after)")
        }
    }

    /// Collects a watch that ends when caught up.
    static func watchAll(_ client: RPCClient, _ params: WatchParams) async throws -> (events: [ChangeEvent], end: WatchEnd) {
        var events: [ChangeEvent] = []
        for try await event in client.stream(StoreMethods.watch, params) {
            switch event {
            case .item(let change): events.append(change)
            case .end(let end): return (events, end)
            }
        }
        throw TestFailure("the watch ended without its final reply")
    }

    @Test("store.watch delivers every change in commit order, and resumes after a restart exactly where it stopped")
    func watchResumes() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        try await family.child1.save((0..<300).map { Make.usage("a\($0)", start: Self.base, seconds: 5) }, zone: FamilyFixture.zone1)
        let first = try await Self.watchAll(family.admin, WatchParams(recordTypes: ["UsageRecord"], follow: false))
        #expect(first.events.count == 300)
        #expect(first.events.map(\.seq) == first.events.map(\.seq).sorted())
        #expect(first.events.allSatisfy { $0.kind == .recordSaved && $0.record?.recordType == "UsageRecord" })

        try await store.restart()
        let writer = store.client(token: FamilyFixture.child1Token)
        try await writer.save((0..<5).map { Make.usage("b\($0)", start: Self.base, seconds: 5) }, zone: FamilyFixture.zone1)
        _ = try await writer.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, deletes: [RecordDelete(recordName: "a0")]))
        let rest = try await Self.watchAll(store.client(), WatchParams(after: first.end.lastSeq, recordTypes: ["UsageRecord"], follow: false))
        #expect(rest.events.map { $0.recordName ?? "" } == ["b0", "b1", "b2", "b3", "b4", "a0"])
        #expect(rest.events.last?.kind == .recordDeleted)
        #expect(rest.events.first!.seq > first.end.lastSeq)
    }

    @Test("store.watch tells a creation from an update, what a deleted record held, and who deleted it")
    func watchDetails() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let head = try await Self.watchAll(family.admin, WatchParams(follow: false)).end.lastSeq
        let writer = store.client(token: FamilyFixture.child1Token)
        try await writer.save([Make.usage("u1", start: Self.base, seconds: 5)], zone: FamilyFixture.zone1)
        try await writer.save([Make.usage("u1", start: Self.base, seconds: 9)], zone: FamilyFixture.zone1, policy: .allKeys)
        _ = try await writer.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, deletes: [RecordDelete(recordName: "u1")]))
        try await writer.save([Make.usage("u1", start: Self.base, seconds: 3)], zone: FamilyFixture.zone1)
        try await writer.save([Make.usage("u2", start: Self.base, seconds: 4)], zone: FamilyFixture.zone1)
        _ = try await writer.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, deletes: [RecordDelete(recordName: "u2")]))
        let events = try await Self.watchAll(store.client(), WatchParams(after: head, recordTypes: ["UsageRecord"], follow: false)).events
        #expect(events.map(\.kind) == [.recordSaved, .recordSaved, .recordDeleted, .recordSaved, .recordSaved, .recordDeleted])
        #expect(events.map(\.created) == [true, false, nil, true, true, nil], "a record deleted and saved again is created anew")
        #expect(events[2].deletedFields?["totalSeconds"] == .int(9))
        #expect(events[0].deletedFields == nil)
        // Who deleted it, while the deletion is the record's last change.
        #expect(events[5].deletedBy?.hasPrefix("device:") == true && events[2].deletedBy == nil && events[0].deletedBy == nil, "\(events.map(\.deletedBy))")
        let bare = try await Self.watchAll(store.client(), WatchParams(after: head, recordTypes: ["UsageRecord"], follow: false, includeRecords: false)).events
        #expect(bare[2].deletedFields == nil && bare[0].created == true && bare[5].deletedBy == nil)
    }

    @Test("the store wakes a named watcher's socket on commits while it does not follow, and leaves it alone while it does")
    func wakesWatchers() async throws {
        let directory = TemporaryDirectory()
        let push = try Activator(path: directory.file("push.sock"))
        let store = try await ServiceProcess.start("screentime-stored", service: "store", in: directory, stateDirectory: directory.file("state"))
        defer { store.stopNow() }
        let admin = RPCClient(configuration: ClientConfiguration(socketPath: store.socketPath))
        _ = try await admin.call(StoreMethods.createFamily, CreateFamilyParams(family: "fam"))
        #expect(push.hasPendingConnection(timeout: .seconds(5)), "a commit with nobody following wakes push.sock")
        // Kept open: closed at once, under load, the waker's client saw it as a failed
        // connect and connected again a second later, which looked like a second wake-up.
        let woken = accept(push.listenFD, nil, nil)
        defer { close(woken) }

        // The store counts the watcher before it sends the first event: once one arrives,
        // push follows (waiting a fixed time instead failed on a loaded machine).
        let (firstEvent, arrived) = AsyncStream<Void>.makeStream()
        let following = Task {
            for try await _ in admin.stream(StoreMethods.watch, WatchParams(watcher: "push")) { arrived.yield() }
        }
        defer { following.cancel() }
        var events = firstEvent.makeAsyncIterator()
        _ = await events.next()
        try await Task.sleep(for: .milliseconds(1200))  // past the one-second spacing of wake-ups
        _ = try await admin.call(StoreMethods.createZone, ZoneParams(family: "fam", zone: "z1"))
        #expect(!push.hasPendingConnection(timeout: .milliseconds(800)), "push follows: no wake-up")
    }

    @Test("with --wake none nobody is woken, and the store stays up")
    func wakesNobody() async throws {
        let directory = TemporaryDirectory()
        let push = try Activator(path: directory.file("push.sock"))
        let store = try await ServiceProcess.start("screentime-stored", service: "store", in: directory, stateDirectory: directory.file("state"),
                                                   arguments: ["--wake", "none"])
        defer { store.stopNow() }
        let admin = RPCClient(configuration: ClientConfiguration(socketPath: store.socketPath))
        _ = try await admin.call(StoreMethods.createFamily, CreateFamilyParams(family: "fam"))
        #expect(!push.hasPendingConnection(timeout: .milliseconds(800)), "nobody to wake")
        _ = try await admin.call(StoreMethods.createZone, ZoneParams(family: "fam", zone: "z1"))
        #expect(store.isRunning)
    }

    @Test("a following watch sees a new commit at once; a device may not watch")
    func watchFollows() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let watcher = store.client()
        let head = try await Self.watchAll(watcher, WatchParams(follow: false)).end.lastSeq
        let received = Task {
            for try await event in watcher.stream(StoreMethods.watch, WatchParams(after: head, recordTypes: ["ConfigurationCommand"])) {
                if case .item(let change) = event { return change }
            }
            throw TestFailure("the watch ended")
        }
        // The first watch (not following) logged its start too: this is the second.
        try await waitUntil("the following watch running", detail: store.process.log) {
            store.process.log.components(separatedBy: "watch started").count - 1 >= 2
        }
        try await family.parent.save([RecordSave(recordType: "ConfigurationCommand", recordName: "cmd-1", fields: [
            "targetDeviceID": "c1", "commandType": "updateApp", "status": "pending", "payloadJSON": "{\"bundleId\":\"org.khan\"}",
        ])], zone: FamilyFixture.zone1)
        let change = try await received.value
        #expect(change.recordName == "cmd-1" && change.zone == FamilyFixture.zone1 && change.record?.fields["status"] == "pending")

        await expectError(.forbidden) {
            for try await _ in family.parent.stream(StoreMethods.watch, WatchParams(follow: false)) {}
        }
    }
}
