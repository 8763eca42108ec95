import AggregatorAPI
import AggregatorEngine
import Foundation
import PairingAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// Chores through the aggregator's real server: parents set them, the child marks one done
/// once per occurrence (the family's day, whatever the device's clock), every parent hears
/// of it, and the first answer is taken: an approval's points enter the ledger once.
@Suite("Aggregator: chores with approval", .serialized)
struct ChoreTests {
    @Test("parents add, change and remove chores (refused in words when they make no sense); each side lists what it may; the child's device may not set or answer")
    func settingChores() async throws {
        let clock = SimulatedClock(LocalTime("Europe/Paris").at("2026-11-23 10:00"))  // a Monday
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now } }, storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            func refused(_ params: SetChoreParams) async -> RPCError? {
                do { _ = try await stack.asParent(AggregatorMethods.setChore, params); return nil } catch { return error }
            }
            #expect(await refused(SetChoreParams(child: "emma", title: "", points: 5))?.message == "params.title: may not be empty")
            #expect(await refused(SetChoreParams(child: "emma", title: "   ", points: 5))?.message.hasPrefix("params.title: 1 to 80 characters") == true)
            #expect(await refused(SetChoreParams(child: "emma", title: "Dishes", points: 0))?.message == "params.points: 1 to 10000, not 0")
            #expect(await refused(SetChoreParams(child: "emma", title: "Dishes", points: 5, repeat: .weekly))?.message.hasPrefix("params.days: a weekly chore needs") == true)
            #expect(await refused(SetChoreParams(child: "emma", title: "Dishes", points: 5, repeat: .daily, days: [.mon]))?.message.hasPrefix("params.days: only a weekly chore") == true)
            #expect(await refused(SetChoreParams(child: "emma", title: "Dishes", points: 5, repeat: .weekly, days: [.mon, .mon]))?.message == "params.days: mon is listed twice")
            #expect(await refused(SetChoreParams(child: "zoe", title: "Dishes", points: 5))?.code == .notFound)
            #expect(await refused(SetChoreParams(child: "emma", points: 5))?.message == "params: a new chore needs child, title and points")
            #expect(await refused(SetChoreParams(id: "chore-nope", points: 5))?.code == .notFound)

            let dishes = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Dishes", points: 5))
            #expect(dishes.repeat == .daily && dishes.dueToday && dishes.todayStatus == nil && dishes.createdBy == "Mum" && dishes.when == "Every day")
            let room = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Tidy your room", points: 10, repeat: .weekly, days: [.thu, .mon]))
            #expect(room.dueToday && room.when == "Mon, Thu")
            let bins = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Bins out", points: 3, repeat: .weekly, days: [.wed]))
            #expect(!bins.dueToday, "Wednesday's chore is not due on a Monday")
            let changed = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(id: dishes.id, points: 8))
            #expect(changed.points == 8 && changed.title == "Dishes")
            let removed = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(id: bins.id, remove: true))
            #expect(removed.removed)

            let mine = try await stack.asChild(AggregatorMethods.listChores, ListChoresParams())
            #expect(mine.chores.map(\.title) == ["Dishes", "Tidy your room"] && mine.completions.isEmpty)
            #expect(try await stack.asParent(AggregatorMethods.listChores, ListChoresParams(child: "emma")).chores.count == 2)
            await expectError(.forbidden) { _ = try await stack.asChild(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Nothing", points: 100)) }
            await expectError(.forbidden) { _ = try await stack.asChild(AggregatorMethods.listChores, ListChoresParams(child: "emma")) }
            await expectError(.forbidden) { _ = try await stack.asParent(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id)) }
            try await stack.settle(sessions: 0)
            let log = try await stack.auditWords()
            #expect(log.contains("Mum added a chore for Emma: “Tidy your room”, 10 points, on Mondays and Thursdays") && log.contains("Mum removed Emma's chore “Bins out”")
                    && log.contains("Mum changed Emma's chore “Dishes”: 8 points, every day"), "\(log)")
        }
    }

    @Test("the child marks a chore done; every parent is alerted; two parents approve at once: one is taken, the points enter the ledger once naming the approver; the child cannot approve its own")
    func twoParentsApprove() async throws {
        let clock = SimulatedClock(LocalTime("Europe/Paris").at("2026-11-23 17:00"))
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now } }, storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            let dad = try await stack.enrollDad()
            let mum = parentAlerts(stack)
            let child = stack.childAlerts()
            let room = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Tidy your room", points: 10))
            _ = try await child.event("choreAdded")

            let done = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: room.id, note: "even under the bed"))
            #expect(done.status == .waiting && done.occurrence == "2026-11-23" && done.sentence == "Emma did “Tidy your room” (10 points): “even under the bed”")
            let alert = try await mum.event("choreDone")
            #expect(alert.alert?.title == "Emma did “Tidy your room” (10 points)" && alert.alert?.body == "“even under the bed”")
            await expectError(.forbidden) { _ = try await stack.asChild(AggregatorMethods.answerChore, AnswerChoreParams(completion: done.id, approve: true)) }

            async let fromMum = stack.answerChore(done.id, token: stack.family.parentCredential.token)
            async let fromDad = stack.answerChore(done.id, token: dad.token)
            let answers = [await fromMum, await fromDad]
            let won = answers.compactMap { try? $0.get() }
            let lost = answers.compactMap { result -> RPCError? in if case .failure(let error) = result { return error } else { return nil } }
            try #require(won.count == 1 && lost.count == 1, "answers: \(answers)")
            #expect(lost[0].code == .conflict && lost[0].message.hasPrefix("\(won[0].answeredBy ?? "?") already approved this at 17:00"), "\(lost[0].message)")
            // The same parent again: nothing more.
            let again = await stack.answerChore(done.id, token: stack.family.parentCredential.token)
            #expect((try? again.get()) == nil)

            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 10 }
            try await stack.settle(sessions: 0)
            let entries = try await stack.parentStore.call(StoreMethods.query, QueryParams(family: stack.family.family, zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry")).records
            #expect(entries.map(\.recordName) == ["chore-\(done.id)"] && entries[0].fields["amount"] == 10 && entries[0].fields["type"] == "adjustment")
            let approver = won[0].answeredBy == "Dad" ? "dad-phone" : stack.family.parentCredential.deviceId
            #expect(entries[0].fields["actorParentRef"]?.objectValue?["recordName"] == .string("parent-\(approver)"))
            #expect(entries[0].fields["reason"] == .string("Chore: Tidy your room (approved by \(won[0].answeredBy ?? "?"))"))
            let heard = try await child.event("choreAnswered")
            #expect(heard.alert?.title == "\(won[0].answeredBy ?? "?") approved “Tidy your room”: +10 points")
            let log = try await stack.auditWords()
            #expect(log.contains("Emma did “Tidy your room”: “even under the bed”") && log.contains("\(won[0].answeredBy ?? "?") approved Emma's “Tidy your room”: +10 points"), "\(log)")
        }
    }

    @Test("a recurring chore is done once per day of the family's (twice on one day is a conflict; the next day it is due again); one sent back may be done again; a weekly chore only on its days; a one-off once")
    func oncePerOccurrence() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-23 18:00"))  // a Monday
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now } }, storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            let dishes = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Dishes", points: 5))
            let first = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id))
            do throws(RPCError) {
                _ = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id))
                Issue.record("done twice on one day")
            } catch {
                #expect(error.code == .conflict && error.message == "“Dishes” is marked done today already, waiting for a parent")
            }
            _ = try await stack.answerChore(first.id, approve: false, reason: "the pans are still dirty", token: stack.family.parentCredential.token).get()
            #expect(try await stack.asChild(AggregatorMethods.listChores, ListChoresParams()).chores[0].todayStatus == .rejected)
            let redone = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id, note: "pans too"))
            _ = try await stack.answerChore(redone.id, token: stack.family.parentCredential.token).get()
            do throws(RPCError) {
                _ = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id))
                Issue.record("done again after approval, on the same day")
            } catch {
                #expect(error.message == "“Dishes” is done today already: Mum approved it")
            }
            // After the family's midnight (23:30 UTC is already Tuesday in Paris) it is due again.
            clock.set(paris.at("2026-11-24 00:30"))
            let tuesday = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id))
            #expect(tuesday.occurrence == "2026-11-24")
            // Its points are those of when it was done, whatever the chore says later.
            _ = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(id: dishes.id, points: 50))
            let approved = try await stack.answerChore(tuesday.id, token: stack.family.parentCredential.token).get()
            #expect(approved.points == 5 && approved.sentence == "Mum approved Emma's “Dishes”: +5 points")

            let room = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Tidy your room", points: 10, repeat: .weekly, days: [.mon, .thu]))
            do throws(RPCError) {
                _ = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: room.id))
                Issue.record("a Monday-and-Thursday chore done on a Tuesday")
            } catch {
                #expect(error.code == .invalidParams && error.message == "“Tidy your room” is for Mondays and Thursdays; today is Tuesday")
            }
            let bike = try await stack.asParent(AggregatorMethods.setChore, SetChoreParams(child: "emma", title: "Fix the bike", points: 50, repeat: .once))
            let fixed = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: bike.id))
            #expect(fixed.occurrence == "once")
            _ = try await stack.answerChore(fixed.id, token: stack.family.parentCredential.token).get()
            clock.set(paris.at("2026-11-30 09:00"))
            await expectError(.conflict) { _ = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: bike.id)) }
            let waiting = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: dishes.id))
            let listed = try await stack.asChild(AggregatorMethods.listChores, ListChoresParams())
            #expect(listed.chores.first { $0.id == bike.id }?.dueToday == false && listed.chores.first { $0.id == bike.id }?.todayStatus == .approved)
            #expect(listed.completions.first?.id == waiting.id && listed.completions.first?.status == .waiting, "the one waiting for a parent on top")
            try await stack.waitForBalance { $0?.fields["pointsBalance"] == 60 }
            await expectError(.notFound) { _ = try await stack.asChild(AggregatorMethods.choreDone, ChoreDoneParams(chore: "chore-nope")) }
        }
    }
}

extension AggregatorStack {
    func answerChore(_ completion: String, approve: Bool = true, reason: String? = nil, token: String) async -> Result<ChoreCompletion, RPCError> {
        do {
            return .success(try await self.local.call(AggregatorMethods.answerChore, AnswerChoreParams(completion: completion, approve: approve, reason: reason),
                                                      actingFor: Auth(token: token)))
        } catch {
            return .failure(error)
        }
    }
}
