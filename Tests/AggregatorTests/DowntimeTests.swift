import AggregatorAPI
import AggregatorEngine
import Foundation
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport
import UsageModel

/// Downtime through the aggregator's real server: its clock is the test's, the family's
/// time zone says when a window starts and ends (whatever a device's clock says), and the
/// child's devices are shielded and unshielded at each boundary.
@Suite("Aggregator: downtime schedules", .serialized)
struct DowntimeTests {
    static let schoolNights = DowntimeWindow(days: [.sun, .mon, .tue, .wed, .thu], start: "20:00", end: "07:00")
    static let weekends = DowntimeWindow(days: [.fri, .sat], start: "21:00", end: "08:00")

    @Test("a schedule is refused when its windows overlap (on one day or across midnight), a window is empty or malformed, a day is listed twice, or the child is unknown; a child's device may read but not set it")
    func refusals() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.caughtUp()
            func refused(_ windows: [DowntimeWindow], child: String = "emma", allowed: [String]? = nil) async -> RPCError? {
                do {
                    _ = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: child, windows: windows, alwaysAllowed: allowed))
                    return nil
                } catch { return error }
            }
            let overnight = await refused([Self.schoolNights, DowntimeWindow(days: [.mon], start: "06:00", end: "09:00")])
            #expect(overnight?.code == .invalidParams
                    && overnight?.message == "params.windows: Sun–Thu 20:00–07:00 (from Sunday) overlaps Mon 06:00–09:00 (from Monday); windows may touch but not overlap",
                    "\(String(describing: overnight))")
            let sameDay = await refused([DowntimeWindow(days: [.sat], start: "12:00", end: "14:00"), DowntimeWindow(days: [.sat, .sun], start: "13:00", end: "13:30")])
            #expect(sameDay?.message.contains("Sat 12:00–14:00 (from Saturday) overlaps Sat, Sun 13:00–13:30 (from Saturday)") == true, "\(String(describing: sameDay))")
            // Sunday night into Monday morning, against Monday's window: across the week's end.
            let wrap = await refused([DowntimeWindow(days: [.sun], start: "22:00", end: "07:00"), DowntimeWindow(days: [.mon], start: "06:30", end: "08:00")])
            #expect(wrap?.code == .invalidParams && wrap?.message.contains("overlaps") == true)
            #expect(await refused([DowntimeWindow(days: [.mon], start: "20:00", end: "20:00")])?.message
                    == "params.windows[0]: from 20:00 to 20:00 is no time at all; give an end different from the start (an end before the start is the next morning's)")
            #expect(await refused([DowntimeWindow(days: [.mon], start: "25:00", end: "07:00")])?.message == "params.windows[0].start: a time as HH:MM (00:00 to 23:59), not \"25:00\"")
            #expect(await refused([DowntimeWindow(days: [.mon], start: "20:00", end: "7:00")])?.message == "params.windows[0].end: a time as HH:MM (00:00 to 23:59), not \"7:00\"")
            #expect(await refused([DowntimeWindow(days: [.mon, .mon], start: "20:00", end: "21:00")])?.message == "params.windows[0].days: mon is listed twice")
            #expect(await refused([DowntimeWindow(days: [], start: "20:00", end: "21:00")])?.message.hasPrefix("params.windows[0].days: at least one day") == true)
            #expect(await refused([Self.schoolNights], child: "zoe")?.code == .notFound)
            #expect(await refused([Self.schoolNights], allowed: [""])?.message == "params.alwaysAllowed[0]: may not be empty")
            #expect(await refused(Array(repeating: DowntimeWindow(days: [.mon], start: "01:00", end: "02:00"), count: 15))?.message.hasPrefix("params.windows: at most 14") == true)

            // Windows that touch are one stretch of downtime; nothing was saved by the refusals.
            #expect(try await stack.asParent(AggregatorMethods.listSchedules, ListSchedulesParams()).schedules.map(\.windows) == [[]])
            let touching = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [
                DowntimeWindow(days: [.sat], start: "21:00", end: "00:00"), DowntimeWindow(days: [.sun], start: "00:00", end: "08:00"),
            ]))
            #expect(touching.windows.count == 2 && touching.updatedBy == "Mum")

            do throws(RPCError) {
                _ = try await stack.asChild(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: []))
                Issue.record("a child's device set its own downtime")
            } catch {
                #expect(error.code == .forbidden)
            }
            let mine = try await stack.asChild(AggregatorMethods.listSchedules, ListSchedulesParams())
            #expect(mine.schedules.map(\.child) == ["emma"] && mine.schedules[0].windows.count == 2)
            await expectError(.forbidden) { _ = try await stack.asChild(AggregatorMethods.listSchedules, ListSchedulesParams(child: "emma")) }
            // The service is still up.
            #expect(try await stack.local.call(AggregatorMethods.status, Empty()).caughtUp != nil)
        }
    }

    @Test("on a school night the reward apps are shielded at 20:00 on the family's clock whatever the balance, but for the apps always allowed; unshielded at 07:00; the child hears both; the change is audited")
    func schoolNight() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-23 19:50"))  // a Monday
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) },
                                            storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            try await stack.shieldPolicy(apps: ["com.youtube", "com.apple.maps"])
            try await stack.session("learn", from: stack.at("2026-11-23 08:00"), to: stack.at("2026-11-23 08:30"))
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == 1800 && $0?.fields["shielded"] == false }
            let child = stack.childAlerts()

            let schedule = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(
                child: "emma", windows: [Self.schoolNights, Self.weekends], alwaysAllowed: ["com.apple.maps"]))
            #expect(!schedule.active && schedule.nextStart == stack.at("2026-11-23 20:00") && schedule.liftOnApproval && schedule.alwaysAllowed == ["com.apple.maps"])

            clock.set(stack.at("2026-11-23 19:59:30"))
            try await child.expectQuiet(beyond: 0, for: .milliseconds(300))
            clock.set(stack.at("2026-11-23 20:00:05"))
            let started = try await child.event("downtimeStarted")
            #expect(started.alert?.title == "Downtime until 07:00" && started.alert?.body == "Reward apps are shielded until then; com.apple.maps stay open.")
            try await stack.waitForBalance { $0?.fields["shielded"] == true && $0?.fields["shieldReason"] == "downtime"
                && $0?.fields["downtimeUntil"] == .date(stack.at("2026-11-24 07:00")) && $0?.fields["balanceSeconds"] == 1800 }
            try await stack.settle(sessions: 1)
            let command = try #require(try await stack.shieldCommands().last)
            #expect(command.fields["commandType"] == "shieldRewardApps")
            let payload = try RPCJSON.makeDecoder().decode(JSONValue.self, from: Data((command.fields["payloadJSON"]?.stringValue ?? "").utf8)).objectValue
            #expect(payload?["reason"] == "downtime" && payload?["rewardApps"] == .array(["com.youtube"]) && payload?["alwaysAllowed"] == .array(["com.apple.maps"]))
            #expect(payload?["downtimeUntil"] == .date(stack.at("2026-11-24 07:00")))
            let seen = try await stack.asChild(AggregatorMethods.listSchedules, ListSchedulesParams()).schedules[0]
            #expect(seen.active && seen.activeUntil == stack.at("2026-11-24 07:00"))
            let time = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", points: 5))
            #expect(time.time.shieldReason == "downtime" && time.time.downtimeUntil == stack.at("2026-11-24 07:00"), "points do not lift downtime")

            clock.set(stack.at("2026-11-24 07:00:05"))
            let ended = try await child.event("downtimeEnded")
            #expect(ended.alert?.title == "Downtime is over")
            try await stack.waitForBalance { $0?.fields["shielded"] == false && $0?.fields["shieldReason"] == nil && $0?.fields["downtimeUntil"] == nil }
            try await stack.settle(sessions: 1)
            #expect(try await stack.auditWords().contains("Mum set Emma's downtime: Sun–Thu 20:00–07:00; Fri, Sat 21:00–08:00 (always allowed: com.apple.maps)"))
            #expect(stack.aggregatorLog.contains("downtime set"))
        }
    }

    @Test("Europe/Paris: a window ending in the spring-forward gap ends when the clocks jump (03:00); in the autumn's repeated hour it ends at the first 02:30; a night's downtime lasts what the clocks show")
    func parisDaylightSaving() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-03-28 18:00"))  // the Saturday before the clocks go forward
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) },
                                            storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            _ = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", minutes: 60))
            let late = DowntimeWindow(days: [.sat], start: "22:00", end: "02:30")
            var schedule = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [late, Self.schoolNights]))
            #expect(schedule.nextStart == paris.at("2026-03-28 22:00"))
            clock.set(paris.at("2026-03-28 23:00"))
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }
            schedule = try await stack.schedule()
            // 02:30 is never on the clocks that night: downtime ends at 03:00 CEST, 01:00 UTC.
            #expect(schedule.active && schedule.activeUntil == Date(timeIntervalSince1970: 1_774_746_000), "\(String(describing: schedule.activeUntil))")
            clock.set(Date(timeIntervalSince1970: 1_774_746_000 - 60))  // 01:59 CET
            try await stack.caughtUp()
            #expect(try await stack.balance()?.fields["shieldReason"] == "downtime")
            clock.set(Date(timeIntervalSince1970: 1_774_746_000 + 5))  // 03:00:05 CEST
            try await stack.waitForBalance { $0?.fields["shielded"] == false }
            // Sunday's school night, 20:00 CEST to Monday 07:00 CEST: 11 hours.
            schedule = try await stack.schedule()
            #expect(schedule.nextStart == paris.at("2026-03-29 20:00"))

            // The autumn: 02:30 is on the clocks twice; the window ends at the first.
            clock.set(paris.at("2026-10-24 23:00"))
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }
            schedule = try await stack.schedule()
            #expect(schedule.activeUntil == Date(timeIntervalSince1970: 1_792_888_200), "00:30 UTC, 02:30 CEST: \(String(describing: schedule.activeUntil))")
            // Sunday night 20:00 CET to Monday 07:00 CET: 11 hours; Saturday's, over the
            // repeated hour, 22:00 CEST to 02:30 CEST: 4 h 30.
            clock.set(paris.at("2026-10-25 21:00"))
            schedule = try await stack.schedule()
            #expect(schedule.activeUntil == paris.at("2026-10-26 07:00") && schedule.activeUntil!.timeIntervalSince(paris.at("2026-10-25 20:00")) == 11 * 3600)
        }
    }

    @Test("America/New_York: a school night over the spring change lasts 10 hours, over the autumn change 12; the shield follows the family's clock")
    func newYorkDaylightSaving() async throws {
        let newYork = LocalTime("America/New_York")
        let clock = SimulatedClock(newYork.at("2026-03-07 19:00"))  // Saturday; clocks go forward at 02:00 on Sunday
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) },
                                            storeClock: { clock.now }) { stack in
            try await stack.familySettings(["timeZone": "America/New_York"])
            try await stack.caughtUp()
            _ = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", minutes: 60))
            let nights = DowntimeWindow(days: Weekday.allCases, start: "20:00", end: "07:00")
            var schedule = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [nights]))
            #expect(schedule.nextStart == newYork.at("2026-03-07 20:00"))
            clock.set(newYork.at("2026-03-07 20:00:05"))
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }
            schedule = try await stack.schedule()
            #expect(schedule.activeUntil == newYork.at("2026-03-08 07:00") && newYork.at("2026-03-08 07:00").timeIntervalSince(newYork.at("2026-03-07 20:00")) == 10 * 3600)
            clock.set(newYork.at("2026-03-08 07:00:05"))
            try await stack.waitForBalance { $0?.fields["shielded"] == false }

            clock.set(newYork.at("2026-10-31 21:00"))  // Saturday; clocks go back at 02:00 on Sunday
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }
            schedule = try await stack.schedule()
            #expect(schedule.activeUntil == newYork.at("2026-11-01 07:00") && newYork.at("2026-11-01 07:00").timeIntervalSince(newYork.at("2026-10-31 20:00")) == 12 * 3600)
            // A device whose clock or zone says otherwise changes nothing: the server's clock decides.
            clock.set(newYork.at("2026-11-01 06:59"))
            try await stack.caughtUp()
            #expect(try await stack.balance()?.fields["shieldReason"] == "downtime")
            clock.set(newYork.at("2026-11-01 07:00:05"))
            try await stack.waitForBalance { $0?.fields["shielded"] == false }
        }
    }

    @Test("a boundary that passes while the aggregator is stopped is caught up at its start; a device offline across it gets the current state when it connects")
    func restartAndOfflineDevice() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-23 19:50"))
        // Deadlines are looked at only when due or woken (an hour at most): the start must do it.
        try await AggregatorStack.inProcess(configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .seconds(3600) }, storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            try await stack.shieldPolicy(apps: ["com.youtube", "com.apple.maps"])
            _ = try await stack.asParent(AggregatorMethods.grant, GrantParams(child: "emma", minutes: 60))
            _ = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [Self.schoolNights], alwaysAllowed: ["com.apple.maps"]))
            try await stack.waitForBalance { $0?.fields["shielded"] == false && $0?.fields["balanceSeconds"] == 3600 }
            try await stack.settle(sessions: 0)
            let before = try await stack.shieldCommands().count

            clock.set(stack.at("2026-11-23 20:10"))
            try await stack.restartEngine()
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }
            try await stack.settle(sessions: 0)
            // The device was offline: what it reads when it connects is the shield now.
            let commands = try await stack.shieldCommands()
            #expect(commands.count == before + 1 && commands.last?.fields["commandType"] == "shieldRewardApps")
            _ = try await stack.local.call(AggregatorMethods.resync, ResyncParams(), actingFor: Auth(token: stack.child.token))
            let snapshot = try await ConfigurationTests.waitForSnapshot(stack, stack.child) { $0.shield.reason == "downtime" }
            #expect(snapshot.shield.shielded && snapshot.shield.rewardApps == ["com.youtube"] && snapshot.shield.alwaysAllowed == ["com.apple.maps"]
                    && snapshot.shield.downtimeUntil == stack.at("2026-11-24 07:00"))
        }
    }

    @Test("a request for more time during downtime is allowed and says so; its approval lifts downtime for the minutes approved, then it holds again; a schedule that says not to keeps it")
    func approvalLiftsDowntime() async throws {
        let paris = LocalTime("Europe/Paris")
        let clock = SimulatedClock(paris.at("2026-11-23 20:30"))
        try await AggregatorStack.inProcess(withPush: true, configure: { $0.clock = { clock.now }; $0.deadlineCheckInterval = .milliseconds(50) },
                                            storeClock: { clock.now }) { stack in
            try await stack.caughtUp()
            let mum = parentAlerts(stack)
            let child = stack.childAlerts()
            _ = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [Self.schoolNights]))
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }
            _ = try await child.event("downtimeStarted")

            let request = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 30, note: "finishing a film"))
            let alert = try await mum.event("timeRequest")
            #expect(alert.alert?.body == "“finishing a film” It is downtime until 07:00.", "\(String(describing: alert.alert))")
            _ = try await stack.answer(request.id, approve: true, token: stack.family.parentCredential.token).get()
            try await stack.waitForBalance { $0?.fields["shielded"] == false && $0?.fields["balanceSeconds"] == 1800 }
            let lifted = try await child.event("downtimeEnded")
            #expect(lifted.alert?.title == "Downtime is lifted until 21:00")
            #expect(try await stack.schedule().liftedUntil == stack.at("2026-11-23 21:00"))

            clock.set(stack.at("2026-11-23 21:00:05"))
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }

            // An approval near the window's end lifts it to that end only: the next night holds.
            clock.set(stack.at("2026-11-24 06:50"))
            let early = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 60))
            _ = try await stack.answer(early.id, approve: true, token: stack.family.parentCredential.token).get()
            #expect(try await stack.schedule().liftedUntil == stack.at("2026-11-24 07:00"))
            clock.set(stack.at("2026-11-24 20:00:05"))
            try await stack.waitForBalance { $0?.fields["shieldReason"] == "downtime" }

            // Approvals that do not lift it: the time is there for the morning.
            _ = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [Self.schoolNights], liftOnApproval: false))
            let second = try await stack.asChild(AggregatorMethods.askForTime, AskForTimeParams(minutes: 15))
            _ = try await stack.answer(second.id, approve: true, token: stack.family.parentCredential.token).get()
            try await stack.waitForBalance { $0?.fields["balanceSeconds"] == .int(2700 + 3600) }
            #expect(try await stack.balance()?.fields["shieldReason"] == "downtime")
            #expect(try await stack.schedule().liftedUntil == nil)
        }
    }

    @Test("wall-clock times resolve in the family's zone: a skipped time is the first instant after the gap, a repeated one its first occurrence")
    func wallClock() throws {
        let paris = LocalDays(timeZone: "Europe/Paris")!
        #expect(paris.instant(of: "2026-03-29", minute: 150) == Date(timeIntervalSince1970: 1_774_746_000))  // 02:30 → 03:00 CEST
        #expect(paris.instant(of: "2026-03-29", minute: 90) == Date(timeIntervalSince1970: 1_774_746_000 - 1800))  // 01:30 CET
        #expect(paris.instant(of: "2026-10-25", minute: 150) == Date(timeIntervalSince1970: 1_792_888_200))  // the first 02:30
        #expect(paris.instant(of: "2026-10-25", minute: 1440) == paris.bounds(of: "2026-10-25")?.end)
        #expect(paris.weekday(of: "2026-11-23") == 0 && paris.weekday(of: "2026-11-29") == 6)
        let newYork = LocalDays(timeZone: "America/New_York")!
        #expect(newYork.instant(of: "2026-03-08", minute: 150) == newYork.instant(of: "2026-03-08", minute: 180))
        #expect(DowntimeWindow.words(days: [.sun, .mon, .tue, .wed, .thu]) == "Sun–Thu" && DowntimeWindow.words(days: [.sat, .sun]) == "Sat, Sun"
                && DowntimeWindow.words(days: [.mon, .tue, .wed, .thu, .fri]) == "Mon–Fri" && DowntimeWindow.words(days: Weekday.allCases) == "Every day")
    }
}

extension AggregatorStack {
    /// The child's schedule, as its parent reads it.
    func schedule() async throws -> DowntimeSchedule {
        try await self.asParent(AggregatorMethods.listSchedules, ListSchedulesParams(child: "emma")).schedules[0]
    }

    /// The family's shield policy for every child, as a parent's app saves it.
    func shieldPolicy(apps: [String]) async throws {
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "ShieldPolicy", recordName: "shield-policy", fields: [
                "familyRef": .reference(self.family.family, zone: StoreNames.defaultZone), "rewardApps": .array(apps.map(JSONValue.string)),
            ]),
        ], savePolicy: .allKeys))
        #expect(result.allSucceeded, "\(result)")
        try await self.caughtUp()
    }
}
