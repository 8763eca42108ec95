import Foundation
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Push: subscriptions fire, queues deliver", .serialized)
struct DeliveryTests {
    @Test("a query subscription fires on create, update and delete as configured, and not otherwise")
    func querySubscriptionFires() async throws {
        try await PushStack.inProcess { stack in
            let parent = stack.parent
            _ = try await parent.call(PushMethods.subscribe, SubscribeParams(
                subscriptionId: "learning", kind: .query, zone: stack.child.zone, recordType: "UsageRecord",
                filters: [QueryFilter("category", .equal, "learning")], firesOn: [.create, .delete],
                notification: NotificationSpec(alert: Alert(title: "New session"), includeKeys: ["totalSeconds"])))
            let listening = Listening(parent)
            try await stack.saveUsage("u1", seconds: 60)                       // create, matches: fires
            // Seen before the record changes again: a save that later changes supersede before
            // push reads it is matched against the record as it is then (here, deleted).
            try await listening.wait(for: 1)
            try await stack.saveUsage("u1", seconds: 90)                       // update: not asked for
            try await stack.saveUsage("u2", seconds: 60, category: "reward")   // create, does not match
            try await stack.deleteUsage("u1")                                  // delete of a match: fires
            try await stack.deleteUsage("u2")                                  // delete of a non-match
            let received = try await listening.wait(for: 2)
            try await listening.expectQuiet(beyond: 2)
            #expect(received.map(\.reason) == [.recordCreated, .recordDeleted])
            #expect(received.map(\.recordName) == ["u1", "u1"])
            #expect(received[0].fields == ["totalSeconds": 60] && received[0].alert?.title == "New session")
            #expect(received[1].fields == ["totalSeconds": 90], "a deletion carries what the record held")
            #expect(received.map(\.seq) == [1, 2])
        }
    }

    @Test("a date filter matches however the date is written (with or without fractions, any offset)")
    func dateFilters() async throws {
        try await PushStack.inProcess { stack in
            let parent = stack.parent
            // saveUsage's sessions start at 1_790_000_000 (2026-09-21T14:13:20.000Z).
            _ = try await parent.call(PushMethods.subscribe, SubscribeParams(
                subscriptionId: "exact", kind: .query, recordType: "UsageRecord",
                filters: [QueryFilter("sessionStart", .equal, "2026-09-21T16:13:20+02:00")]))
            _ = try await parent.call(PushMethods.subscribe, SubscribeParams(
                subscriptionId: "later", kind: .query, recordType: "UsageRecord",
                filters: [QueryFilter("sessionStart", .greater, "2026-09-21T14:13:20Z")]))
            let listening = Listening(parent)
            try await stack.saveUsage("u1")
            let received = try await listening.wait(for: 1)
            try await listening.expectQuiet(beyond: 1)
            #expect(received.map(\.subscriptionId) == ["exact"], "equal to the second, so not later")
        }
    }

    @Test("push.listening names the family's devices with a stream open now, to a parent and to a local service; not another family's; a stream ended is gone from it")
    func connectedNow() async throws {
        try await PushStack.inProcess { stack in
            let listening = { (client: RPCClient, family: String?) in try await client.call(PushMethods.listening, ListeningParams(family: family)).deviceIds }
            #expect(try await listening(stack.parent, nil).isEmpty)
            let child = Listening(stack.client(token: stack.child.token))
            try await eventually("the child's stream counted") { seen in
                let ids = try await listening(stack.parent, nil)
                seen = "\(ids)"
                return ids == [stack.child.deviceId] ? () : nil
            }
            #expect(try await listening(stack.local, stack.family.family) == [stack.child.deviceId])
            let error = await expectError(.invalidParams) { _ = try await listening(stack.local, nil) }
            #expect(error?.message.contains("params.family") == true)
            await expectError(.forbidden) { _ = try await listening(stack.parent, "another-family") }
            await expectError(.forbidden) { _ = try await listening(stack.client(token: stack.child.token), nil) }
            child.cancel()
            try await eventually("the ended stream gone") { seen in
                let ids = try await listening(stack.parent, nil)
                seen = "\(ids)"
                return ids.isEmpty ? () : nil
            }
        }
    }

