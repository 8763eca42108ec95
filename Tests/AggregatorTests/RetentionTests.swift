import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator: retention rolls old weeks up and prunes their detail", .serialized)
struct RetentionTests {
    /// Days relative to today in the family's zone, and the first day retention keeps.
    struct Calendar {
        let today: String
        let cutoff: String

        init(_ stack: AggregatorStack) {
            self.today = stack.days.day(containing: Date())
            self.cutoff = stack.days.monday(of: stack.days.day(self.today, plus: -90)!)!
        }
    }

    @Test("rolling up keeps reports and the balance equal, prunes the old records, and writes weekly summaries")
    func totalsStayEqual() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        let days = stack.days
        let cal = Calendar(stack)
        let ago = { (count: Int) in days.day(cal.today, plus: -count)! }
        let sunday = days.day(cal.cutoff, plus: -1)!
        try await stack.rule(bundleId: "org.khan.app", "learning", pointsPerMinute: 2)
        try await stack.session("old1", app: "khan", from: stack.at("\(ago(120)) 10:00"), to: stack.at("\(ago(120)) 11:00"), bundleId: "org.khan.app")
        try await stack.session("old2", app: "khan", from: stack.at("\(ago(120)) 10:30"), to: stack.at("\(ago(120)) 11:30"), bundleId: "org.khan.app")
        try await stack.session("old3", app: "roblox", category: "reward", from: stack.at("\(ago(118)) 17:00"), to: stack.at("\(ago(118)) 17:30"))
        try await stack.session("edge", app: "khan", from: stack.at("\(sunday) 23:30"), to: stack.at("\(cal.cutoff) 00:30"), bundleId: "org.khan.app")
        try await stack.session("recent", app: "khan", from: stack.at("\(ago(2)) 08:00"), to: stack.at("\(ago(2)) 08:20"), bundleId: "org.khan.app")
        #expect(try await stack.ledger("redemption", 10, key: "old-treat", at: stack.at("\(ago(110)) 12:00")).allSucceeded)
        #expect(try await stack.ledger("adjustment", 25, key: "old-chores", at: stack.at("\(ago(100)) 12:00")).allSucceeded)
        #expect(try await stack.ledger("adjustment", 5, key: "new-chores").allSucceeded)
        try await stack.settle(sessions: 5)
        try await stack.waitForBalance { $0?.fields["pointsBalance"] != nil }
        let byWeek = ReportParams(family: "smith", child: "emma", from: ago(130), to: cal.today, by: .week)
        let byDay = ReportParams(family: "smith", child: "emma", from: ago(130), to: cal.today)
        let weeksBefore = try await stack.local.call(AggregatorMethods.report, byWeek)
        let daysBefore = try await stack.local.call(AggregatorMethods.report, byDay)
        let balanceBefore = try #require(try await stack.balance()?.fields)
        #expect(weeksBefore.learningSeconds == 5400 + 3600 + 1200 && weeksBefore.rewardSeconds == 1800)

        // The sealed days' ledger entries: one per day, or two for the first day when its two
        // sessions were counted in two batches (the second adds its difference).
        let sealedAccruals = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: "smith", zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry"))
            .records.filter { $0.recordName.hasPrefix("accrual-") && String($0.recordName.dropFirst("accrual-child-emma-".count).prefix(10)) < cal.cutoff }.count
        #expect((2...3).contains(sealedAccruals))
        let rolled = try #require(try await stack.local.call(AggregatorMethods.rollUp, RollUpParams(family: "smith")).families.first)
        #expect(rolled.sealedBefore == cal.cutoff)
        #expect(rolled.usageRecordsPruned == 3 && rolled.ledgerEntriesPruned == 2 && rolled.accrualsPruned == sealedAccruals, "\(rolled)")
        try await stack.settle(sessions: 2)

        // What was counted is still counted.
        #expect(try await stack.local.call(AggregatorMethods.report, byWeek) == weeksBefore)
        #expect(try await stack.local.call(AggregatorMethods.report, byDay) == daysBefore)
        #expect(try await stack.balance()?.fields["balanceSeconds"] == balanceBefore["balanceSeconds"])

        // The detail is gone from the store; the weeks are there.
        #expect(try await Self.names(stack, zone: stack.child.zone, type: "UsageRecord") == ["edge", "recent"])
        let ledger = try await Self.names(stack, zone: StoreNames.defaultZone, type: "PointsLedgerEntry")
        #expect(!ledger.contains("entry-old-treat") && !ledger.contains("entry-old-chores") && ledger.contains("entry-new-chores"))
        #expect(!ledger.contains("accrual-child-emma-\(ago(120))-1") && !ledger.contains("accrual-child-emma-\(sunday)-1"))
        #expect(ledger.contains("accrual-child-emma-\(cal.cutoff)-1") && ledger.contains("accrual-child-emma-\(ago(2))-1"))
        let weeks = try await Self.weeks(stack)
        let first = try #require(weeks["week-child-emma-\(days.monday(of: ago(120))!)"])
        #expect(first["totalLearningSeconds"]?.intValue == 5400 && first["pointsAccrued"]?.intValue == 180)
        let sum = { (field: String) in weeks.values.reduce(Int64(0)) { $0 + ($1[field]?.intValue ?? 0) } }
        #expect(sum("totalLearningSeconds") == 5400 + 1800 && sum("totalRewardSeconds") == 1800)
        #expect(sum("pointsRedeemed") == 10 && sum("pointsAdjusted") == 25 && sum("usageRecordsPruned") == 3 && sum("ledgerEntriesPruned") == 2)

