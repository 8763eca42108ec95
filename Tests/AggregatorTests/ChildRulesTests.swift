import AggregatorAPI
import Foundation
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// One child's own rule for an app, in place of the family's: it reaches only that child's
/// devices (their configuration), counts that child's usage from its save, and the
/// family's applies again once it is removed.
@Suite("Aggregator: a child's own app rules", .serialized)
struct ChildRulesTests {
    @Test("Emma's YouTube blocked and Leo's learning app at 5 points a minute: each child's devices get their own effective rules, each child's usage counts by them, the family's rule for the rest; removed, the family's applies again; audited in words")
    func overrides() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-23 08:00"))
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now } }, storeClock: { clock.now }) { stack in
            let leo = try await stack.family.pairChild(stack.harness, child: "leo", device: "leo-phone")
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 2)
            try await stack.rule(bundleId: "com.youtube", "reward", pointsPerMinute: 0)
            try await stack.childRule("emma", bundleId: "com.youtube", "reward", blocked: true)
            try await stack.childRule("leo", bundleId: "org.khan", "learning", pointsPerMinute: 5)

            let emmas = try await ConfigurationTests.waitForSnapshot(stack, stack.child) { $0.rules.contains { $0.childOverride == true } }
            #expect(emmas.rules.first { $0.bundleId == "com.youtube" }.map { $0.blockingEnabled == true && $0.childOverride == true } == true, "\(emmas.rules)")
            #expect(emmas.rules.first { $0.bundleId == "org.khan" }.map { $0.pointsPerMinute == 2 && $0.childOverride == nil } == true)
            let leos = try await ConfigurationTests.waitForSnapshot(stack, leo) { $0.rules.contains { $0.childOverride == true } }
            #expect(leos.rules.first { $0.bundleId == "org.khan" }.map { $0.pointsPerMinute == 5 && $0.childOverride == true } == true, "\(leos.rules)")
            #expect(leos.rules.first { $0.bundleId == "com.youtube" }.map { $0.blockingEnabled != true && $0.childOverride == nil } == true, "Emma's block is hers alone")

            // Ten minutes of the learning app each: Leo earns 5 a minute, Emma the family's 2.
            clock.set(paris.at("2026-11-23 10:00"))
            try await stack.session("emma-learn", from: paris.at("2026-11-23 09:00"), to: paris.at("2026-11-23 09:10"))
            try await stack.session("leo-learn", from: paris.at("2026-11-23 09:00"), to: paris.at("2026-11-23 09:10"), on: leo)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 20 }
            try await stack.waitForBalance(of: "leo") { $0?.fields["pointsBalance"] == 50 }

            // Leo's rule removed at 10:00: his usage from then counts at the family's rate.
            try await stack.resetChildRule("leo", bundleId: "org.khan")
            _ = try await ConfigurationTests.waitForSnapshot(stack, leo) { !$0.rules.contains { $0.childOverride == true } }
            clock.set(paris.at("2026-11-23 11:00"))
            try await stack.session("leo-learn-2", from: paris.at("2026-11-23 10:30"), to: paris.at("2026-11-23 10:40"), on: leo)
            try await stack.waitForBalance(of: "leo") { $0?.fields["pointsBalance"] == 70 }
            try await stack.settle(sessions: 3)
            let log = try await stack.auditWords()
            #expect(log.contains("Mum set Emma's own rule for com.youtube: blocked") && log.contains("Mum set Leo's own rule for org.khan: a learning app, 5 points a minute")
                    && log.contains("Mum let Leo follow the family's rule for org.khan again"), "\(log)")
        }
    }
}

extension AggregatorStack {
    /// A parent saves one child's own rule for an app.
    func childRule(_ child: String, bundleId: String, _ classification: String, pointsPerMinute: Int64? = nil, blocked: Bool? = nil) async throws {
        var fields: [String: JSONValue] = [
            "familyRef": .reference(self.family.family, zone: StoreNames.defaultZone), "childRef": .reference("child-\(child)", zone: StoreNames.defaultZone),
            "bundleId": .string(bundleId), "classification": .string(classification),
        ]
        if let pointsPerMinute { fields["pointsPerMinute"] = .int(pointsPerMinute) }
        if let blocked { fields["blockingEnabled"] = .bool(blocked) }
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "ChildAppRule", recordName: ChildAppRule.recordName(child: child, bundleId: bundleId), fields: fields),
        ], savePolicy: .allKeys, atomic: true))
        #expect(result.allSucceeded, "\(result)")
    }

    func resetChildRule(_ child: String, bundleId: String) async throws {
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone,
                                                                                       deletes: [RecordDelete(recordName: ChildAppRule.recordName(child: child, bundleId: bundleId))]))
        #expect(result.allSucceeded, "\(result)")
    }

    @discardableResult
    func waitForBalance(of child: String, until condition: @escaping (Record?) -> Bool) async throws -> Record? {
        try await eventually("\(child)'s balance coming to what was expected", timeout: .seconds(10)) { seen in
            let balance = try await self.parentStore.call(StoreMethods.fetch, FetchParams(family: self.family.family, zone: StoreNames.defaultZone,
                                                                                          recordNames: ["balance-child-\(child)"])).records.first
            seen = String(describing: balance?.fields)
            return condition(balance) ? .some(balance) : nil
        }
    }
}
