import AggregatorAPI
import Foundation
import PushAPI
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// The weekly digest through the aggregator's real server: each child's week beside the
/// week before, read on demand and sent to the parents once, at the family's chosen day
/// and time in its own time zone, not again after a restart.
@Suite("Aggregator: the weekly digest", .serialized)
struct DigestTests {
    @Test("the digest says each child's week (time, points, requests, chores, top apps) beside the week before; it comes at the family's hour in its zone, once, not again after a restart")
    func weeklyDigest() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-22 10:00"))  // the Sunday of the week before
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) },
                                            storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            try await stack.familySettings(["digestTime": "19:30"])
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 1)
            try await stack.ruleName("org.khan", "Khan Academy")
            try await stack.session("before", from: paris.at("2026-11-18 17:00"), to: paris.at("2026-11-18 17:20"))
            // The week before had its digest (at 19:30 that Sunday); now the week itself.
            clock.set(paris.at("2026-11-29 10:00"))
            try await stack.session("learn", from: paris.at("2026-11-24 17:00"), to: paris.at("2026-11-24 18:00"))
            try await stack.session("play", app: "com.youtube", category: "reward", from: paris.at("2026-11-25 18:00"), to: paris.at("2026-11-25 18:30"))
            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 30))
            _ = try await stack.answer(request.id, approve: true, token: stack.family.parentCredential.token).get()
            let chore = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Dishes", points: 10))
            let done = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: chore.id))
            _ = try await stack.answerChore(done.id, token: stack.family.parentCredential.token).get()
            _ = try await stack.ledger("redemption", 5, key: "ice-cream", at: clock.now)
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == .int(115) }  // 20 + 60 learning, 30 approved, 10 for the chore, 5 redeemed
            let mum = parentAlerts(stack)

            let digest = try await stack.asParent(AggregatorMethods.digest, DigestParams())
            #expect(digest.from == "2026-11-23" && digest.to == "2026-11-29" && digest.timeZone == "Europe/Paris")
            let emma = try #require(digest.children.first)
            #expect(emma.learningSeconds == DigestFigure(value: 3600, previous: 1200) && emma.rewardSeconds == DigestFigure(value: 1800, previous: 0))
            #expect(emma.pointsEarned == DigestFigure(value: 100, previous: 20) && emma.pointsSpent.value == 5)
            #expect(emma.requestsAsked == 1 && emma.requestsApproved == 1 && emma.choresDone == 1)
            #expect(emma.topApps.map(\.name) == ["Khan Academy", "com.youtube"])
            #expect(emma.sentence == "Emma: 1 h learning (+40 min); 30 min reward (+30 min); 100 points earned, 5 spent; 1 request (1 yes, 0 no); 1 chore done; most used: Khan Academy, com.youtube.",
                    "\(emma.sentence)")
            #expect(digest.title == "The week of 23 Nov to 29 Nov")
            let before = try await stack.asParent(AggregatorMethods.digest, DigestParams(through: "2026-11-22"))
            #expect(before.children.first?.learningSeconds.value == 1200)

            // The family's 19:30, not the server's: quiet a moment before, then once.
            _ = try await mum.event("choreAnswered")  // what waited for her phone has come
            clock.set(paris.at("2026-11-29 19:29:30"))
            try await mum.expectQuiet(beyond: mum.notifications.count, for: .milliseconds(300))
            // (The week before's, missed while the clock jumped a week, came at once.)
            let thisWeek = { (note: PushNotification) in note.fields?["event"] == "weeklyDigest" && note.fields?["to"] == "2026-11-29" }
            #expect(!mum.notifications.contains(where: thisWeek), "the digest before its time")
            clock.set(paris.at("2026-11-29 19:30:05"))
            let sent = try await eventually("this week's digest", timeout: .seconds(20)) { seen in
                seen = "\(mum.notifications.map { $0.alert?.title ?? "" })"
                return mum.notifications.first(where: thisWeek)
            }
            #expect(sent.alert?.title == "The week of 23 Nov to 29 Nov" && sent.alert?.body == emma.sentence, "\(String(describing: sent.alert))")
            try await stack.restartEngine()
            clock.set(paris.at("2026-11-29 21:00"))
            try await mum.expectQuiet(beyond: mum.notifications.count, for: .milliseconds(500))
            #expect(Set(mum.notifications.filter(thisWeek).map(\.seq)).count == 1, "sent once (push may deliver it again to a listener that reconnects)")

            // Bad input is refused in words; a child may not read it.
            await expectError(.invalidParams) { _ = try await stack.asParent(AggregatorMethods.digest, DigestParams(through: "last week")) }
            await expectError(.invalidParams) { _ = try await stack.asParent(AggregatorMethods.digest, DigestParams(through: "2026-02-31")) }
            await expectError(.forbidden) { _ = try await stack.asChild(AggregatorMethods.digest, DigestParams()) }
            await expectError(.invalidParams) { _ = try await stack.local.call(AggregatorMethods.digest, DigestParams()) }
            #expect(try await stack.local.call(AggregatorMethods.digest, DigestParams(family: stack.family.family)).children.count == 1)
            try await stack.settle(sessions: 3)
            let log = try await stack.auditWords()
            #expect(log.contains("Mum changed the family's settings: the weekly digest on Sundays at 19:30"), "\(log)")
        }
    }
}

extension DigestTests {
    @Test("a digest whose moment passed while the aggregator was stopped over the week's end is sent when it starts on Monday, once")
    func missedOverTheWeekend() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-29 10:00"))  // Sunday
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .seconds(3600) },
                                            storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            try await stack.session("learn", from: paris.at("2026-11-27 17:00"), to: paris.at("2026-11-27 17:30"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 30 }
            let mum = parentAlerts(stack)
            // Stopped before 18:00 on Sunday, started at 00:30 on Monday.
            clock.set(paris.at("2026-11-30 00:30"))
            try await stack.restartEngine()
            let sent = try await mum.event("weeklyDigest")
            #expect(sent.fields?["to"] == "2026-11-29" && sent.alert?.title == "The week of 23 Nov to 29 Nov")
            try await stack.restartEngine()
            try await mum.expectQuiet(beyond: mum.notifications.count, for: .milliseconds(500))
            // Counted by their number: push delivers at least once (a listener that reconnects may hear one again).
            #expect(Set(mum.notifications.filter { $0.fields?["event"] == "weeklyDigest" }.map(\.seq)).count == 1,
                    "\(mum.notifications.map { "\($0.seq) \($0.fields ?? [:]) \($0.alert?.title ?? "")" })")
        }
    }
}

extension AggregatorStack {
    /// A name for an app, on its family rule.
    func ruleName(_ bundleId: String, _ name: String) async throws {
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "AppRule", recordName: "rule-\(bundleId)", fields: ["displayName": .string(name)]),
        ], savePolicy: .changedKeys, atomic: true))
        #expect(result.allSucceeded)
    }
}