    @Test("a burst of changes within the collapse window reaches each listener as one zone hint, the last; a change alone goes out within the window; a query subscription hears every change")
    func collapseWindow() async throws {
        // Three seconds: the five saves fall within it however busy the machine is.
        try await PushStack.inProcess(configure: { $0.collapseWindow = .seconds(3) }) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(subscriptionId: "zone", kind: .zone, zone: stack.child.zone))
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(subscriptionId: "each", kind: .query, recordType: "UsageRecord"))
            let first = Listening(child, only: .zoneChanged), second = Listening(stack.client(token: stack.child.token), only: .zoneChanged)
            let queries = Listening(stack.client(token: stack.child.token), only: .recordCreated)
            try await eventually("three streams open") { seen in
                let ids = try await stack.parent.call(PushMethods.listening, ListeningParams()).deviceIds
                seen = "\(ids)"
                return ids == [stack.child.deviceId] ? () : nil
            }
            // Five records saved one after another, well within the window.
            for index in 1...5 { try await stack.saveUsage("burst-\(index)", seconds: Int64(60 * index)) }
            // (A hint for the zone's earlier changes, from pairing, may come before: only the
            // burst's count.)
            for listening in [first, second] {
                let burst = { listening.notifications.compactMap(\.recordName).filter { $0.hasPrefix("burst-") } }
                _ = try await eventually("the burst's hint") { seen in
                    seen = "\(burst())"
                    return burst().isEmpty ? nil : ()
                }
                let total = listening.notifications.count
                try await listening.expectQuiet(beyond: total, for: .milliseconds(800))
                #expect(burst() == ["burst-5"], "one hint, the last of the burst: \(burst())")
            }
            #expect(try await queries.wait(for: 5).count == 5, "a query subscription without a collapse key hears each one")

            // A change alone, later: one more, within the window (and the wait's margin).
            let started = ContinuousClock.now
            try await stack.saveUsage("alone")
            _ = try await eventually("the lone change's hint") { _ in first.notifications.last?.recordName == "alone" ? () : nil }
            #expect(ContinuousClock.now - started < .seconds(10))
            // Acknowledged in order: nothing is left behind the held one.
            let acked = try await child.call(PushMethods.ack, AckParams(upTo: first.notifications.last!.seq))
            #expect(acked.pending == 0)
        }
    }

    @Test("with --collapse-window 0 every change is its own notification")
    func noCollapseWindow() async throws {
        try await PushStack.inProcess(configure: { $0.collapseWindow = .zero }) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(subscriptionId: "zone", kind: .zone, zone: stack.child.zone))
            let listening = Listening(child)
            try await eventually("the stream open") { _ in
                try await stack.parent.call(PushMethods.listening, ListeningParams()).deviceIds.isEmpty ? nil : ()
            }
            // (The zone's earlier changes, from pairing, may come first: only these count.)
            let ours = { listening.notifications.compactMap(\.recordName).filter { $0.hasPrefix("each-") } }
            for index in 1...3 {
                try await stack.saveUsage("each-\(index)")
                _ = try await eventually("hint \(index) heard") { seen in
                    seen = "\(ours())"
                    return ours().count >= index ? () : nil
                }
            }
            #expect(ours() == ["each-1", "each-2", "each-3"])
        }
    }

    @Test("firesOnce: the subscription fires once and is gone")
    func firesOnce() async throws {
        try await PushStack.inProcess { stack in
            let parent = stack.parent
            _ = try await parent.call(PushMethods.subscribe, SubscribeParams(
                subscriptionId: "first", kind: .query, recordType: "UsageRecord", firesOnce: true))
            let listening = Listening(parent)
            try await stack.saveUsage("u1")
            try await stack.saveUsage("u2")
            try await listening.wait(for: 1)
            try await listening.expectQuiet(beyond: 1)
            #expect(try await parent.call(PushMethods.listSubscriptions, ListSubscriptionsParams()).subscriptions.isEmpty)
        }
    }

    @Test("an offline device gets everything on reconnect, in order, though push was killed and restarted in between")
    func offlineAcrossRestart() async throws {
        let stack = try await PushStack.start()
        defer { stack.stopNow() }
        _ = try await stack.parent.call(PushMethods.subscribe, SubscribeParams(kind: .query, recordType: "UsageRecord"))
        try await stack.saveUsage("a1")
        try await stack.saveUsage("a2")
        try await stack.waitUntilCaughtUp()
        await stack.kill()
        // Committed while the push service is down.
        try await stack.saveUsage("b1")
        try await stack.saveUsage("b2")
        try await stack.startPush()
        // The parent's client finds the new push service. Its connection to the killed one
        // may not have seen its end yet on a busy machine: a call on it fails `unavailable`
        // once, and the next opens a connection to the new process.
        try await eventually("the parent's client reaching the restarted push service") { seen in
            do {
                _ = try await stack.parent.call(Builtin.ping, Empty())
                return ()
            } catch {
                seen = "\(error)"
                return nil
            }
        }
        let listening = Listening(stack.parent)
        let received = try await listening.wait(for: 4)
        try await listening.expectQuiet(beyond: 4)
        #expect(received.map(\.recordName) == ["a1", "a2", "b1", "b2"], "each change once, in commit order")
        // A killed push service skips the numbers it had reserved: they only go up.
        let seqs = received.map(\.seq)
        #expect(seqs.prefix(2) == [1, 2] && seqs.count == 4 && seqs[2] > 2 && seqs[3] == seqs[2] + 1)
    }

    @Test("a push.notify retried with its request id after push was killed and restarted is not sent twice")
    func notifyRetriedAcrossRestart() async throws {
        let stack = try await PushStack.start()
        defer { stack.stopNow() }
        let alert = NotifyParams(family: stack.family.family, parents: true, alert: Alert(title: "Emma's reward time is used up"), requestId: "alert-7-9c41")
        let first = try await stack.local.call(PushMethods.notify, alert)
        await stack.kill()
        try await stack.startPush()
        let again = try await eventually("the retry reaching the restarted push service") { seen in
            do {
                return try await stack.local.call(PushMethods.notify, alert)
            } catch {
                seen = "\(error)"
                return nil
            }
        }
        #expect(again == first)
        let listening = Listening(stack.parent)
        let received = try await listening.wait(for: 1)
        try await listening.expectQuiet(beyond: 1)
        #expect(received.map(\.seq) == first.queued.map(\.seq))
    }

    @Test("away longer than the store keeps its change log, push skips what was purged and carries on")
    func skipsPurgedChanges() async throws {
        let stack = try await PushStack.start(storeArguments: ["--tombstone-grace", "0"])
        defer { stack.stopNow() }
        _ = try await stack.parent.call(PushMethods.subscribe, SubscribeParams(kind: .query, recordType: "UsageRecord"))
        try await stack.waitUntilCaughtUp()
        await stack.kill()
        try await stack.saveUsage("lost")
        // With a grace of 0, a purge takes changes older than now: let the clock move on.
        try await Task.sleep(for: .milliseconds(50))
        let purged = try await stack.harness.storeClient().call(StoreMethods.purge, PurgeParams())
        #expect(purged.watchHorizon > 0)
        try await stack.startPush()
        try await stack.waitUntilCaughtUp()
        try await stack.saveUsage("after")
        let listening = Listening(stack.parent)
        let received = try await listening.wait(for: 1)
        try await listening.expectQuiet(beyond: 1)
        #expect(received.map(\.recordName) == ["after"])
        #expect(stack.pushLog.contains("changes were purged from the store before push saw them"))
    }

    @Test("acknowledged notifications are gone; the rest come again on the next listen")
    func ackAndRedelivery() async throws {
        try await PushStack.inProcess { stack in
            let parent = stack.parent
            _ = try await parent.call(PushMethods.subscribe, SubscribeParams(kind: .query, recordType: "UsageRecord"))
            let first = Listening(parent)
            for name in ["u1", "u2", "u3"] { try await stack.saveUsage(name) }
            try await first.wait(for: 3)
            let acked = try await parent.call(PushMethods.ack, AckParams(upTo: 2))
            #expect(acked.acked == 2 && acked.pending == 1)
            first.cancel()

            let again = Listening(stack.parent)
            let redelivered = try await again.wait(for: 1)
            try await again.expectQuiet(beyond: 1)
            #expect(redelivered.map(\.seq) == [3] && redelivered.first?.recordName == "u3")
            // Acknowledging past the end stops at the last notification.
            #expect(try await parent.call(PushMethods.ack, AckParams(upTo: 99)).acked == 3)
        }
    }

    @Test("expired notifications are dropped; a newer one with the same collapse key replaces the pending one")
    func ttlAndCollapse() async throws {
        try await PushStack.inProcess { stack in
            let local = stack.local
            _ = try await local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "short-lived"), ttlSeconds: 1))
            _ = try await local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "balance 10 min"), collapseKey: "balance"))
            let latest = try await local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "balance 5 min"), collapseKey: "balance"))
            #expect(latest.queued == [QueuedNotification(deviceId: "mum-phone", seq: 3)])
            // The first one's time to live is a second: it expires on the clock.
            try await Task.sleep(for: .milliseconds(1200))
            let listening = Listening(stack.parent)
            let received = try await listening.wait(for: 1)
            try await listening.expectQuiet(beyond: 1)
            #expect(received.map(\.alert?.title) == ["balance 5 min"])
            #expect(received.first?.reason == .message)
        }
    }

    @Test("zone subscriptions are fetch-changes hints, collapsed while pending")
    func zoneSubscription() async throws {
        try await PushStack.inProcess { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(subscriptionId: "mine", kind: .zone, zone: stack.child.zone))
            for name in ["u1", "u2", "u3"] { try await stack.saveUsage(name) }
            try await stack.waitUntilCaughtUp()
            let listening = Listening(child)
            let received = try await listening.wait(for: 1)
            try await listening.expectQuiet(beyond: 1)
            #expect(received.first?.reason == .zoneChanged && received.first?.zone == stack.child.zone && received.first?.recordName == "u3")
        }
    }

    @Test("zone and family subscriptions fire on every change, and say so: firesOn is all three, as the doc's default")
    func zoneSubscriptionFiresOnAll() async throws {
        try await PushStack.inProcess { stack in
            let child = stack.client(token: stack.child.token)
            let zone = try await child.call("push.subscribe", params: ["kind": "zone", "zone": .string(stack.child.zone)])
            let family = try await stack.parent.call("push.subscribe", params: ["kind": "family"])
            let query = try await child.call("push.subscribe", params: ["kind": "query", "recordType": "UsageRecord"])
            for subscription in [zone, family, query] {
                #expect(subscription["firesOn"] == ["create", "delete", "update"], "\(subscription)")
            }
            let listed = try await child.call("push.listSubscriptions")["subscriptions"]?.arrayValue ?? []
            #expect(listed.count == 2 && listed.allSatisfy { $0["firesOn"] == ["create", "delete", "update"] }, "\(listed)")
        }
    }
}