        // Recompute from what the store still holds agrees.
        let recomputed = try await stack.local.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "emma"))
        #expect(recomputed.usageRecords == 2 && recomputed.ledgerEntries == 1)
        #expect(recomputed.daysChanged.isEmpty && recomputed.balanceSeconds == balanceBefore["balanceSeconds"]?.intValue)

        // Late usage for a sealed day is pruned, not counted; a late ledger entry is carried.
        try await stack.session("late", app: "khan", from: stack.at("\(ago(119)) 09:00"), to: stack.at("\(ago(119)) 10:00"), bundleId: "org.khan.app")
        #expect(try await stack.ledger("adjustment", 7, key: "late-chores", at: stack.at("\(ago(105)) 12:00")).allSucceeded)
        let before = balanceBefore["balanceSeconds"]?.intValue ?? 0
        try await stack.waitForBalance { $0?.fields["balanceSeconds"]?.intValue == before + 7 * 60 }
        try await stack.settle(sessions: 2)
        #expect(try await Self.names(stack, zone: stack.child.zone, type: "UsageRecord") == ["edge", "recent"])
        #expect(try await stack.local.call(AggregatorMethods.report, byWeek) == weeksBefore)
        #expect(try await Self.weeks(stack)["week-child-emma-\(days.monday(of: ago(105))!)"]?["pointsAdjusted"]?.intValue ?? 0 >= 7)

        // Across a restart, and rolling up again changes nothing.
        await stack.kill()
        try await stack.restart()
        #expect(try await stack.local.call(AggregatorMethods.report, byWeek) == weeksBefore)
        let again = try await stack.local.call(AggregatorMethods.rollUp, RollUpParams())
        #expect(again.families.map(\.weeks) == [[]])
        try await stack.settle(sessions: 2)
        #expect(try await stack.balance()?.fields["balanceSeconds"]?.intValue == before + 7 * 60)
    }

    @Test("rolling up as of a later day seals more; bad requests get clear errors")
    func asOfAndRefusals() async throws {
        try await AggregatorStack.inProcess { stack in
            let cal = Calendar(stack)
            let yesterday = stack.days.day(cal.today, plus: -1)!
            try await stack.session("s", from: stack.at("\(yesterday) 08:00"), to: stack.at("\(yesterday) 08:30"))
            try await stack.settle(sessions: 1)
            await expectError(.invalidParams, containing: "not be before today") {
                _ = try await stack.local.call(AggregatorMethods.rollUp, RollUpParams(asOf: yesterday))
            }
            await expectError(.invalidParams, containing: "YYYY-MM-DD") { _ = try await stack.local.call(AggregatorMethods.rollUp, RollUpParams(asOf: "soon")) }
            await expectError(.notFound, containing: "jones") { _ = try await stack.local.call(AggregatorMethods.rollUp, RollUpParams(family: "jones")) }
            let parent = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: stack.family.parentCredential.token)))
            await expectError(.forbidden, containing: "local administration") { _ = try await parent.call(AggregatorMethods.rollUp, RollUpParams()) }

            let later = stack.days.day(cal.today, plus: 200)!
            let rolled = try await stack.local.call(AggregatorMethods.rollUp, RollUpParams(family: "smith", asOf: later))
            #expect(rolled.families.first?.usageRecordsPruned == 1)
            try await stack.settle(sessions: 0)
            #expect(try await Self.names(stack, zone: stack.child.zone, type: "UsageRecord").isEmpty)
            let report = try await stack.local.call(AggregatorMethods.report, ReportParams(family: "smith", child: "emma", from: yesterday, to: yesterday))
            #expect(report.learningSeconds == 1800, "sealed days are still reported")
            #expect(try await stack.local.call(AggregatorMethods.status, Empty()).days == 1)
        }
    }

    @Test("--retention-days out of range is refused at start")
    func badRetentionDays() async throws {
        let result = try await runCommand(Binaries.path("screentime-aggregatord"), ["--retention-days", "3"])
        #expect(result.status == 64 && result.stderr.contains("--retention-days must be between 7 and 3660"))
    }

    static func names(_ stack: AggregatorStack, zone: String, type: String) async throws -> [String] {
        try await stack.parentStore.call(StoreMethods.query, QueryParams(family: "smith", zone: zone, recordType: type, limit: 400)).records.map(\.recordName).sorted()
    }

    static func weeks(_ stack: AggregatorStack) async throws -> [String: [String: JSONValue]] {
        let records = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: "smith", zone: StoreNames.defaultZone, recordType: "WeeklySummary", limit: 400)).records
        return Dictionary(uniqueKeysWithValues: records.map { ($0.recordName, $0.fields) })
    }
}
