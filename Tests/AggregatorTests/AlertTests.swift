import AggregatorAPI
import Foundation
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator: alerts to parents through push, once per crossing", .serialized)
struct AlertTests {
    /// Sets the family's alert thresholds, as a parent.
    static func thresholds(_ stack: AggregatorStack, _ fields: [String: JSONValue]) async throws {
        let result = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "Family", recordName: stack.family.family, fields: fields),
        ], savePolicy: .changedKeys))
        #expect(result.allSucceeded)
    }

    @Test("reward time over the day's limit alerts the parents once; more play that day does not alert again; another day does")
    func rewardToday() async throws {
        try await AggregatorStack.inProcess(withPush: true) { stack in
            try await Self.thresholds(stack, ["alertRewardMinutesPerDay": 20, "alertOnBalanceExhausted": false])
            let alerts = parentAlerts(stack)
            try await stack.session("p1", app: "roblox", category: "reward", from: stack.at("2026-11-20 16:00"), to: stack.at("2026-11-20 16:15"))
            try await stack.settle(sessions: 1)
            try await alerts.expectQuiet(beyond: 0)
            try await stack.session("p2", app: "roblox", category: "reward", from: stack.at("2026-11-20 17:00"), to: stack.at("2026-11-20 17:10"))
            let first = try await alerts.wait(for: 1)
            #expect(first[0].alert?.title == "Emma: 25 min of reward apps on 2026-11-20" && first[0].priority == .high)
            #expect(first[0].fields?["alert"] == "rewardToday" && first[0].fields?["limitMinutes"] == 20)
            // Kept before it was sent: an AuditEntry the parents can read (the dashboard's Activity page).
            let history = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: StoreNames.defaultZone, recordType: "AuditEntry", limit: 100))
            let kept = history.records.filter { $0.fields["action"] == "alert.rewardToday" }
            #expect(kept.count == 1 && kept.first?.fields["actor"] == "server" && kept.first?.fields["target"] == "emma", "\(history.records)")
            #expect(kept.first?.fields["metadata"]?.stringValue?.contains("Emma: 25 min of reward apps on 2026-11-20") == true)
            try await stack.session("p3", app: "roblox", category: "reward", from: stack.at("2026-11-20 18:00"), to: stack.at("2026-11-20 18:10"))
            try await stack.settle(sessions: 3)
            try await alerts.expectQuiet(beyond: 1)
            try await stack.session("p4", app: "roblox", category: "reward", from: stack.at("2026-11-21 16:00"), to: stack.at("2026-11-21 16:30"))
            let second = try await alerts.wait(for: 2)
            #expect(second[1].fields?["day"] == "2026-11-21")
        }
    }

    @Test("a blocked app used anyway is recorded, earns and spends nothing, and alerts the parents once per device, app and day, by name")
    func blockedAppUsed() async throws {
        let clock = SimulatedClock(Date())
        try await AggregatorStack.inProcess(withPush: true, storeClock: { clock.now }) { stack in
            clock.set(stack.at("2026-11-21 08:00"))
            let alerts = parentAlerts(stack)
            let saved = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                RecordSave(recordType: "AppRule", recordName: "app-com.youtube", fields: [
                    "familyRef": .reference(stack.family.family, zone: StoreNames.defaultZone), "bundleId": "com.youtube", "classification": "reward",
                    "blockingEnabled": true, "displayName": "YouTube",
                ]),
            ], atomic: true))
            #expect(saved.allSucceeded)
            // The block counts from its save on: days after it (a block never reaches back).
            let day = "2026-11-22", next = "2026-11-23"
            clock.set(stack.at("2026-11-24 12:00"))
            try await stack.session("k1", from: stack.at("\(day) 09:00"), to: stack.at("\(day) 09:30"))
            try await stack.session("y1", app: "com.youtube", category: "reward", from: stack.at("\(day) 16:00"), to: stack.at("\(day) 16:45"))
            let alert = try await alerts.wait(for: 1)
            #expect(alert[0].alert?.title == "YouTube was used for 45 min while blocked on emma's device", "\(String(describing: alert[0].alert))")
            #expect(alert[0].fields?["alert"] == "blockedApp" && alert[0].fields?["seconds"] == 2700)
            // Recorded in the day, marked blocked; not counted as reward time.
            let summary = try await stack.waitForSummary(day) { $0?.apps.count == 2 }
            #expect(summary?.reward == 0 && summary?.learning == 1800)
            let balance = try await stack.waitForBalance { $0?.fields["pointsBalance"]?.intValue == 30 }
            #expect(balance?.fields["rewardSecondsUsed"]?.intValue == 0, "blocked use spent earned time: \(String(describing: balance?.fields))")
            // More of it that day: no second alert; the next day: one more.
            try await stack.session("y2", app: "com.youtube", category: "reward", from: stack.at("\(day) 18:00"), to: stack.at("\(day) 18:10"))
            try await stack.settle(sessions: 3)
            try await alerts.expectQuiet(beyond: 1)
            try await stack.session("y3", app: "com.youtube", category: "reward", from: stack.at("\(next) 18:00"), to: stack.at("\(next) 18:10"))
            let second = try await alerts.wait(for: 2)
            #expect(second[1].fields?["day"] == .string(next))
        }
    }

    @Test("rules count from their save: a session across a rate change counts each part at its rate; blocking an app leaves what it was used for before as it was (no refund, no alert) and blocks only what comes after")
    func rulesOverTime() async throws {
        let clock = SimulatedClock(Date())
        try await AggregatorStack.inProcess(withPush: true, storeClock: { clock.now }) { stack in
            clock.set(stack.at("2026-11-21 08:00"))
            let alerts = parentAlerts(stack)
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 2)
            try await stack.rule(bundleId: "com.youtube", "reward", pointsPerMinute: 0)
            // Yesterday: 40 min of learning (80 points), 20 min of YouTube, allowed then.
            try await stack.session("k1", from: stack.at("2026-11-20 09:00"), to: stack.at("2026-11-20 09:40"))
            try await stack.session("y1", app: "com.youtube", category: "reward", from: stack.at("2026-11-20 16:00"), to: stack.at("2026-11-20 16:20"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"]?.intValue == 80 && $0?.fields["rewardSecondsUsed"]?.intValue == 1200 }

            // At 10:00, YouTube is blocked and Khan Academy earns 4 a minute.
            clock.set(stack.at("2026-11-21 10:00"))
            let saved = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: stack.family.family, zone: StoreNames.defaultZone, saves: [
                RecordSave(recordType: "AppRule", recordName: "rule-com.youtube", fields: [
                    "familyRef": .reference(stack.family.family, zone: StoreNames.defaultZone), "bundleId": "com.youtube", "classification": "reward",
                    "pointsPerMinute": 0, "isEnabled": true, "blockingEnabled": true, "displayName": "YouTube",
                ]),
            ], savePolicy: .allKeys, atomic: true))
            #expect(saved.allSucceeded)
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 4)
            _ = try await AggregatorServiceTests.statusOnceCaughtUp(stack)
            try await stack.settle(sessions: 2)
            let unchanged = try await stack.balance()
            #expect(unchanged?.fields["pointsBalance"]?.intValue == 80 && unchanged?.fields["rewardSecondsUsed"]?.intValue == 1200,
                    "a rule change rewrote the past: \(String(describing: unchanged?.fields))")
            try await alerts.expectQuiet(beyond: 0)

            // A session across the rate change: 10 min before it at 2, 10 min after at 4.
            clock.set(stack.at("2026-11-21 10:30"))
            try await stack.session("k2", from: stack.at("2026-11-21 09:50"), to: stack.at("2026-11-21 10:10"))
            // YouTube after the block: recorded, not spent, alerted.
            try await stack.session("y2", app: "com.youtube", category: "reward", from: stack.at("2026-11-21 10:00"), to: stack.at("2026-11-21 10:05"))
            let blocked = try await alerts.wait(for: 1)
            #expect(blocked[0].fields?["alert"] == "blockedApp" && blocked[0].fields?["seconds"] == 300)
            let balance = try await stack.waitForBalance { ($0?.fields["pointsBalance"]?.intValue ?? 0) > 80 }
            #expect(balance?.fields["pointsBalance"]?.intValue == Int64(80 + 20 + 40), "10 min at 2 and 10 min at 4: \(String(describing: balance?.fields))")
            #expect(balance?.fields["rewardSecondsUsed"]?.intValue == 1200, "blocked use spent earned time")
        }
    }

    @Test("running out of earned time alerts once, as the shield goes up; earning it back re-arms the alert")
    func balanceExhausted() async throws {
        try await AggregatorStack.inProcess(withPush: true) { stack in
            let alerts = parentAlerts(stack)
            try await stack.session("learn", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:05"))
            try await stack.session("play", app: "roblox", category: "reward", from: stack.at("2026-11-20 16:00"), to: stack.at("2026-11-20 16:10"))
            let first = try await alerts.wait(for: 1)
            #expect(first[0].alert?.title == "Emma has used up their earned time" && first[0].fields?["alert"] == "balanceExhausted")
            try await stack.session("play-more", app: "roblox", category: "reward", from: stack.at("2026-11-20 17:00"), to: stack.at("2026-11-20 17:05"))
            try await stack.settle(sessions: 3)
            try await alerts.expectQuiet(beyond: 1)
            try await stack.session("learn-more", from: stack.at("2026-11-21 08:00"), to: stack.at("2026-11-21 08:30"))
            try await stack.waitForBalance { $0?.fields["shielded"] == false }
            try await stack.session("play-again", app: "roblox", category: "reward", from: stack.at("2026-11-21 16:00"), to: stack.at("2026-11-21 16:30"))
            _ = try await alerts.wait(for: 2)
        }
    }

    @Test("a device whose newest usage is older than the family's limit alerts once; new usage re-arms it")
    func noData() async throws {
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.alertCheckInterval = .milliseconds(100) }) { stack in
            try await Self.thresholds(stack, ["alertNoDataHours": 2, "alertOnBalanceExhausted": false])
            let alerts = parentAlerts(stack)
            let now = Date()
            try await stack.session("recent", from: now.addingTimeInterval(-3600), to: now.addingTimeInterval(-1800))
            try await stack.settle(sessions: 1)
            try await alerts.expectQuiet(beyond: 0)
            // Only an older session: its newest usage is now three hours old.
            try await stack.deleteSession("recent")
            try await stack.session("old", from: now.addingTimeInterval(-4 * 3600), to: now.addingTimeInterval(-3 * 3600))
            let first = try await alerts.wait(for: 1)
            #expect(first[0].alert?.title == "No usage from Emma's device \(stack.child.deviceId) for over 2 h" && first[0].fields?["alert"] == "noData")
            try await alerts.expectQuiet(beyond: 1)
            try await stack.session("fresh", from: now.addingTimeInterval(-600), to: now)
            try await waitUntil("the fresh usage re-arming the alert", detail: stack.aggregatorLog) {
                stack.aggregatorLog.contains("quiet-device alerts re-armed")
            }
            try await stack.deleteSession("fresh")
            _ = try await alerts.wait(for: 2)
        }
    }

    @Test("alerts wait in the outbox while push is down, without holding up the summaries, and go out once it is back")
    func pushAway() async throws {
        let stack = try await AggregatorStack.start(withPush: false)
        defer { stack.stopNow() }
        try await Self.thresholds(stack, ["alertRewardMinutesPerDay": 5, "alertOnBalanceExhausted": false])
        try await stack.session("p1", app: "roblox", category: "reward", from: stack.at("2026-11-20 16:00"), to: stack.at("2026-11-20 16:10"))
        try await stack.waitForSummary("2026-11-20") { $0?.reward == 600 }
        // While the alert keeps failing to go out (each try spends seconds connecting),
        // summaries are still written at once.
        for day in 21...23 {
            try await stack.session("l\(day)", from: stack.at("2026-11-\(day) 09:00"), to: stack.at("2026-11-\(day) 09:30"))
            let written = try await stack.waitForSummary("2026-11-\(day)", timeout: .seconds(5)) { $0?.learning == 1800 }
            #expect(written?.learning == 1800, "a summary waited for push")
        }
        let push = try await ServiceProcess.start("screentime-pushd", service: "push", in: stack.harness.directory, stateDirectory: stack.harness.state)
        defer { push.stopNow() }
        let alerts = parentAlerts(stack)
        let received = try await alerts.wait(for: 1, timeout: .seconds(20))
        #expect(received[0].fields?["alert"] == "rewardToday")
    }
}

/// The family's parent listening on push for alerts (messages), from before push is up.
func parentAlerts(_ stack: AggregatorStack) -> Listening {
    let client = RPCClient(configuration: ClientConfiguration(
        socketPath: stack.harness.socketPath(for: "push"), connectTimeout: .seconds(20), auth: Auth(token: stack.family.parentCredential.token)))
    return Listening(client, reconnecting: true, only: .message)
}
