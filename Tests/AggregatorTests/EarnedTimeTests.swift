import AggregatorAPI
import Foundation
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
}
