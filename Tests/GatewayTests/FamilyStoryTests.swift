import Foundation
import PairingAPI
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// The family's story, every device step through the gateway over TLS with the key pinned:
/// curl for HTTP, a TLS WebSocket for the live parts.
@Suite("Gateway: the family story", .serialized, .timeLimit(.minutes(3)))
struct FamilyStoryTests {
    @Test("enroll, pair with the URI's pin, configure, upload usage, live notifications, ack, resume after a drop")
    func familyStory() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }

        // The administrator, on the server: a family and the first parent's enrollment code,
        // which carries the gateway's URLs and pin.
        let code = try await stack.harness.pairingClient().call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "Europe/Paris"))
        #expect(code.pin == stack.endpoint.pin)
        #expect(code.urls == stack.endpoint.urls)

        // The parent's phone: enrolls through the gateway with no credential.
        let credential = try await stack.result("pairing.enrollParent", json(EnrollParentParams(
            family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone", displayName: "Mum")))
        let parentToken = try #require(credential["token"]?.stringValue)

        // An invitation: its URI carries the URL and pin the child's device will use.
        let invitation = try await stack.result("pairing.createInvitation", json(CreateInvitationParams(childId: "emma", childName: "Emma")), token: parentToken)
        let uriText = try #require(invitation["uri"]?.stringValue)
        let uri = try #require(PairingURI(uriText))
        #expect(uri.pin == stack.endpoint.pin)
        #expect(uri.urls.contains(stack.url))

        // The child's tablet: only what the URI says (the URL, the pin), no CA file.
        let accepted = try await curl(uri.urls.first { $0.contains("127.0.0.1") }! + "/v1/rpc", pin: uri.pin, caFile: stack.endpoint.certificate, arguments: [
            "--data-binary", envelope(id: 1, method: "pairing.acceptInvitation", params: json(AcceptInvitationParams(
                family: uri.family, invitationId: uri.invitationId, secret: uri.secret, deviceId: "emma-ipad", deviceName: "Emma's iPad"))),
        ])
        #expect(accepted.status == 200, "\(accepted.body) \(accepted.stderr)")
        let childToken = try #require(accepted.json?["result"]?["credential"]?["token"]?.stringValue)
        let zone = try #require(accepted.json?["result"]?["zone"]?.stringValue)
        _ = try await stack.result("pairing.confirm", json(InvitationParams(invitationId: uri.invitationId)), token: parentToken)

        // Both devices listen on WebSockets: the parent for usage, the child for its zone.
        let parent = try await DeviceWebSocket(stack: stack, token: parentToken)
        await parent.request(1, "push.subscribe", json(SubscribeParams(subscriptionId: "usage", kind: .query, zone: zone, recordType: "UsageRecord")))
        #expect(try await parent.reply(to: 1)["result"] != nil)
        parent.request(2, "push.listen")
        let child = try await DeviceWebSocket(stack: stack, token: childToken)
        await child.request(1, "push.subscribe", json(SubscribeParams(subscriptionId: "commands", kind: .zone, zone: zone)))
        #expect(try await child.reply(to: 1)["result"] != nil)
        child.request(2, "push.listen")

        // The parent configures an app: the command lands in the child's zone, the child hears of it live.
        let command = RecordSave(recordType: "ConfigurationCommand", recordName: "rule-1", fields: [
            "commandID": "rule-1", "targetDeviceID": "emma-ipad", "commandType": "updateAppRule",
            "payloadJSON": "{\"bundleId\":\"org.khan\",\"classification\":\"learning\"}", "createdAt": .date(Date()), "status": "pending",
        ])
        let saved = try await stack.rpc("store.modify", json(ModifyParams(family: "smith", zone: zone, saves: [command], atomic: true)), token: parentToken)
        #expect(saved.status == 200, "\(saved.body)")
        let heard = try await child.reply(to: 2)
        #expect(heard["continues"] == true)
        #expect(heard["result"]?["recordName"]?.stringValue == "rule-1")

        // The child uploads usage over its WebSocket; the parent hears of it live, and acknowledges.
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        let usage = { (name: String) in json(ModifyParams(family: "smith", zone: zone, saves: [RecordSave(recordType: "UsageRecord", recordName: name, fields: [
            "logicalID": "org.khan", "deviceID": "emma-ipad", "category": "learning",
            "sessionStart": .date(start), "sessionEnd": .date(start.addingTimeInterval(600)), "totalSeconds": 600,
        ])], atomic: true)) }
        child.request(3, "store.modify", usage("u1"))
        #expect(try await child.reply(to: 3)["result"] != nil)
        let notification = try await parent.reply(to: 2)
        #expect(notification["result"]?["recordName"]?.stringValue == "u1")
        let seq = try #require(notification["result"]?["seq"]?.intValue)
        await parent.request(3, "push.ack", json(AckParams(upTo: seq)))
        #expect(try await parent.reply(to: 3)["result"]?["acked"]?.intValue == seq)

        // The parent's phone drops; usage arrives meanwhile; on its return it gets it, and only it.
        await parent.close()
        child.request(4, "store.modify", usage("u2"))
        #expect(try await child.reply(to: 4)["result"] != nil)
        let back = try await DeviceWebSocket(stack: stack, token: parentToken)
        back.request(1, "push.listen")
        let missed = try await back.reply(to: 1)
        #expect(missed["result"]?["recordName"]?.stringValue == "u2")
        #expect(missed["result"]?["seq"]?.intValue == seq + 1)

        // A one-way request over HTTP (no id): run, and 204 with no body.
        let oneWay = try await curl(stack.url + "/v1/rpc", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: [
            "-H", "Authorization: Bearer \(parentToken)", "--data-binary", envelope(id: nil, method: "rpc.ping", params: [:]),
        ])
        #expect(oneWay.status == 204 && oneWay.body.isEmpty, "\(oneWay)")

        // rpc.cancel ends the stream with `cancelled`, as on a Unix socket.
        back.request(2, "rpc.cancel", ["id": 1])
        var replies: [JSONValue] = []
        while replies.count < 2 { replies.append(try await back.next()) }
        #expect(replies.contains { $0["id"] == 2 && $0["result"]?["cancelled"] == true })
        #expect(replies.contains { $0["id"] == 1 && $0["error"]?["code"] == "cancelled" })
        await back.close()
        await child.close()
    }
}

extension JSONValue {
    var intValue: Int64? { if case .int(let value) = self { return value } else { return nil } }
}
