import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator: recompute from the records equals the incremental path", .serialized)
struct RecomputeTests {
    @Test("after overlaps, a daylight-saving day, midnight splits, updates, deletes and ledger entries, recomputing changes nothing")
    func equalsIncremental() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.rule(bundleId: "org.khan.app", "learning", pointsPerMinute: 3)
            try await stack.session("a", app: "khan", from: stack.at("2026-10-24 23:10"), to: stack.at("2026-10-25 01:40"), bundleId: "org.khan.app")
            try await stack.session("b", app: "khan", from: stack.at("2026-10-25 01:00"), to: stack.at("2026-10-25 03:30"), bundleId: "org.khan.app")
            try await stack.session("c", app: "roblox", category: "reward", from: stack.at("2026-10-25 17:00"), to: stack.at("2026-10-25 18:15"))
            try await stack.session("d", app: "duolingo", from: stack.at("2026-10-26 07:00"), to: stack.at("2026-10-26 07:07:30"))
            try await stack.session("e", app: "duolingo", from: stack.at("2026-10-27 07:00"), to: stack.at("2026-10-27 07:20"))
            try await stack.session("d", app: "duolingo", from: stack.at("2026-10-26 07:00"), to: stack.at("2026-10-26 07:27:30"))
            try await stack.deleteSession("e")
            #expect(try await stack.ledger("adjustment", 12, key: "chores").allSucceeded)
            #expect(try await stack.ledger("redemption", 4, key: "treat").allSucceeded)
            try await stack.settle(sessions: 4)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] != nil }
            let range = ReportParams(family: "smith", child: "emma", from: "2026-10-20", to: "2026-10-31")
            let before = try await stack.local.call(AggregatorMethods.report, range)
            let balanceBefore = try await stack.balance()?.fields

            let commandsBefore = try await stack.shieldCommands().count
            let result = try await stack.local.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "emma"))
            #expect(result.usageRecords == 4 && result.ledgerEntries == 2 && result.days == 3)
            #expect(result.daysChanged.isEmpty && result.balanceSeconds == result.balanceSecondsBefore)
            try await stack.settle(sessions: 4)
            #expect(try await stack.local.call(AggregatorMethods.report, range) == before)
            #expect(try await stack.balance()?.fields["balanceSeconds"] == balanceBefore?["balanceSeconds"])
            #expect(before.points > 0 && before.rewardSeconds == 4500)
            #expect(try await stack.shieldCommands().count == commandsBefore, "no shield command from the rebuild")
            let status = try await stack.local.call(AggregatorMethods.status, Empty())
            #expect(status.pendingChildWrites == 0 && status.pendingSummaries == 0)
        }
    }

    @Test("usage the aggregator never saw (purged from the change log while it was down) is counted by a recompute")
    func repairsWhatWasMissed() async throws {
        let stack = try await AggregatorStack.start(storeArguments: ["--tombstone-grace", "0"])
        defer { stack.stopNow() }
        try await stack.session("seen", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:10"))
        try await stack.waitForSummary("2026-11-20") { $0?.learning == 600 }
        await stack.kill()
        try await stack.session("missed", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:20"))
        try await Task.sleep(for: .milliseconds(50))
        let purged = try await stack.harness.storeClient().call(StoreMethods.purge, PurgeParams())
        #expect(purged.watchHorizon > 0)
        try await stack.restart()
        try await stack.settle(sessions: 1)
        #expect(try await stack.summary("2026-11-20")?.learning == 600, "the purged change was never seen")
        #expect(stack.aggregatorLog.contains("changes were purged from the store before the aggregator saw them"))

        let result = try await stack.local.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "emma"))
        #expect(result.daysChanged == ["\(stack.child.deviceId) 2026-11-20"])
        try await stack.waitForSummary("2026-11-20") { $0?.learning == 1800 }
        try await stack.waitForBalance { $0?.fields["pointsBalance"] == 30 }

        let parent = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: stack.family.parentCredential.token)))
        await expectError(.forbidden, containing: "local administration") {
            _ = try await parent.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "emma"))
        }
        await expectError(.notFound, containing: "no child noah") {
            _ = try await stack.local.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "noah"))
        }
    }
}
