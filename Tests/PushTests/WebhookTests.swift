import Foundation
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Push: webhooks (UnifiedPush, ntfy), retries, endpoints that are gone", .serialized)
struct WebhookTests {
    static let fastRetries = ["--webhooks", "--webhook-retry", "0.05", "--webhook-timeout", "2"]
    /// For tests that count posts: an endpoint that answers at once is never taken for one
    /// that did not answer, even on a loaded machine (delivery is at least once: an answer
    /// not seen within --webhook-timeout is retried).
    static let patientRetries = ["--webhooks", "--webhook-retry", "0.05", "--webhook-timeout", "20"]

    @Test("off by default: setting a webhook is refused, saying how to turn it on")
    func offByDefault() async throws {
        try await PushStack.inProcess { stack in
            await expectError(.unavailable, containing: "--webhooks") {
                _ = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(url: "https://ntfy.sh/kids", format: .ntfy))
            }
            await expectError(.notFound) { _ = try await stack.parent.call(PushMethods.getWebhook, Empty()) }
        }
    }

    @Test("UnifiedPush: a device that is not listening gets each notification posted, JSON with its seq; a listening one does not")
    func unifiedPush() async throws {
        let endpoint = try await WebhookEndpoint.start()
        defer { endpoint.stop() }
        let stack = try await PushStack.start(pushArguments: Self.patientRetries)
        defer { stack.stopNow() }
        let parent = stack.family.parentCredential.deviceId
        let info = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(
            url: endpoint.base + "/upAbC123?up=1", format: .unifiedpush, authorization: "Bearer tk_secret"))
        #expect(info.status == .active && info.hasAuthorization && info.pending == 0)

        _ = try await stack.local.call(PushMethods.notify, NotifyParams(
            family: stack.family.family, deviceId: parent, alert: Alert(title: "Reward time used up"), priority: .high, ttlSeconds: 600))
        let posted = try await endpoint.wait(for: 1)[0]
        #expect(posted.method == "POST" && posted.path == "/upAbC123?up=1")
        #expect(posted.headers["authorization"] == "Bearer tk_secret")
        #expect(posted.headers["urgency"] == "high")
        #expect((590...600).contains(Int(posted.headers["ttl"] ?? "") ?? 0))
        let notification = try RPCJSON.makeDecoder().decode(PushNotification.self, from: Data(posted.body.utf8))
        #expect(notification.seq == 1 && notification.reason == .message && notification.alert?.title == "Reward time used up")

        // Listening: it arrives on the stream, and is not posted as well.
        let listening = Listening(stack.parent)
        _ = try await listening.wait(for: 1)  // the backlog: seq 1, not acknowledged
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, alert: Alert(title: "Second")))
        _ = try await listening.wait(for: 2)
        // A post that should not happen can only be looked for over a while.
        try await Task.sleep(for: .milliseconds(300))
        let seqs = try endpoint.received.map { try RPCJSON.makeDecoder().decode(PushNotification.self, from: Data($0.body.utf8)).seq }
        #expect(seqs == [1], "posted: \(seqs)")
        let after = try await stack.parent.call(PushMethods.getWebhook, Empty())
        #expect(after.deliveredAt != nil && after.lastError == nil && after.pending == 0)
        listening.cancel()
    }

    @Test("UnifiedPush: a notification over the distributors' 4096 bytes goes without its fields, marked truncated")
    func unifiedPushLimit() async throws {
        let endpoint = try await WebhookEndpoint.start()
        defer { endpoint.stop() }
        let stack = try await PushStack.start(pushArguments: Self.fastRetries)
        defer { stack.stopNow() }
        _ = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(url: endpoint.base + "/up", format: .unifiedpush))
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(
            family: stack.family.family, deviceId: stack.family.parentCredential.deviceId, alert: Alert(title: "Weekly report"),
            data: ["report": .string(String(repeating: "x", count: 6000))]))
        let posted = try await endpoint.wait(for: 1)[0]
        #expect(posted.body.utf8.count <= 4096)
        let body = try RPCJSON.makeDecoder().decode(JSONValue.self, from: Data(posted.body.utf8))
        #expect(body.objectValue?["truncated"] == true && body.objectValue?["fields"] == nil && body.objectValue?["seq"] == 1)
        #expect(body.objectValue?["alert"] == ["title": "Weekly report"])
    }

    @Test("ntfy: alerts are posted with title, priority and message; silent change hints are not")
    func ntfy() async throws {
        let endpoint = try await WebhookEndpoint.start()
        defer { endpoint.stop() }
        let stack = try await PushStack.start(pushArguments: Self.patientRetries)
        defer { stack.stopNow() }
        _ = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(url: endpoint.base + "/family-alerts", format: .ntfy))
        _ = try await stack.parent.call(PushMethods.subscribe, SubscribeParams(kind: .zone, zone: stack.child.zone))
        try await stack.saveUsage("u1")  // a silent "fetch changes" hint: not for ntfy
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(
            family: stack.family.family, parents: true, alert: Alert(title: "Léa's balance is empty", body: "Reward apps are shielded."), priority: .low))
        let posted = try await endpoint.wait(for: 1)
        // A post that should not happen (the silent hint) can only be looked for over a while.
        try await Task.sleep(for: .milliseconds(300))
        #expect(endpoint.received.map(\.body) == ["Reward apps are shielded."])
        #expect(posted[0].path == "/family-alerts")
        #expect(posted[0].headers["title"] == "=?UTF-8?B?\(Data("Léa's balance is empty".utf8).base64EncodedString())?=")
        #expect(posted[0].headers["priority"] == "2" && posted[0].headers["tags"] == "screentime")
        #expect(posted[0].body == "Reward apps are shielded.")
        #expect(try await stack.parent.call(PushMethods.getWebhook, Empty()).pending == 0)
    }

    @Test("a failing endpoint is retried with backoff until it accepts, also across a restart of push")
    func retries() async throws {
        // Failing until told otherwise: push's retries cannot get through before the test looks.
        let endpoint = try await WebhookEndpoint.start(answering: Array(repeating: 503, count: 10_000))
        defer { endpoint.stop() }
        let stack = try await PushStack.start(pushArguments: ["--webhooks", "--webhook-retry", "0.3"])
        defer { stack.stopNow() }
        let parent = stack.family.parentCredential.deviceId
        _ = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(url: endpoint.base + "/up", format: .unifiedpush))
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, data: ["n": 1]))
        _ = try await endpoint.wait(for: 1)
        let failing = try await eventually("push recording the endpoint's failing answer") { seen in
            let webhook = try await stack.parent.call(PushMethods.getWebhook, Empty())
            seen = "\(webhook)"
            return webhook.lastError == nil ? nil : webhook
        }
        #expect(failing.lastError?.contains("HTTP 503") == true && failing.pending == 1, "\(failing)")

        // Killed while a retry is pending: the outbox is on disk. The endpoint then fails once
        // more and accepts.
        await stack.kill()
        let before = endpoint.received.count
        endpoint.answer([500])
        try await stack.startPush()
        let posted = try await endpoint.wait(for: before + 2)
        #expect(Set(posted.map(\.body)).count == 1, "the same notification each time")
        // Accepted: push records the delivery and its outbox is empty, so nothing more comes.
        let delivered = try await eventually("push recording the delivery") { seen in
            let webhook = try await stack.parent.call(PushMethods.getWebhook, Empty())
            seen = "\(webhook)"
            return webhook.deliveredAt != nil && webhook.pending == 0 ? webhook : nil
        }
        #expect(delivered.lastError == nil)
        #expect(endpoint.received.count == before + 2, "nothing more once accepted")
    }

    @Test("an endpoint that answers 410 is marked gone and gets nothing more; setting it again revives it")
    func gone() async throws {
        let endpoint = try await WebhookEndpoint.start(answering: [410])
        defer { endpoint.stop() }
        let stack = try await PushStack.start(pushArguments: Self.patientRetries)
        defer { stack.stopNow() }
        let parent = stack.family.parentCredential.deviceId
        let params = SetWebhookParams(url: endpoint.base + "/up", format: .unifiedpush)
        _ = try await stack.parent.call(PushMethods.setWebhook, params)
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, data: ["n": 1]))
        _ = try await endpoint.wait(for: 1)
        let gone = try await eventually("push marking the endpoint gone") { seen in
            let webhook = try await stack.parent.call(PushMethods.getWebhook, Empty())
            seen = "\(webhook)"
            return webhook.status == .gone ? webhook : nil
        }
        #expect(gone.lastError?.contains("HTTP 410") == true)
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, data: ["n": 2]))
        // A post that should not happen can only be looked for over a while.
        try await Task.sleep(for: .milliseconds(300))
        #expect(endpoint.received.count == 1)

        _ = try await stack.parent.call(PushMethods.setWebhook, params)
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, data: ["n": 3]))
        let posted = try await endpoint.wait(for: 2)
        #expect(posted[1].body.contains(#""n":3"#))
        #expect(try await stack.parent.call(PushMethods.removeWebhook, Empty()).removed)
        #expect(try await stack.parent.call(PushMethods.removeWebhook, Empty()).removed == false)
    }

    @Test("a 400 drops that notification only: it is not retried, and it stays queued for the device")
    func refused() async throws {
        let endpoint = try await WebhookEndpoint.start(answering: [400])
        defer { endpoint.stop() }
        // Patient: a local endpoint's 400 can take seconds to come back under a full parallel
        // run, and one not seen in time would be recorded as a timeout.
        let stack = try await PushStack.start(pushArguments: Self.patientRetries)
        defer { stack.stopNow() }
        let parent = stack.family.parentCredential.deviceId
        _ = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(url: endpoint.base + "/up", format: .unifiedpush))
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, data: ["n": 1]))
        _ = try await endpoint.wait(for: 1)
        // Refused: push records why and drops it from the outbox, so no retry can come.
        let refused = try await eventually("push recording the refusal") { seen in
            let webhook = try await stack.parent.call(PushMethods.getWebhook, Empty())
            seen = "\(webhook)"
            return webhook.lastError?.contains("HTTP 400") == true && webhook.pending == 0 ? webhook : nil
        }
        #expect(refused.status == .active)
        #expect(endpoint.received.count == 1, "not retried")
        let queued = try await Listening(stack.parent).wait(for: 1)
        #expect(queued.map(\.fields) == [["n": 1]], "it stays queued for the device")
    }

    @Test("an endpoint that never answers times out, is retried, and is given up on after the last attempt; the notification stays queued for the device")
    func timedOut() async throws {
        // `0`: the endpoint reads the post and never answers, so every attempt times out
        // however loaded the machine is.
        let endpoint = try await WebhookEndpoint.start(answering: [0, 0, 0])
        defer { endpoint.stop() }
        let stack = try await PushStack.start(pushArguments: ["--webhooks", "--webhook-retry", "0.05", "--webhook-timeout", "0.5", "--webhook-attempts", "3"])
        defer { stack.stopNow() }
        let parent = stack.family.parentCredential.deviceId
        _ = try await stack.parent.call(PushMethods.setWebhook, SetWebhookParams(url: endpoint.base + "/up", format: .unifiedpush))
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: parent, data: ["n": 2]))
        _ = try await endpoint.wait(for: 3, timeout: .seconds(30))
        // Given up: the outbox is empty after the last attempt, so no more can come.
        let abandoned = try await eventually("push giving up after the last attempt", timeout: .seconds(30)) { seen in
            let webhook = try await stack.parent.call(PushMethods.getWebhook, Empty())
            seen = "\(webhook)"
            return webhook.lastError?.contains("timed out") == true && webhook.pending == 0 ? webhook : nil
        }
        #expect(abandoned.status == .active)
        #expect(endpoint.received.count == 3, "three attempts, then no more")
        let queued = try await Listening(stack.parent).wait(for: 1)
        #expect(queued.map(\.fields) == [["n": 2]], "it stays queued for the device")
    }

    @Test("bad webhook settings get invalid_params naming the field")
    func badInput() async throws {
        let stack = try await PushStack.start(pushArguments: Self.fastRetries)
        defer { stack.stopNow() }
        let cases: [(SetWebhookParams, String)] = [
            (SetWebhookParams(url: "ftp://ntfy.sh/kids", format: .ntfy), "params.url"),
            (SetWebhookParams(url: "not a url", format: .ntfy), "params.url"),
            (SetWebhookParams(url: "https://", format: .ntfy), "params.url"),
            (SetWebhookParams(url: "https://mum:secret@ntfy.sh/kids", format: .ntfy), "params.url"),
            (SetWebhookParams(url: "https://ntfy.sh/" + String(repeating: "a", count: 2100), format: .ntfy), "params.url"),
            (SetWebhookParams(url: "https://ntfy.sh/kids", format: .ntfy, authorization: "Bearer x\r\nX-Evil: 1"), "params.authorization"),
            (SetWebhookParams(url: "https://ntfy.sh/kids", format: .ntfy, authorization: ""), "params.authorization"),
        ]
        for (params, field) in cases {
            await expectError(.invalidParams, containing: field) { _ = try await stack.parent.call(PushMethods.setWebhook, params) }
        }
        await expectError(.invalidParams, containing: "format") {
            _ = try await stack.parent.call("push.setWebhook", params: ["url": "https://ntfy.sh/kids", "format": "apns"])
        }
        await expectError(.unauthorized) {
            _ = try await stack.local.call(PushMethods.setWebhook, SetWebhookParams(url: "https://ntfy.sh/kids", format: .ntfy))
        }
        #expect(try await stack.local.call(PushMethods.listSubscriptions, ListSubscriptionsParams(family: stack.family.family)).subscriptions.isEmpty,
                "the service is still up")
    }
}
