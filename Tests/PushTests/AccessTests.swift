import Foundation
import PairingAPI
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Push: who may hear of what", .serialized)
struct AccessTests {
    @Test("a child cannot subscribe to another child's zone, to the whole family, or to an internal zone")
    func childSubscriptionsAreBounded() async throws {
        try await PushStack.inProcess { stack in
            let other = try await stack.family.pairChild(stack.harness, child: "leo", device: "leo-ipad")
            let child = stack.client(token: stack.child.token)
            let refused = await expectError(.forbidden) {
                _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .zone, zone: other.zone))
            }
            #expect(refused?.message == "this device may not read zone \(other.zone), so it cannot subscribe to it")
            await expectError(.forbidden) {
                _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .query, zone: other.zone, recordType: "UsageRecord"))
            }
            await expectError(.forbidden) { _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .family)) }
            await expectError(.forbidden) { _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .zone, zone: "_pairing")) }
            // Its own zone is fine.
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .zone, zone: stack.child.zone))
        }
    }

    @Test("a subscription across zones notifies a child only of the zones it may read")
    func deliveryFollowsShares() async throws {
        try await PushStack.inProcess { stack in
            let other = try await stack.family.pairChild(stack.harness, child: "leo", device: "leo-ipad")
            let child = stack.client(token: stack.child.token)
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .query, recordType: "UsageRecord"))
            let listening = Listening(child)
            try await other.saveUsage("leo-1", family: "smith")
            try await stack.saveUsage("emma-1")
            let received = try await listening.wait(for: 1)
            try await listening.expectQuiet(beyond: 1)
            #expect(received.map(\.recordName) == ["emma-1"])
        }
    }

    @Test("revoking a device ends its live stream and refuses it afterwards")
    func revocationEndsTheStream() async throws {
        try await PushStack.inProcess { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await child.call(PushMethods.subscribe, SubscribeParams(kind: .zone, zone: stack.child.zone))
            let listening = Listening(child)
            try await stack.saveUsage("u1")
            try await listening.wait(for: 1)
            _ = try await stack.family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: stack.child.deviceId))
            try await waitUntil("the revoked device's stream ending") { listening.error != nil }
            #expect((listening.error as? RPCError)?.code == .deviceRevoked)
            await expectError(.deviceRevoked) { _ = try await child.call(PushMethods.ack, AckParams(upTo: 1)) }
        }
    }

    @Test("push.notify is for local services; a parent's listen gets what they send")
    func notifyIsLocal() async throws {
        try await PushStack.inProcess { stack in
            await expectError(.forbidden) {
                _ = try await stack.parent.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "hi")))
            }
            let listening = Listening(stack.parent)
            let sent = try await stack.local.call(PushMethods.notify, NotifyParams(
                family: "smith", parents: true, alert: Alert(title: "Reward time used up", body: "Emma has no reward time left today"),
                data: ["childId": "emma"], priority: .high))
            #expect(sent.queued.map(\.deviceId) == ["mum-phone"])
            let received = try await listening.wait(for: 1)
            #expect(received.first?.alert?.body == "Emma has no reward time left today" && received.first?.priority == .high)
            #expect(received.first?.fields == ["childId": "emma"])
            await expectError(.notFound) {
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: "nobody", alert: Alert(title: "hi")))
            }
        }
    }

    @Test("push.notify with a request id, sent again (a caller's retry after its restart), queues nothing more and answers as the first; another id is another notification")
    func notifyRetriedByRequestID() async throws {
        try await PushStack.inProcess { stack in
            let listening = Listening(stack.parent)
            let digest = NotifyParams(family: "smith", parents: true, alert: Alert(title: "The week of 23 Nov to 29 Nov"), requestId: "notify-1f2e")
            let first = try await stack.local.call(PushMethods.notify, digest)
            let again = try await stack.local.call(PushMethods.notify, digest)
            #expect(first.queued == [QueuedNotification(deviceId: "mum-phone", seq: 1)] && again == first)
            // The id is what counts: used again for another notification, it sends nothing.
            var reused = digest
            reused.alert = Alert(title: "Another week")
            #expect(try await stack.local.call(PushMethods.notify, reused) == first)
            let other = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "Next"), requestId: "notify-2a"))
            #expect(other.queued.map(\.seq) == [2])
            let received = try await listening.wait(for: 2)
            try await listening.expectQuiet(beyond: 2)
            #expect(received.map(\.alert?.title) == ["The week of 23 Nov to 29 Nov", "Next"])
            for bad in ["", String(repeating: "x", count: 256), "line\nbreak"] {
                await expectError(.invalidParams) {
                    _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "hi"), requestId: bad))
                }
            }
        }
    }
}
