import AggregatorAPI
import Foundation
import RPCCore
import StoreAPI
import Testing
import TestSupport
import UsageModel

@Suite("Aggregator: usage into daily summaries, in the family's local days", .serialized)
struct DailySummaryTests {
    @Test("a session across midnight is split between the two local days; the summary names its day and child")
    func acrossMidnight() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("s1", from: stack.at("2026-11-20 23:30"), to: stack.at("2026-11-21 00:45"))
            let first = try await stack.waitForSummary("2026-11-20") { $0?.learning == 1800 }
            let second = try await stack.waitForSummary("2026-11-21") { $0?.learning == 2700 }
            #expect(first?.date == stack.at("2026-11-20 00:00"), "the local midnight the day starts at")
            #expect(first?.childRef == "child-emma" && second?.apps.map(\.app) == ["org.khan"])
            #expect(first?.points == 30 && second?.points == 45, "the default: 1 point per learning minute")
        }
    }

    @Test("daylight-saving days in Europe/Paris have 23 and 25 hours")
    func daylightSaving() async throws {
        try await AggregatorStack.inProcess { stack in
            // Spring forward: 29 March 2026 lasts 23 hours.
            try await stack.session("spring", from: stack.at("2026-03-29 00:00"), to: stack.at("2026-03-30 00:00"))
            // Fall back: 25 October 2026 lasts 25 hours (a session counts at most 24: two halves).
            try await stack.session("fall-1", from: stack.at("2026-10-25 00:00"), to: stack.at("2026-10-25 12:00"))
            try await stack.session("fall-2", from: stack.at("2026-10-25 12:00"), to: stack.at("2026-10-26 00:00"))
            try await stack.waitForSummary("2026-03-29") { $0?.learning == 23 * 3600 }
            try await stack.waitForSummary("2026-10-25") { $0?.learning == 25 * 3600 }
            let afterSpring = try await stack.summary("2026-03-30")
            let afterFall = try await stack.summary("2026-10-26")
            #expect(afterSpring == nil && afterFall == nil, "nothing spills into the next day")
        }
    }

    @Test("overlapping sessions of the same app count once; another app at the same time counts for itself")
    func overlaps() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("a1", app: "org.khan", from: stack.at("2026-11-20 10:00"), to: stack.at("2026-11-20 11:00"))
            try await stack.session("a2", app: "org.khan", from: stack.at("2026-11-20 10:30"), to: stack.at("2026-11-20 11:30"))
            try await stack.session("a3", app: "org.khan", from: stack.at("2026-11-20 10:40"), to: stack.at("2026-11-20 10:50"))
            try await stack.session("b1", app: "com.duolingo", from: stack.at("2026-11-20 10:00"), to: stack.at("2026-11-20 10:30"))
            let summary = try await stack.waitForSummary("2026-11-20") { $0?.learning == 5400 + 1800 }
            #expect(summary?.apps.map(\.app) == ["org.khan", "com.duolingo"], "most used first")
            #expect(summary?.apps.map(\.seconds) == [5400, 1800])
        }
    }

    @Test("a record saved again with the same content counts once; an update and a delete correct the totals")
    func duplicatesUpdatesDeletes() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("s1", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:20"))
            try await stack.session("s1", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:20"))
            try await stack.session("s2", from: stack.at("2026-11-20 14:00"), to: stack.at("2026-11-20 14:10"))
            try await stack.waitForSummary("2026-11-20") { $0?.learning == 1800 }
            // Moved to the next day: the first day loses it, the next gains it.
            try await stack.session("s1", from: stack.at("2026-11-21 09:00"), to: stack.at("2026-11-21 09:30"))
            try await stack.waitForSummary("2026-11-20") { $0?.learning == 600 }
            try await stack.waitForSummary("2026-11-21") { $0?.learning == 1800 }
            try await stack.deleteSession("s2")
            try await stack.waitForSummary("2026-11-20") { $0 == nil }
            try await stack.settle(sessions: 1)
        }
    }

    @Test("a rule for an app nobody used changes no summary, accrual or balance (no new change tag, so no notification); a new rate for an app used changes nothing earned before it, and counts from its save")
    func sameNumbersAreNoChange() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 1)
            try await stack.session("s1", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:20"))
            let summary = try #require(try await stack.waitForSummary("2026-11-20") { $0?.points == 20 })
            let balance = try #require(try await stack.waitForBalance { $0?.fields["pointsBalance"]?.intValue == 20 })
            let accrual = "accrual-\(stack.childRef)-2026-11-20-1"
            let tags = { () async throws -> [String?] in
                let day = try await stack.summary("2026-11-20")?.changeTag
                let records = try await stack.parentStore.call(StoreMethods.fetch, FetchParams(
                    family: stack.family.family, zone: StoreNames.defaultZone, recordNames: [accrual, "balance-\(stack.childRef)"])).records
                return [day] + [accrual, "balance-\(stack.childRef)"].map { name in records.first { $0.recordName == name }?.changeTag }
            }
            // The day's ledger entry is written in the same pass as the balance, or the next
            // (a pass reads each outbox in turn): wait for every write.
            try await stack.settle(sessions: 1)
            let before = try await tags()
            #expect(before == [summary.changeTag, before[1], balance.changeTag] && before[1] != nil, "\(before)")

            for round in 1...3 {
                try await stack.rule(bundleId: "com.nobody.uses\(round)", "learning", pointsPerMinute: 3)
                _ = try await AggregatorServiceTests.statusOnceCaughtUp(stack)
                try await stack.settle(sessions: 1)
                let now = try await tags()
                #expect(now == before, "rule \(round) for an unused app rewrote a record: \(before) → \(now)")
            }

            // A new rate for the app used: what was earned stays (the same records); usage
            // after it earns at the new rate, and the balance grows by that alone.
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 3)
            _ = try await AggregatorServiceTests.statusOnceCaughtUp(stack)
            try await stack.settle(sessions: 1)
            #expect(try await tags() == before, "a rate change rewrote what was earned")
            let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.up))  // whole seconds: a minute stays a minute
            try await stack.session("s2", from: now, to: now.addingTimeInterval(60))
            try await stack.waitForBalance { $0?.fields["pointsBalance"]?.intValue == 23 }
        }
    }

    @Test("points: each learning app earns floor(seconds × its points per minute / 60) a day; reward and disabled apps earn none")
    func points() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.rule(bundleId: "org.khan.app", "learning", pointsPerMinute: 3)
            try await stack.rule(bundleId: "com.roblox", "reward", pointsPerMinute: 5)
            try await stack.rule(bundleId: "com.youtube", "learning", pointsPerMinute: 2, enabled: false)
            // 10 min 50 s at 3/min: 32.5, rounded down.
            try await stack.session("k1", app: "khan", from: stack.at("2026-11-20 08:00:00"), to: stack.at("2026-11-20 08:10:50"), bundleId: "org.khan.app")
            // The child calls it learning; the parents' rule says reward.
            try await stack.session("r1", app: "roblox", category: "learning", from: stack.at("2026-11-20 17:00"), to: stack.at("2026-11-20 17:30"), bundleId: "com.roblox")
            try await stack.session("y1", app: "youtube", from: stack.at("2026-11-20 18:00"), to: stack.at("2026-11-20 18:30"), bundleId: "com.youtube")
            // Split across two sessions of the same day, 20 s each at 3/min: 2 points, not 1 + 1.
            try await stack.session("k2", app: "khan", from: stack.at("2026-11-21 08:00:00"), to: stack.at("2026-11-21 08:00:20"), bundleId: "org.khan.app")
            try await stack.session("k3", app: "khan", from: stack.at("2026-11-21 09:00:00"), to: stack.at("2026-11-21 09:00:20"), bundleId: "org.khan.app")
            let day = try await stack.waitForSummary("2026-11-20") { $0?.reward == 1800 && $0?.learning == 650 }
            #expect(day?.points == 32)
            #expect(day?.apps.first { $0.app == "youtube" }?.category == nil, "a disabled app counts for nothing")
            try await stack.waitForSummary("2026-11-21") { $0?.points == 2 && $0?.learning == 40 }

            // A new rate applies from its save on: what was earned before stays as it was,
            // and usage after it earns at the new rate.
            try await stack.rule(bundleId: "org.khan.app", "learning", pointsPerMinute: 6)
            let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.up))  // whole seconds: a minute stays a minute
            let today = stack.days.day(containing: now)
            try await stack.session("k4", app: "khan", from: now, to: now.addingTimeInterval(60), bundleId: "org.khan.app")
            try await stack.waitForSummary(today) { $0?.points == 6 }
            try await stack.settle(sessions: 6)
            #expect(try await stack.summary("2026-11-20")?.points == 32, "a rate change rewrote a past day")
        }
    }

    @Test("killed in the middle of ingesting, restarted: every record counts exactly once")
    func killedMidIngest() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        let start = stack.at("2026-11-20 08:00")
        for batch in 0..<6 {
            switch batch {
            case 2: await stack.kill()  // batches 2 to 4 pile up while it is down
            case 5:
                try await stack.restart()
                try await Task.sleep(for: .milliseconds(30))
                await stack.kill()  // in the middle of catching up
                try await stack.restart()
            default: break
            }
            for index in 0..<40 {
                let n = batch * 40 + index
                let from = start.addingTimeInterval(Double(n) * 120)
                try await stack.session("s\(n)", from: from, to: from.addingTimeInterval(60))
            }
        }
        try await stack.settle(sessions: 240)
        #expect(try await stack.summary("2026-11-20")?.learning == 240 * 60)
        let status = try await stack.local.call(AggregatorMethods.status, Empty())
        #expect(status.days == 1 && status.pendingSummaries == 0)
    }
}
