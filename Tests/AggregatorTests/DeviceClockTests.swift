import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

/// A child's device clock set wrong (the most common way children beat time limits): the
/// server measures it from each upload, places the usage by its own time, and tells the
/// parents once.
@Suite("Aggregator: a child's device clock set wrong", .serialized)
struct DeviceClockTests {
    @Test("a tablet 2 h ahead: its late-evening session counts on the day it really happened, the store notes the offset, aggregator.devices shows it, the parents are alerted once; set right, the alert is re-armed and fires again when it drifts again")
    func clockAhead() async throws {
        let clock = SimulatedClock(Date())
        try await AggregatorStack.inProcess(withPush: true, storeClock: { clock.now }) { stack in
            let alerts = parentAlerts(stack)
            clock.set(stack.at("2026-11-20 23:00"))
            let deviceNow = stack.at("2026-11-21 01:00")
            // By the tablet's clock, 00:10 to 00:40 on the 21st; really 22:10 to 22:40 on the 20th.
            try await stack.session("ahead-1", from: stack.at("2026-11-21 00:10"), to: stack.at("2026-11-21 00:40"), deviceClock: deviceNow)
            let summary = try await stack.waitForSummary("2026-11-20") { $0?.learning == 1800 }
            #expect(summary?.points == 30)
            #expect(try await stack.summary("2026-11-21") == nil, "placed on the day the tablet's clock said")
            let record = try await stack.child.store.call(StoreMethods.fetch, FetchParams(family: stack.family.family, zone: stack.child.zone, recordNames: ["ahead-1"])).records.first
            #expect(record?.fields["clockOffsetSeconds"] == .int(7200) && record?.fields["sessionStart"] == .date(stack.at("2026-11-21 00:10")),
                    "the device's own times stay as it sent them; the offset is beside them")

            let first = try await alerts.wait(for: 1)
            #expect(first[0].alert?.title == "emma's device's clock is 2 h ahead", "\(String(describing: first[0].alert))")
            #expect(first[0].fields?["alert"] == "clockOff" && first[0].fields?["clockOffsetSeconds"] == 7200)
            let states = try await stack.local.call(AggregatorMethods.devices, Empty(), actingFor: Auth(token: stack.family.parentCredential.token)).devices
            #expect(states.first { $0.deviceId == stack.child.deviceId }?.clockOffsetSeconds == 7200)

            // Still ahead: no second alert.
            try await stack.session("ahead-2", from: stack.at("2026-11-21 00:41"), to: stack.at("2026-11-21 00:50"), deviceClock: deviceNow.addingTimeInterval(600))
            try await stack.settle(sessions: 2)
            try await alerts.expectQuiet(beyond: 1)

            // Set right (a few seconds off is the time on the way, not a wrong clock): re-armed.
            clock.set(stack.at("2026-11-21 08:00"))
            try await stack.session("right", from: stack.at("2026-11-21 07:00"), to: stack.at("2026-11-21 07:30"), deviceClock: stack.at("2026-11-21 08:00:07"))
            try await stack.settle(sessions: 3)
            let right = try await stack.local.call(AggregatorMethods.devices, Empty(), actingFor: Auth(token: stack.family.parentCredential.token)).devices
            #expect(right.first { $0.deviceId == stack.child.deviceId }?.clockOffsetSeconds == nil)
            try await alerts.expectQuiet(beyond: 1)
            // Set back 40 minutes: alerted again.
            clock.set(stack.at("2026-11-21 12:00"))
            try await stack.session("behind", from: stack.at("2026-11-21 11:00"), to: stack.at("2026-11-21 11:15"), deviceClock: stack.at("2026-11-21 11:20"))
            let second = try await alerts.wait(for: 2)
            #expect(second[1].alert?.title == "emma's device's clock is 40 min behind", "\(String(describing: second[1].alert))")
            // The 21st: 00:41–00:50 by the fast clock was the 20th; 07:00–07:30 and 10:20–10:35.
            let day = try await stack.waitForSummary("2026-11-21") { $0?.learning == Int64(2700) }
            #expect(day?.points == Int64(45))
        }
    }
}
