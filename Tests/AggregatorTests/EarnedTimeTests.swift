import AggregatorAPI
import Foundation
import GRDB
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator: points ledger, earned time, shielding reward apps", .serialized)
struct EarnedTimeTests {
    @Test("learning points become earned time and reward use spends it; running out shields reward apps, earning lifts it, once per crossing")
    func shieldCrossings() async throws {
        try await AggregatorStack.inProcess { stack in
            let policy = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                RecordSave(recordType: "ShieldPolicy", recordName: "policy", fields: [
                    "familyRef": .reference(stack.family.family, zone: StoreNames.defaultZone), "rewardApps": ["com.roblox"], "rewardCategories": ["games"],
                ]),
            ], savePolicy: .allKeys))
            #expect(policy.allSucceeded)

            // 10 learning minutes at 1 point each; a point buys 60 s (the family's default).
            try await stack.session("learn-1", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:10"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 600 && $0?.fields["pointsBalance"] == 10 && $0?.fields["shielded"] == false }
            #expect(try await stack.shieldCommands().isEmpty, "time to spare from the start: nothing to lift")

            // 15 reward minutes: 300 s over.
            try await stack.session("play-1", app: "roblox", category: "reward", from: stack.at("2026-11-20 16:00"), to: stack.at("2026-11-20 16:15"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == -300 && $0?.fields["shielded"] == true && $0?.fields["rewardSecondsUsed"] == 900 }
            try await stack.settle(sessions: 2)
            var commands = try await stack.shieldCommands()
            #expect(commands.map { $0.fields["commandType"] } == ["shieldRewardApps"])
            #expect(commands.first?.fields["targetDeviceID"] == .string(stack.child.deviceId) && commands.first?.fields["status"] == "pending")
            let payload = try RPCJSON.makeDecoder().decode(JSONValue.self, from: Data((commands.first?.fields["payloadJSON"]?.stringValue ?? "").utf8))
            #expect(payload.objectValue?["rewardApps"] == ["com.roblox"] && payload.objectValue?["rewardCategories"] == ["games"])

            // More reward use while shielded: no second command.
            try await stack.session("play-2", app: "roblox", category: "reward", from: stack.at("2026-11-20 17:00"), to: stack.at("2026-11-20 17:01"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == -360 }
            // Ten more learning minutes: 240 s to spare, the shield is lifted.
            try await stack.session("learn-2", from: stack.at("2026-11-21 08:00"), to: stack.at("2026-11-21 08:10"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 240 && $0?.fields["shielded"] == false }
            try await stack.settle(sessions: 4)
            commands = try await stack.shieldCommands()
            #expect(commands.map { $0.fields["commandType"] } == ["shieldRewardApps", "unshieldRewardApps"])

            // The ledger: one accrual per child and day, written by the aggregator.
            let entries = try await stack.parentStore.call(StoreMethods.query, QueryParams(
                family: stack.family.family, zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
            #expect(Dictionary(uniqueKeysWithValues: entries.map { ($0.recordName, $0.fields["amount"]) })
                    == ["accrual-child-emma-2026-11-20-1": 10, "accrual-child-emma-2026-11-21-1": 10])
            #expect(entries.allSatisfy { $0.fields["type"] == "accrual" && $0.fields["childRef"]?.objectValue?["recordName"] == "child-emma" })
        }
    }

    @Test("a parent's redemptions and adjustments move the balance; an idempotency key used twice is refused; a new rate re-prices every point")
    func parentsLedger() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("learn", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:20"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 20 }
            #expect(try await stack.ledger("redemption", 5, key: "movie-night").allSucceeded)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 15 && $0?.fields["balanceSeconds"] == 900 }
            #expect(try await stack.ledger("adjustment", 7, key: "chores").allSucceeded)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 22 }
            let retried = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                RecordSave(recordType: "PointsLedgerEntry", recordName: "entry-chores-again", fields: [
                    "familyRef": .reference(stack.family.family, zone: StoreNames.defaultZone), "childRef": .reference(stack.childRef, zone: StoreNames.defaultZone),
                    "type": "adjustment", "amount": 7, "timestamp": .date(Date()), "idempotencyKey": "chores",
                ]),
            ]))
            #expect(retried.saved.first?.error?.code == .conflict, "the same key twice never posts twice")

            // Redeeming more than there is spends into the negative: shielded.
            #expect(try await stack.ledger("redemption", 30, key: "big-prize").allSucceeded)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == .int(-8) && $0?.fields["shielded"] == true }
            // An entry is never deleted nor changed: the parent corrects with a new one.
            let deleted = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, deletes: [RecordDelete(recordName: "entry-big-prize")]))
            #expect(deleted.deleted.first?.error?.code == .forbidden && deleted.deleted.first?.error?.message.contains("never deleted") == true)
            let changed = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                RecordSave(recordType: "PointsLedgerEntry", recordName: "entry-big-prize", fields: ["amount": 3]),
            ], savePolicy: .changedKeys))
            #expect(changed.saved.first?.error?.code == .conflict && changed.saved.first?.error?.message.contains("never changed") == true)
            #expect(try await stack.ledger("adjustment", 30, key: "big-prize-given-back").allSucceeded)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 22 && $0?.fields["shielded"] == false }

            // 30 reward seconds per point instead of 60.
            _ = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                RecordSave(recordType: "Family", recordName: stack.family.family, fields: ["rewardSecondsPerPoint": 30]),
            ], savePolicy: .changedKeys))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == .int(22 * 30) }
        }
    }

    @Test("an accrual the store refuses (a parent took its idempotency key) is logged as an error; the balance is still right and the service goes on")
    func refusedAccrual() async throws {
        try await AggregatorStack.inProcess { stack in
            #expect(try await stack.ledger("adjustment", 1, key: "accrual-child-emma-2026-11-20-1").allSucceeded)
            try await stack.session("learn", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:10"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 11 }
            try await stack.settle(sessions: 1)
            #expect(stack.aggregatorLog.contains("the store refused a record the aggregator wrote"))
            #expect(stack.aggregatorLog.contains("accrual-child-emma-2026-11-20-1"))
            try await stack.session("learn-more", from: stack.at("2026-11-21 08:00"), to: stack.at("2026-11-21 08:05"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 16 }
        }
    }

    @Test("the ledger only grows: more learning that day is a new accrual beside the first, usage taken back is a reversal, a rate change and a recompute add nothing; no entry ever changes")
    func ledgerOnlyGrows() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 1)
            try await stack.session("s1", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:20"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 20 }
            try await stack.settle(sessions: 1)
            let first = try await stack.accruals("2026-11-20")
            #expect(first.map(\.recordName) == ["accrual-child-emma-2026-11-20-1"] && first[0].fields["amount"] == 20 && first[0].fields["type"] == "accrual")
            #expect(first[0].fields["reason"] == "learning on 2026-11-20" && first[0].fields["idempotencyKey"] == "accrual-child-emma-2026-11-20-1")

            try await stack.session("s2", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:10"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 30 }
            try await stack.settle(sessions: 2)
            let second = try await stack.accruals("2026-11-20")
            #expect(second.map { [$0.fields["type"], $0.fields["amount"]] } == [["accrual", 20], ["accrual", 10]])
            #expect(second[0].changeTag == first[0].changeTag, "the first entry was written again")

            try await stack.deleteSession("s2")
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 20 }
            try await stack.settle(sessions: 1)
            let third = try await stack.accruals("2026-11-20")
            #expect(third.map { [$0.fields["type"], $0.fields["amount"]] } == [["accrual", 20], ["accrual", 10], ["reversal", 10]])
            #expect(third[0].changeTag == first[0].changeTag && third[1].changeTag == second[1].changeTag)
            #expect(third[2].fields["reason"] == "learning on 2026-11-20 counted again: fewer points")
            #expect(try await stack.accrued("2026-11-20") == 20)

            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 3)
            _ = try await stack.local.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "emma"))
            _ = try await AggregatorServiceTests.statusOnceCaughtUp(stack)
            try await stack.settle(sessions: 1)
            #expect(try await stack.accruals("2026-11-20").map(\.changeTag) == third.map(\.changeTag), "a rule change or a recompute touched the ledger")
        }
    }

    @Test("upgrading an aggregator that kept one rewritten accrual per day: each becomes the day's first entry, the old record goes, the balance stays")
    func upgradeFromOneAccrualPerDay() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        try await stack.session("s1", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:25"))
        try await stack.session("s2", from: stack.at("2026-11-21 08:00"), to: stack.at("2026-11-21 08:05"))
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 30 }
        try await stack.settle(sessions: 2)
        await stack.kill()
        // As the older aggregator left it: in the store, one `accrual-<child>-<day>` per day;
        // in its database, no record of entries.
        let store = stack.harness.storeClient()
        let entries = try await store.call(StoreMethods.query, QueryParams(family: "smith", zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
        var saves: [RecordSave] = []
        for entry in entries {
            var fields = entry.fields
            let old = String(entry.recordName.dropLast(2))
            fields["idempotencyKey"] = .string(old)
            saves.append(RecordSave(recordType: "PointsLedgerEntry", recordName: old, fields: fields))
        }
        let rewound = try await store.call(StoreMethods.modify, ModifyParams(family: "smith", zone: StoreNames.defaultZone, saves: saves,
                                                                             deletes: entries.map { RecordDelete(recordName: $0.recordName) }, atomic: true))
        #expect(rewound.allSucceeded)
        let database = try DatabaseQueue(path: stack.harness.state + "/aggregator.sqlite")
        try await database.write { db in
            try db.execute(sql: """
                DROP TABLE accruals; ALTER TABLE devices DROP COLUMN clock_offset_s; ALTER TABLE devices DROP COLUMN clock_at_ms;
                DELETE FROM grdb_migrations WHERE identifier = 'aggregator-v7-ledger-and-clocks'
                """)
        }
        try await database.close()

        try await stack.restart()
        let names = try await eventually("the ledger in its new form", detail: stack.aggregatorLog) { seen in
            let names = try await store.call(StoreMethods.query, QueryParams(family: "smith", zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
                .map { "\($0.recordName) \($0.fields["amount"]?.intValue ?? 0)" }.sorted()
            seen = "\(names)"
            return names.contains { $0.hasPrefix("accrual-child-emma-2026-11-20 ") } ? nil : names
        }
        #expect(names == ["accrual-child-emma-2026-11-20-1 25", "accrual-child-emma-2026-11-21-1 5"])
        let first = try #require(try await stack.accruals("2026-11-20").first)
        #expect(first.fields["timestamp"] == .date(stack.at("2026-11-20 00:00")), "dated as the entry it replaces: \(first.fields)")
        try await stack.settle(sessions: 2)
        #expect(try await stack.balance()?.fields["pointsBalance"] == 30)
        // And it goes on as it does now.
        try await stack.session("s3", from: stack.at("2026-11-21 09:00"), to: stack.at("2026-11-21 09:05"))
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 35 }
        try await stack.settle(sessions: 3)
        #expect(try await stack.accruals("2026-11-21").map(\.recordName) == ["accrual-child-emma-2026-11-21-1", "accrual-child-emma-2026-11-21-2"])
    }

    @Test("an aggregator whose database is made again from the store's history (lost, or an old backup) takes its own ledger entries from the store: the same entries, none changed, no refusal, and it goes on numbering after them")
    func rebuiltDatabaseAdoptsTheLedger() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        try await stack.session("s1", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:20"))
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 20 }
        try await stack.session("s2", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:05"))
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 25 }
        try await stack.settle(sessions: 2)
        let before = try await stack.accruals("2026-11-20")
        #expect(before.count == 2)
        await stack.kill()
        for file in ["aggregator.sqlite", "aggregator.sqlite-wal", "aggregator.sqlite-shm"] {
            try? FileManager.default.removeItem(atPath: stack.harness.state + "/" + file)
        }
        try await stack.restart()
        try await stack.settle(sessions: 2, timeout: .seconds(30))
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 25 }
        let after = try await stack.accruals("2026-11-20")
        #expect(after.map(\.recordName) == before.map(\.recordName) && after.map(\.changeTag) == before.map(\.changeTag), "\(after.map(\.recordName))")
        #expect(!stack.aggregatorLog.contains("the store refused a record the aggregator wrote"), "\(stack.aggregatorLog.suffix(2000))")
        try await stack.session("s3", from: stack.at("2026-11-20 10:00"), to: stack.at("2026-11-20 10:10"))
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 35 }
        try await stack.settle(sessions: 3)
        #expect(try await stack.accruals("2026-11-20").map(\.recordName).last == "accrual-child-emma-2026-11-20-3")
        #expect(try await stack.accrued("2026-11-20") == 35)
    }

    @Test("accrual and reversal entries are the server's own: a parent's is refused; a parent's entry named like the aggregator's (any name at all) is only an adjustment")
    func serverOwnEntryTypes() async throws {
        try await AggregatorStack.inProcess { stack in
            let refused = try await stack.ledger("accrual", 100, key: "free-points")
            #expect(refused.saved.first?.error?.code == .forbidden && refused.saved.first?.error?.message.contains("server's own") == true,
                    "\(String(describing: refused.saved.first?.error))")
            for (index, name) in ["accrual-5", "accrual-child-emma-2026-11-20-9223372036854775807", "accrual--2026-11-20-1", "accrual-"].enumerated() {
                let saved = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                    RecordSave(recordType: "PointsLedgerEntry", recordName: name, fields: [
                        "familyRef": .reference(stack.family.family, zone: StoreNames.defaultZone), "childRef": .reference(stack.childRef, zone: StoreNames.defaultZone),
                        "type": "adjustment", "amount": 1, "timestamp": .date(Date()), "idempotencyKey": .string("odd-\(index)"),
                    ]),
                ], savePolicy: .allKeys))
                #expect(saved.allSucceeded, "\(name)")
            }
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 4 }
            _ = try await stack.local.call(AggregatorMethods.status, Empty())
        }
    }
}
