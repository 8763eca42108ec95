import AggregatorAPI
import AggregatorEngine
import Foundation
import PairingAPI
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport
import UsageModel

/// Everyday parenting through the aggregator's real server: a child asks for more time,
/// parents answer (the first answer wins), grant and take away time, pause and resume; the
/// aggregator's clock is the test's, so requests expire and pauses end when it says.
@Suite("Aggregator: asking for more time, answers, grants, pauses", .serialized)
struct ParentingTests {
    @Test("the child asks; two parents answer at once from two devices: one wins, the other gets conflict naming who and how; the child hears one answer and the shield lifts")
    func twoParentsRace() async throws {
        let clock = SimulatedClock(Date())
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now } }) { stack in
            try await stack.caughtUp()
            try await stack.spendAll()
            let dad = try await stack.enrollDad()
            let child = stack.childAlerts()
            let mum = parentAlerts(stack)

            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 30, app: "com.youtube", appName: "YouTube", note: "homework done"))
            #expect(request.status == .open && request.minutes == 30 && request.childName == "Emma" && request.whilePaused == false)
            #expect(request.sentence == "Emma asks for 30 min of YouTube: “homework done”")
            let alert = try await mum.event("timeRequest")
            #expect(alert.alert?.title == "Emma asks for 30 min of YouTube" && alert.alert?.body == "“homework done”")
            #expect(alert.fields?["request"] == .string(request.id) && alert.fields?["event"] == "timeRequest")

            // Both answer at once: exactly one answer is taken.
            async let fromMum = stack.answer(request.id, approve: true, reply: "well done", token: stack.family.parentCredential.token)
            async let fromDad = stack.answer(request.id, approve: false, reply: "not tonight", token: dad.token)
            let answers = [await fromMum, await fromDad]
            let won = answers.compactMap { try? $0.get() }
            let lost = answers.compactMap { result -> RPCError? in if case .failure(let error) = result { return error } else { return nil } }
            try #require(won.count == 1 && lost.count == 1, "answers: \(answers)")
            #expect(lost[0].code == .conflict)
            let winner = won[0]
            #expect(lost[0].message.contains("\(winner.answeredBy ?? "?") already \(winner.status == .approved ? "approved" : "denied") this request"),
                    "the loser is told who answered and how: \(lost[0].message)")
            #expect(lost[0].data?.objectValue?["status"] == .string(winner.status.rawValue))

            // The child hears the one answer.
            let heard = try await child.event("timeRequestAnswered")
            #expect(heard.fields?["status"] == .string(winner.status.rawValue))
            #expect(heard.alert?.title == (winner.status == .approved ? "\(winner.answeredBy!) said yes: 30 min more" : "\(winner.answeredBy!) said no to 30 min of YouTube"))
            try await child.expectQuiet(beyond: child.notifications.count)
            #expect(child.notifications.filter { $0.fields?["event"] == "timeRequestAnswered" }.count == 1)

            // Every parent's list shows it answered; an approval is an adjustment by the
            // approving parent that lifts the shield.
            let listed = try await stack.asParent(AggregatorMethods.listRequests, ListRequestsParams(), token: dad.token).requests
            #expect(listed.map(\.id) == [request.id] && listed[0].status == winner.status)
            if winner.status == .approved {
                try await stack.waitForBalance { $0?.fields["shielded"] == false && $0?.fields["balanceSeconds"] == 1800 }
                // The entry is written beside the balance, in the same pass or the next.
                try await stack.settle(sessions: 2)
                let entry = try await stack.parentStore.call(StoreMethods.fetch, FetchParams(family: stack.family.family, zone: StoreNames.defaultZone, recordNames: ["grant-\(request.id)"])).records.first
                #expect(entry?.fields["type"] == "adjustment" && entry?.fields["amount"] == 30)
                #expect(entry?.fields["actorParentRef"]?.objectValue?["recordName"] == .string("parent-\(winner.answeredByDeviceId ?? "")"))
            } else {
                try await stack.settle(sessions: 2)
                #expect(try await stack.balance()?.fields["shielded"] == true)
            }
            // The store's copy, and the family's log in words, written by the server.
            try await stack.settle(sessions: 2)
            let record = try await stack.parentStore.call(StoreMethods.fetch, FetchParams(family: stack.family.family, zone: StoreNames.defaultZone, recordNames: [request.id])).records.first
            #expect(record?.recordType == "TimeRequest" && record?.fields["status"] == .string(winner.status.rawValue) && record?.fields["answeredBy"] == winner.answeredBy.map(JSONValue.string))
            let log = try await stack.auditWords()
            #expect(log.contains("Emma asked for 30 min of YouTube: “homework done”"), "\(log)")
            #expect(log.contains(winner.status == .approved ? "Mum approved 30 min for Emma: “well done”" : "Dad said no to Emma's 30 min of YouTube: “not tonight”"), "\(log)")
        }
    }

    @Test("an unanswered request expires at the family's setting; an answer after that is a conflict; the child can ask again")
    func requestExpires() async throws {
        let clock = SimulatedClock(Date())
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) }) { stack in
            try await stack.caughtUp()
            try await stack.familySettings(["requestExpiryMinutes": 30])
            try await stack.caughtUp()
            let child = stack.childAlerts()
            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(restOfDay: true))
            #expect(request.restOfDay && request.minutes >= 1 && request.expiresAt.timeIntervalSince(request.createdAt) == 1800)
            clock.set(clock.now.addingTimeInterval(29 * 60))
            try await child.expectQuiet(beyond: 0, for: .milliseconds(300))
            clock.set(clock.now.addingTimeInterval(2 * 60))
            let heard = try await child.wait(for: 1, timeout: .seconds(20))
            #expect(heard[0].fields?["event"] == "timeRequestExpired" && heard[0].alert?.title == "Nobody answered your request for the rest of the day")
            let late = await stack.answer(request.id, approve: true, token: stack.family.parentCredential.token)
            #expect((try? late.get()) == nil)
            if case .failure(let error) = late { #expect(error.code == .conflict && error.message.contains("expired unanswered")) }
            let again = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 15))
            let mine = try await stack.asChild(AggregatorMethods.listRequests, ListRequestsParams()).requests
            #expect(mine.map(\.id) == [again.id, request.id] && mine.map(\.status) == [.open, .expired], "open first, then the rest newest first")
            try await stack.settle(sessions: 0)
            #expect(try await stack.auditWords().contains("The server let Emma's request for the rest of the day expire: nobody answered it in time"))
        }
    }

    @Test("a child has at most the family's number of open requests; answering one frees a place")
    func openRequestLimit() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.caughtUp()
            var open: [TimeRequestInfo] = []
            for minutes in [15, 30, 60] as [Int64] { open.append(try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: minutes))) }
            await expectError(.limitExceeded) { _ = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 5)) }
            _ = try await stack.answer(open[0].id, approve: false, token: stack.family.parentCredential.token).get()
            let fourth = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 5))
            // The family allows one: with two answered, the one left open fills it.
            try await stack.familySettings(["maxOpenRequests": 1])
            try await stack.caughtUp()
            for request in [open[1], fourth] { _ = try await stack.answer(request.id, approve: false, token: stack.family.parentCredential.token).get() }
            do throws(RPCError) {
                _ = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 5))
                Issue.record("a second open request was taken")
            } catch {
                #expect(error.code == .limitExceeded && error.message == "Emma already has 1 requests waiting for an answer (the family allows 1); wait for a parent to answer one")
            }
        }
    }

    @Test("a grant adds minutes at the family's rate; a removal stops at zero and says so; each is a ledger entry with its reason and the parent")
    func grantsAndRemovals() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("learn", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:10"))
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 10 }
            let added = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", minutes: 15, reason: "bonus for the dishes"))
            #expect(added.points == 15 && added.time.pointsBalance == 25 && added.time.balanceSeconds == 1500 && !added.time.shielded)
            let removed = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", points: -100, reason: "no screens after the fight"))
            #expect(removed.askedPoints == -100 && removed.points == -25 && removed.time.balanceSeconds == 0 && removed.time.shielded && removed.time.shieldReason == "balance")
            let nothing = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", points: -5))
            #expect(nothing.points == 0 && nothing.entry == nil, "nothing left to take")
            try await stack.settle(sessions: 1)
            let entries = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
            let byName = Dictionary(uniqueKeysWithValues: entries.map { ($0.recordName, $0) })
            #expect(byName[added.entry ?? ""]?.fields["type"] == "adjustment" && byName[added.entry ?? ""]?.fields["reason"] == "bonus for the dishes")
            #expect(byName[removed.entry ?? ""]?.fields["type"] == "deduction" && byName[removed.entry ?? ""]?.fields["amount"] == 25)
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 0 && $0?.fields["shielded"] == true && $0?.fields["shieldReason"] == "balance" }
            let log = try await stack.auditWords()
            #expect(log.contains("Mum added 15 min for Emma: “bonus for the dishes”") && log.contains("Mum took away 25 points from Emma: “no screens after the fight”"), "\(log)")
            // A device writing a deduction itself is refused: the server keeps the floor.
            let direct = try await stack.ledger("deduction", 5, key: "by-hand")
            #expect(direct.saved.first?.error?.code == .forbidden)
        }
    }

    @Test("a pause shields at once whatever the balance; resuming early lifts it; a pause that ends while the aggregator is stopped is lifted at its start")
    func pauses() async throws {
        let clock = SimulatedClock(Date())
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now } }) { stack in
            try await stack.session("learn", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:30"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 1800 }
            var time = try await stack.asParent(AggregatorMethods.pause, PauseParams(child: "emma", reason: "dinner"))
            #expect(time.shielded && time.shieldReason == "paused" && time.pausedBy == "Mum" && time.pausedUntil == nil && time.balanceSeconds == 1800)
            try await stack.waitForBalance { $0?.fields["shielded"] == true && $0?.fields["shieldReason"] == "paused" && $0?.fields["pausedBy"] == "Mum" }
            // The child may still ask, and its request says it is paused.
            #expect(try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10)).whilePaused)
            time = try await stack.asParent(AggregatorMethods.resume, ResumeParams(child: "emma"))
            #expect(!time.shielded && time.pausedSince == nil)
            // The administrator's journal has each action, by ids.
            #expect(stack.aggregatorLog.contains("reward apps paused") && stack.aggregatorLog.contains("reward apps resumed")
                    && stack.aggregatorLog.contains("more time asked for"), "\(stack.aggregatorLog.suffix(2000))")

            // Thirty minutes, then the aggregator is stopped past its end and started again.
            time = try await stack.asParent(AggregatorMethods.pause, PauseParams(child: "emma", minutes: 30))
            #expect(time.shielded && time.pausedUntil != nil)
            try await stack.settle(sessions: 1)
            clock.set(clock.now.addingTimeInterval(31 * 60))
            try await stack.restartEngine()
            try await stack.waitForBalance { $0?.fields["shielded"] == false && $0?.fields["pausedSince"] == nil }
            try await stack.settle(sessions: 1)
            // Commands of crossings quicker than the write-back collapse into the last one.
            let commands = try await stack.shieldCommands().map { $0.fields["commandType"]?.stringValue ?? "" }
            #expect(commands.first == "shieldRewardApps" && commands.last == "unshieldRewardApps", "\(commands)")
            let log = try await stack.auditWords()
            #expect(log.contains("Mum paused Emma's reward apps until a parent resumes them: “dinner”") && log.contains("Mum resumed Emma's reward apps")
                    && log.contains("Mum paused Emma's reward apps for 30 min") && log.contains("The server ended the pause of Emma's reward apps: its time was up"), "\(log)")
        }
    }

    @Test("a daily cap shields mid-session whatever the balance, and is lifted at the family's midnight")
    func dailyCap() async throws {
        let stack0 = LocalTime("Europe/Paris")
        let clock = SimulatedClock(stack0.at("2026-11-20 10:00"))
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) }, storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            try await stack.session("learn", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 09:00"))
            try await stack.childRules(["dailyRewardCapMinutes": 30])
            clock.set(stack.at("2026-11-20 16:45"))
            // 40 minutes of reward: 20 of the hour earned are left, but the day's 30 are used.
            try await stack.session("play", app: "com.youtube", category: "reward", from: stack.at("2026-11-20 16:00"), to: stack.at("2026-11-20 16:40"))
            try await stack.waitForBalance { $0?.fields["shielded"] == true && $0?.fields["shieldReason"] == "dailyCap" && $0?.fields["rewardSecondsToday"] == 2400
                && $0?.fields["balanceSeconds"] == 1200 }
            clock.set(stack.at("2026-11-20 23:59"))
            try await stack.caughtUp()
            #expect(try await stack.balance()?.fields["shieldReason"] == "dailyCap", "still the same day")
            clock.set(stack.at("2026-11-21 00:00:30"))
            try await stack.waitForBalance { $0?.fields["shielded"] == false && $0?.fields["rewardSecondsToday"] == 0 && $0?.fields["balanceSeconds"] == 1200 }
            try await stack.settle(sessions: 2)
            let commands = try await stack.shieldCommands()
            #expect(commands.map { $0.fields["commandType"] } == ["shieldRewardApps", "unshieldRewardApps"])
            let payload = try RPCJSON.makeDecoder().decode(JSONValue.self, from: Data((commands.first?.fields["payloadJSON"]?.stringValue ?? "").utf8))
            #expect(payload.objectValue?["reason"] == "dailyCap")
        }
    }

    @Test("weekly expiry: points unspent at the end of the family's week expire (late usage of the week counted first), a week with a daylight-saving change included, once, across a restart")
    func weeklyExpiryAcrossDST() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-10-20 12:00"))
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) }, storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            let child = stack.childAlerts()
            try await stack.session("learn", from: stack.at("2026-10-20 08:00"), to: stack.at("2026-10-20 08:30"))
            try await stack.childRules(["weeklyExpiry": true])
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 1800 }
            // Sunday 23:30 in Paris is 22:30 UTC after the clocks went back that morning: a
            // week of 7 × 24 h from Monday's midnight would have ended half an hour ago.
            clock.set(stack.at("2026-10-25 23:30"))
            try await child.expectQuiet(beyond: 0, for: .milliseconds(300))
            // The tablet was asleep: Sunday evening's ten minutes of reward arrive after
            // midnight, and still count against the week (its expiry waits 6 hours).
            clock.set(stack.at("2026-10-26 01:00"))
            try await stack.session("late-play", app: "com.youtube", category: "reward", from: stack.at("2026-10-25 22:00"), to: stack.at("2026-10-25 22:10"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 1200 }
            try await child.expectQuiet(beyond: 0, for: .milliseconds(300))
            clock.set(stack.at("2026-10-26 06:00:30"))
            let heard = try await child.event("pointsExpired")
            #expect(heard.alert?.title == "A new week: 20 points you did not spend expired")
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 0 && $0?.fields["shielded"] == true && $0?.fields["pointsBalance"] == 10 }
            try await stack.settle(sessions: 2)
            let entries = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
                .filter { $0.fields["type"] == "expiry" }
            #expect(entries.map(\.recordName) == ["expiry-child-emma-2026-10-19"] && entries.first?.fields["amount"] == 20)
            #expect(entries.first?.fields["timestamp"] == .date(stack.at("2026-10-26 00:00").addingTimeInterval(-0.001)), "dated the week's last instant")
            try await stack.restartEngine()
            try await stack.caughtUp()
            try await stack.settle(sessions: 2)
            #expect(try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
                .filter { $0.fields["type"] == "expiry" }.count == 1, "a week expires once")
            #expect(try await stack.auditWords().contains("The server let 20 unspent points of Emma expire at the end of the week"))
        }
    }

    @Test("what a parent changes through the store from any client is audited by the server, in words, with the parent's name; once per change")
    func storeChangesAudited() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.caughtUp()
            try await stack.rule(bundleId: "com.youtube", "reward", pointsPerMinute: 0)
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 2)
            try await stack.rule(bundleId: "org.khan", "learning", pointsPerMinute: 3)
            try await stack.familySettings(["requestExpiryMinutes": 30, "rewardSecondsPerPoint": 30])
            try await stack.childRules(["dailyRewardCapMinutes": 60, "weeklyExpiry": true])
            #expect(try await stack.ledger("adjustment", 5, key: "tidy", at: Date()).allSucceeded)
            try await stack.caughtUp()
            try await stack.settle(sessions: 0)
            let log = try await stack.auditWords()
            for sentence in ["Mum added a rule: com.youtube is a reward app", "Mum added a rule: org.khan is a learning app, 2 points a minute",
                             "Mum changed the rule for org.khan: a learning app, 3 points a minute",
                             "Mum changed the family's settings: a point buys 30 s, requests for more time wait 30 min",
                             "Mum set Emma's daily cap to 1 h and made Emma's unspent time expire at the end of each week",
                             "Mum added 5 points for Emma: “by hand”"] {
                #expect(log.contains(sentence), "\(sentence) is not in \(log)")
            }
            // The aggregator's own writes (balances, summaries) and pairing's are not parents' changes.
            #expect(log.filter { $0.hasPrefix("Mum") }.count == 6, "\(log)")
            try await stack.restartEngine()
            try await stack.caughtUp()
            try await stack.settle(sessions: 0)
            #expect(try await stack.auditWords().count == log.count, "each change is logged once")
        }
    }

    @Test("who may call what: a child's device gets forbidden for every parent method, a parent's for asking; a stranger's token is unauthorized")
    func callers() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.caughtUp()
            let child = Auth(token: stack.child.token)
            await expectError(.forbidden) { _ = try await stack.local.call(AggregatorMethods.grant, GrantParams(child: "emma", points: 5), actingFor: child) }
            await expectError(.forbidden) { _ = try await stack.local.call(AggregatorMethods.pause, PauseParams(child: "emma"), actingFor: child) }
            await expectError(.forbidden) { _ = try await stack.local.call(AggregatorMethods.resume, ResumeParams(child: "emma"), actingFor: child) }
            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10))
            await expectError(.forbidden) { _ = try await stack.local.call(AggregatorMethods.answerRequest, AnswerRequestParams(request: request.id, approve: true), actingFor: child) }
            await expectError(.forbidden) { _ = try await stack.asParent(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10)) }
            await expectError(.unauthorized) { _ = try await stack.local.call(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10)) }
            await expectError(.forbidden) { _ = try await stack.asChild(AggregatorMethods.listRequests, ListRequestsParams(child: "leo")) }
            await expectError(.unauthorized) { _ = try await stack.local.call(AggregatorMethods.grant, GrantParams(child: "emma", points: 5), actingFor: Auth(token: "stranger")) }
            #expect(try await stack.asChild(AggregatorMethods.listRequests, ListRequestsParams()).requests.map(\.status) == [.open], "the request is still open")
            // A device no parent has confirmed yet asks nothing of the parents.
            let waiting = try await stack.family.pairChild(stack.harness, child: "leo", device: "leo-phone", confirm: false)
            try await stack.caughtUp()
            await expectError(.notFound) { _ = try await stack.local.call(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10), actingFor: Auth(token: waiting.token)) }
            await expectError(.notFound) { _ = try await stack.local.call(AggregatorMethods.listRequests, ListRequestsParams(), actingFor: Auth(token: waiting.token)) }
        }
    }

    @Test("a child removed takes its open requests and its pause with it: nothing left to answer or set, nothing listed, nothing inherited by a child paired again under the same id")
    func removedChild() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.caughtUp()
            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10))
            _ = try await stack.asParent(AggregatorMethods.pause, PauseParams(child: "emma"))
            _ = try await stack.family.parent.call(PairingMethods.removeChild, RemoveChildParams(childId: "emma"))
            try await stack.caughtUp()
            #expect(try await stack.asParent(AggregatorMethods.listRequests, ListRequestsParams()).requests.isEmpty)
            await expectError(.notFound) { _ = try await stack.answer(request.id, approve: true, token: stack.family.parentCredential.token).get() }
            // Nothing more can be set for a child who is gone, and nothing lists it.
            await expectError(.notFound) { _ = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [])) }
            await expectError(.notFound) { _ = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Dishes", points: 5)) }
            #expect(try await stack.asParent(AggregatorMethods.listSchedules, ListSchedulesParams()).schedules.isEmpty)
            #expect(try await stack.asParent(AggregatorMethods.digest, DigestParams()).children.isEmpty)
            let again = try await stack.family.pairChild(stack.harness, child: "emma", device: "emma-new-ipad")
            try await stack.caughtUp()
            #expect(try await stack.asParent(AggregatorMethods.listSchedules, ListSchedulesParams()).schedules.map(\.child) == ["emma"], "paired again: listed again")
            let time = try await stack.local.call(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10), actingFor: Auth(token: again.token))
            #expect(!time.whilePaused, "the old pause went with the old child")
        }
    }

    @Test("bad input gets a clear error and the aggregator stays up")
    func badInput() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.caughtUp()
            for params in [AskForTimeParams(minutes: 0), AskForTimeParams(minutes: -15), AskForTimeParams(minutes: 1441), AskForTimeParams(),
                           AskForTimeParams(minutes: 15, restOfDay: true), AskForTimeParams(minutes: 15, note: String(repeating: "x", count: 201)),
                           AskForTimeParams(minutes: 15, note: "two\nlines"), AskForTimeParams(minutes: 15, app: "")] {
                await expectError(.invalidParams) { _ = try await stack.asChild(AggregatorMethods.askForTime, params) }
            }
            for params in [GrantParams(child: "emma"), GrantParams(child: "emma", points: 0), GrantParams(child: "emma", points: 5, minutes: 5),
                           GrantParams(child: "emma", minutes: 100_000), GrantParams(child: "emma", points: 5, reason: String(repeating: "x", count: 201))] {
                await expectError(.invalidParams) { _ = try await stack.asParent(AggregatorMethods.grant, params) }
            }
            await expectError(.notFound) { _ = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "nobody", points: 5)) }
            await expectError(.notFound) { _ = try await stack.asParent(AggregatorMethods.pause, PauseParams(child: "nobody")) }
            await expectError(.invalidParams) { _ = try await stack.asParent(AggregatorMethods.pause, PauseParams(child: "emma", minutes: 0)) }
            await expectError(.notFound) { _ = try await stack.answer("request-none", approve: true, token: stack.family.parentCredential.token).get() }
            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 10))
            await expectError(.invalidParams) { _ = try await stack.answer(request.id, approve: false, minutes: 10, token: stack.family.parentCredential.token).get() }
            await expectError(.invalidParams) { _ = try await stack.answer(request.id, approve: true, minutes: 0, token: stack.family.parentCredential.token).get() }
            await expectError(.invalidParams) { _ = try await stack.asParent(AggregatorMethods.listRequests, ListRequestsParams(limit: 0)) }
            let parentClient = RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: stack.family.parentCredential.token)))
            await expectError(.invalidParams) { _ = try await parentClient.call("aggregator.grant", params: ["child": "emma", "points": "five"]) }
            await expectError(.invalidParams) { _ = try await parentClient.call("aggregator.pause", params: ["child": ["emma"]]) }
            await parentClient.close()
            // Still up, and the request untouched.
            let answered = try await stack.answer(request.id, approve: true, minutes: 5, token: stack.family.parentCredential.token).get()
            #expect(answered.status == .approved && answered.grantedMinutes == 5)
        }
    }
}

