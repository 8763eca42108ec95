import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Records: saves, fetches, conflicts and batches")
struct RecordTests {
    @Test("a saved record comes back with server-set system fields")
    func saveAndFetch() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let saved = try await family.parent.save([Make.appRule("org.khanacademy")])
            let record = try #require(saved.saved.first?.record)
            #expect(record.createdBy == "device:p1" && record.modifiedBy == "device:p1")
            #expect(record.fields["familyRef"] == .reference(FamilyFixture.family, zone: "default"))
            #expect(abs(record.modifiedAt.timeIntervalSinceNow) < 60)

            let fetched = try await family.parent.fetch([record.recordName])
            #expect(fetched.records == [record])
        }
    }

    @Test("parents read what they saved; the missing names are listed")
    func fetchMissing() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.parent.save([Make.appRule("a"), Make.appRule("b")])
            let fetched = try await family.parent.fetch(["rule-b", "rule-zzz", "rule-a"])
            #expect(fetched.records.map(\.recordName) == ["rule-b", "rule-a"])
            #expect(fetched.missing == ["rule-zzz"])
            // One name at a time (the point read): the whole name is compared, a NUL in it too.
            #expect(try await family.parent.fetch(["rule-a"]).records.map(\.recordName) == ["rule-a"])
            #expect(try await family.parent.fetch(["rule-a\u{0}x"]).missing == ["rule-a\u{0}x"])
            #expect(try await family.parent.fetch(["rule-zzz"]).missing == ["rule-zzz"])
        }
    }

    @Test("a stale change tag gets conflict with the server's record; rebasing onto it succeeds")
    func conflictAndRebase() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let first = try #require(try await family.parent.save([Make.appRule("org.duolingo")]).saved[0].record)

            // Two parents edit the same version.
            var mine = RecordSave(recordType: "AppRule", recordName: first.recordName, fields: first.fields, changeTag: first.changeTag)
            var theirs = mine
            theirs.fields["classification"] = "reward"
            let won = try #require(try await family.admin.save([theirs]).saved[0].record)
            #expect(won.changeTag != first.changeTag)

            mine.fields["pointsPerMinute"] = 3
            let lost = try await family.parent.save([mine]).saved[0]
            #expect(lost.record == nil)
            let error = try #require(lost.error)
            #expect(error.code == .conflict)
            let server = try #require(error.serverRecord)
            #expect(server.changeTag == won.changeTag && server.fields["classification"] == "reward")

            // Rebase: the server's fields plus my change, with the server's tag.
            var rebased = RecordSave(recordType: "AppRule", recordName: server.recordName, fields: server.fields, changeTag: server.changeTag)
            rebased.fields["pointsPerMinute"] = 3
            let merged = try #require(try await family.parent.save([rebased]).saved[0].record)
            #expect(merged.fields["classification"] == "reward" && merged.fields["pointsPerMinute"] == 3)

            // Creating a record that already exists, without a tag, is a conflict too.
            let again = try await family.parent.save([Make.appRule("org.duolingo")]).saved[0]
            #expect(again.error?.code == .conflict && again.error?.serverRecord?.changeTag == merged.changeTag)
        }
    }

    @Test("changedKeys: each writer's fields survive, set-like lists merge by union, null removes a field")
    func changedKeysMerge() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.parent.save([Make.child("child-1", opaque: "opaque-1", devices: ["c1"])])
            try await family.admin.save([RecordSave(recordType: "ChildContext", recordName: "child-1", fields: [
                "pairedDeviceIds": ["c9"], "displayName": "Sam",
            ])], policy: .changedKeys)
            try await family.parent.save([RecordSave(recordType: "ChildContext", recordName: "child-1", fields: [
                "pairedDeviceIds": ["c1", "c10"],
            ])], policy: .changedKeys)
            var record = try #require(try await family.parent.fetch(["child-1"]).records.first)
            #expect(record.fields["pairedDeviceIds"] == ["c1", "c9", "c10"])
            #expect(record.fields["displayName"] == "Sam" && record.fields["childOpaqueId"] == "opaque-1")

            try await family.parent.save([RecordSave(recordType: "ChildContext", recordName: "child-1", fields: ["displayName": nil])], policy: .changedKeys)
            record = try #require(try await family.parent.fetch(["child-1"]).records.first)
            #expect(record.fields["displayName"] == nil && record.fields["pairedDeviceIds"] == ["c1", "c9", "c10"])

            // allKeys replaces the whole record, whatever its tag.
            try await family.parent.save([Make.child("child-1", opaque: "opaque-1")], policy: .allKeys)
            record = try #require(try await family.parent.fetch(["child-1"]).records.first)
            #expect(record.fields["pairedDeviceIds"] == [])
        }
    }

    @Test("an atomic batch with one bad item applies nothing and names every failure")
    func atomicRollback() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            var bad = Make.appRule("bad")
            bad.fields["classification"] = "homework"
            let error = await expectError(.invalidParams) {
                try await family.parent.save([Make.appRule("good-1"), bad, Make.appRule("good-2")], atomic: true)
            }
            let failures = try #require(error?.data?["failures"]?.arrayValue)
            #expect(failures.count == 1)
            #expect(failures.first?["recordName"] == "rule-bad" && failures.first?["index"] == 1)
            #expect(failures.first?["error"]?["field"] == "classification")
            let fetched = try await family.parent.fetch(["rule-good-1", "rule-good-2", "rule-bad"])
            #expect(fetched.records.isEmpty)
        }
    }

    @Test("without atomic, the good items are saved and each bad one carries its own error")
    func partialFailure() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            var bad = Make.appRule("bad")
            bad.fields["pointsPerMinute"] = "three"
            let result = try await family.parent.save([Make.appRule("good-1"), bad, Make.appRule("good-2")])
            #expect(result.saved.map { $0.error == nil } == [true, false, true])
            #expect(result.saved[1].error?.code == .invalidParams && result.saved[1].error?.field == "pointsPerMinute")
            #expect(result.allSucceeded == false)
            let fetched = try await family.parent.fetch(["rule-good-1", "rule-good-2", "rule-bad"])
            #expect(fetched.records.map(\.recordName) == ["rule-good-1", "rule-good-2"] && fetched.missing == ["rule-bad"])
        }
    }

    @Test("a record name that is empty, too long or holds a control character fails its own item; the rest of the batch is saved")
    func recordNameErrorsPerItem() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let names = ["", String(repeating: "n", count: 256), "tab\there"]
            let bad = names.map { name -> RecordSave in
                var save = Make.appRule("x")
                save.recordName = name
                return save
            }
            let result = try await family.parent.call(StoreMethods.modify, ModifyParams(
                family: FamilyFixture.family, zone: "default", saves: [Make.appRule("good")] + bad,
                deletes: [RecordDelete(recordName: String(repeating: "d", count: 300))]))
            #expect(result.saved.map { $0.error == nil } == [true, false, false, false])
            for outcome in result.saved.dropFirst() {
                #expect(outcome.error?.code == .invalidParams && outcome.error?.field == "recordName", "\(outcome)")
                #expect(outcome.error?.message.contains("1 to 255 bytes") == true, "\(outcome)")
            }
            #expect(result.deleted.first?.error?.code == .invalidParams && result.deleted.first?.error?.field == "recordName")
            #expect(try await family.parent.fetch(["rule-good"]).records.count == 1)

            // Atomic: the call fails like for any other item error, naming the item.
            let error = await expectError(.invalidParams) {
                try await family.parent.save([Make.appRule("other"), bad[1]], atomic: true)
            }
            let failures = try #require(error?.data?["failures"]?.arrayValue)
            #expect(failures.count == 1 && failures.first?["index"] == 1 && failures.first?["error"]?["field"] == "recordName")
        }
    }

    @Test("a date field holding text that is not a date says what it got, not \"not a string\"")
    func dateErrorMessage() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            var save = Make.usage("u", start: Date(timeIntervalSince1970: 1_790_000_000), seconds: 60)
            save.fields["sessionStart"] = "yesterday"
            var numeric = Make.usage("v", start: Date(timeIntervalSince1970: 1_790_000_000), seconds: 60)
            numeric.fields["sessionStart"] = 17
            let result = try await family.child1.save([save, numeric], zone: FamilyFixture.zone1)
            let message = try #require(result.saved[0].error?.message)
            #expect(result.saved[0].error?.field == "sessionStart")
            #expect(message.contains("RFC 3339") && message.contains("\"yesterday\"") && !message.contains("not a string"), "\(message)")
            #expect(result.saved[1].error?.message.contains("not an integer") == true, "\(String(describing: result.saved[1].error))")
        }
    }

    @Test("a retried batch with the same request id returns the first result and applies nothing twice")
    func idempotentRetry() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        let batch = [Make.usage("u1", start: start, seconds: 600), Make.usage("u2", start: start.addingTimeInterval(900), seconds: 300)]
        let first = try await family.child1.save(batch, zone: FamilyFixture.zone1, requestId: "upload-42")
        let retry = try await family.child1.save(batch, zone: FamilyFixture.zone1, requestId: "upload-42")
        #expect(first.replayed == false && retry.replayed == true)
        #expect(retry.saved.map { $0.record?.changeTag } == first.saved.map { $0.record?.changeTag })
        let changes = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: FamilyFixture.zone1))
        #expect(changes.records.count == 2)
        #expect(changes.records.map(\.changeTag).sorted() == first.saved.compactMap { $0.record?.changeTag }.sorted())

        // The same request id for different content is a mistake, not a retry.
        let error = await expectError(.conflict) {
            try await family.child1.save([Make.usage("u3", start: start, seconds: 5)], zone: FamilyFixture.zone1, requestId: "upload-42")
        }
        #expect(error?.message.contains("upload-42") == true)
        // The retry survives a restart: it is stored with the write.
        try await store.restart()
        let afterRestart = try await store.client(token: FamilyFixture.child1Token).save(batch, zone: FamilyFixture.zone1, requestId: "upload-42")
        #expect(afterRestart.replayed)
    }

    @Test("a session that ends in the future is refused with a sentence, judged by the device's own clock: the store writes how far that clock is off into the record; a retry stamped later is the same request")
    func sessionsInTheFuture() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            // No clock sent: judged as it is, with two minutes' grace.
            #expect(try await family.child1.save([Make.usage("soon", start: now.addingTimeInterval(-600), seconds: 660)], zone: FamilyFixture.zone1).allSucceeded)
            let late = try await family.child1.save([Make.usage("later", start: now, seconds: 3600)], zone: FamilyFixture.zone1)
            let refusal = try #require(late.saved.first?.error)
            #expect(refusal.code == .invalidParams && refusal.field == "sessionEnd")
            #expect(refusal.message.contains("after the server's time") && refusal.message.contains("check the device's date and time"), "\(refusal.message)")

            // A clock 3 h ahead: what it calls the last half hour was the half hour before the
            // server's now. Kept as sent, with the offset beside it.
            let ahead = now.addingTimeInterval(3 * 3600)
            let saved = try await family.child1.save([Make.usage("ahead", start: ahead.addingTimeInterval(-1800), seconds: 1800)], zone: FamilyFixture.zone1, deviceClock: ahead)
            #expect(saved.allSucceeded)
            #expect(saved.saved.first?.record?.fields["clockOffsetSeconds"] == .int(3 * 3600))
            #expect(saved.saved.first?.record?.fields["sessionStart"] == .date(ahead.addingTimeInterval(-1800)))
            // The same clock, a session an hour after it: refused, saying the clock was corrected for.
            let future = try await family.child1.save([Make.usage("ahead-future", start: ahead, seconds: 3600)], zone: FamilyFixture.zone1, deviceClock: ahead)
            #expect(future.saved.first?.error?.message.contains("after correcting for this device's clock, 3 h ahead") == true, "\(String(describing: future.saved.first?.error))")
            // A clock 20 s off is the time on the way: no offset.
            let close = try await family.child1.save([Make.usage("close", start: now.addingTimeInterval(-300), seconds: 60)], zone: FamilyFixture.zone1, deviceClock: now.addingTimeInterval(20))
            #expect(close.allSucceeded && close.saved.first?.record?.fields["clockOffsetSeconds"] == nil, "\(String(describing: close.saved.first?.record?.fields))")

            // The same batch sent again a minute later (its clock stamped anew) is a retry.
            let batch = [Make.usage("retried", start: now.addingTimeInterval(-900), seconds: 300)]
            let first = try await family.child1.save(batch, zone: FamilyFixture.zone1, requestId: "clock-1", deviceClock: now)
            let again = try await family.child1.save(batch, zone: FamilyFixture.zone1, requestId: "clock-1", deviceClock: now.addingTimeInterval(61))
            #expect(first.replayed == false && again.replayed == true)
        }
    }

    @Test("batches over 400 items get limit_exceeded; a record twice in one batch is refused")
    func batchLimits() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            await expectError(.limitExceeded) {
                try await family.parent.save((0...400).map { Make.appRule("app\($0)") })
            }
            let error = await expectError(.invalidParams) {
                try await family.parent.save([Make.appRule("same"), Make.appRule("same")])
            }
            #expect(error?.data?["parameter"] == "params.saves[1].recordName")
            let full = try await family.parent.save((0..<400).map { Make.appRule("app\($0)") })
            #expect(full.allSucceeded && full.saved.count == 400)
        }
    }

    @Test("deletes leave tombstones; deleteSelf references cascade; deleting again is harmless")
    func deletesAndCascades() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.parent.save([
                Make.child("child-1", opaque: "o1"),
                RecordSave(recordType: "EarnedTimeBalance", recordName: "balance-child-1", fields: ["childRef": .reference("child-1"), "balanceSeconds": 600]),
                RecordSave(recordType: "PointsLedgerEntry", recordName: "ledger-1", fields: [
                    "familyRef": .reference(FamilyFixture.family), "childRef": .reference("child-1"), "type": "adjustment", "amount": 10,
                    "timestamp": .date(Date()),
                ]),
            ])
            let before = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: "default"))
            let result = try await family.parent.call(StoreMethods.modify, ModifyParams(
                family: FamilyFixture.family, zone: "default", deletes: [RecordDelete(recordName: "child-1")]))
            #expect(result.deleted.first?.deleted == true)
            #expect(Set(result.cascaded.map(\.recordName)) == ["balance-child-1", "ledger-1"])
            let after = try await family.parent.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: "default", since: before.token))
            #expect(Set(after.deletions.map(\.recordName)) == ["child-1", "balance-child-1", "ledger-1"])
            #expect(after.records.isEmpty)
            let again = try await family.parent.call(StoreMethods.modify, ModifyParams(
                family: FamilyFixture.family, zone: "default", deletes: [RecordDelete(recordName: "child-1"), RecordDelete(recordName: "never-was")]))
            #expect(again.deleted[0].deleted == false && again.deleted[1].error?.code == .notFound)
            // A deleted name can be used again.
            let recreated = try await family.parent.save([Make.child("child-1", opaque: "o1")])
            #expect(recreated.allSucceeded)
        }
    }
}