/// Local times in a zone (before a stack exists too: its clock's start).
struct LocalTime {
    let days: LocalDays
    init(_ zone: String) { self.days = LocalDays(timeZone: zone)! }
    init(_ days: LocalDays) { self.days = days }

    /// "2026-10-25 23:30".
    func at(_ text: String) -> Date {
        let parts = text.split(separator: " ")
        let (year, month, day) = LocalDays.parse(String(parts[0]))!
        let clock = parts[1].split(separator: ":").map { Int($0)! }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = self.days.timeZone
        return calendar.date(from: DateComponents(year: year, month: month, day: day, hour: clock[0], minute: clock[1], second: clock.count > 2 ? clock[2] : 0))!
    }
}

extension Listening {
    /// Waits for a notification whose data says `event`.
    func event(_ event: String) async throws -> PushNotification {
        try await eventually("a notification of \(event)", timeout: .seconds(20)) { seen in
            seen = "\(self.notifications.map { $0.alert?.title ?? "\($0.fields ?? [:])" })"
            return self.notifications.first { $0.fields?["event"] == .string(event) }
        }
    }
}

extension AggregatorStack {
    /// A reward app used until the child's balance is spent (30 learning minutes, then 30
    /// of reward): reward apps shielded, the balance at zero.
    func spendAll() async throws {
        try await self.session("learn", from: self.at("2026-11-20 08:00"), to: self.at("2026-11-20 08:30"))
        try await self.session("play", app: "com.youtube", category: "reward", from: self.at("2026-11-20 17:00"), to: self.at("2026-11-20 17:30"))
        try await self.waitForBalance { $0?.fields["balanceSeconds"] == 0 && $0?.fields["shielded"] == true }
    }

    /// A second parent, Dad, enrolled from his phone.
    func enrollDad() async throws -> DeviceCredential {
        let code = try await self.family.parent.call(PairingMethods.inviteParent, InviteParentParams())
        return try await self.harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(
            family: self.family.family, code: code.code, deviceId: "dad-phone", deviceName: "Dad's phone", displayName: "Dad"))
    }

    func asChild<P, R>(_ method: MethodSpec<P, R>, _ params: P) async throws(RPCError) -> R {
        try await self.local.call(method, params, actingFor: Auth(token: self.child.token))
    }

    func asParent<P, R>(_ method: MethodSpec<P, R>, _ params: P, token: String? = nil) async throws(RPCError) -> R {
        try await self.local.call(method, params, actingFor: Auth(token: token ?? self.family.parentCredential.token))
    }

    func answer(_ request: String, approve: Bool, minutes: Int64? = nil, reply: String? = nil, token: String) async -> Result<TimeRequestInfo, RPCError> {
        do {
            return .success(try await self.local.call(AggregatorMethods.answerRequest, AnswerRequestParams(request: request, approve: approve, minutes: minutes, reply: reply),
                                                      actingFor: Auth(token: token)))
        } catch {
            return .failure(error)
        }
    }

    /// The child's device listening on push for notifications with an alert.
    func childAlerts() -> Listening {
        Listening(RPCClient(configuration: ClientConfiguration(socketPath: self.harness.socketPath(for: "push"), connectTimeout: .seconds(20), auth: Auth(token: self.child.token))),
                  reconnecting: true, only: .message)
    }

    /// Waits until the aggregator has applied every change the store had.
    func caughtUp() async throws {
        try await eventually("the aggregator catching up with the store") { seen -> Void? in
            let status = try await self.local.call(AggregatorMethods.status, Empty())
            seen = String(describing: status)
            return status.caughtUp == true ? () : nil
        }
    }

    /// Sets fields of the child's ChildContext, as a parent's app does.
    func childRules(_ fields: [String: JSONValue]) async throws {
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "ChildContext", recordName: self.childRef, fields: fields),
        ], savePolicy: .changedKeys))
        #expect(result.allSucceeded, "\(result)")
        try await self.caughtUp()
    }

    /// Sets fields of the family's Family record, as a parent's app does.
    func familySettings(_ fields: [String: JSONValue]) async throws {
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "Family", recordName: self.family.family, fields: fields),
        ], savePolicy: .changedKeys))
        #expect(result.allSucceeded, "\(result)")
    }

    /// The family's audit log in words, as the server wrote it: "<actor name> <words>".
    func auditWords() async throws -> [String] {
        try await self.parentStore.call(StoreMethods.query, QueryParams(family: self.family.family, zone: StoreNames.defaultZone, recordType: "AuditEntry")).records
            .compactMap { record in
                guard let text = record.fields["metadata"]?.stringValue, let metadata = try? RPCJSON.makeDecoder().decode(JSONValue.self, from: Data(text.utf8)),
                      let words = metadata.objectValue?["words"]?.stringValue, let actor = metadata.objectValue?["actorName"]?.stringValue else { return nil }
                return "\(actor) \(words)"
            }
    }
}
