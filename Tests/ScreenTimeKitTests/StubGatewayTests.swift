import Foundation
import PairingAPI
import PushAPI
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

/// The WebSocket transport end to end, against a stand-in for the gateway's `/v1/ws`
/// (``StubGateway``) in front of the real services: pinned TLS through the tunnel, the
/// Bearer token at the upgrade, pipelined calls, `push.listen` as a stream, reconnection.
@Suite("ScreenTimeKit over a WebSocket (a stand-in gateway)", .serialized, .disabled("passes alone, but under the full suite's load a call gives up on the 5 s connect wait before the tunnel and upgrade are done: to be made independent of load with the real-gateway suite (issue 27)"))
struct StubGatewayTests {
    @Test("pairing, a rule and a notification, usage; the gateway dropped and back: the queued write arrives once, notifications go on")
    func overWebSocket() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push"])
        defer { stack.stopAll() }
        let (keys, certificate, key) = try TLSTestServer.makeCertificate(gatewayShaped: true)
        _ = keys
        var gateway = try await StubGateway.start(runtimeDirectory: stack.directory.path, identity: (certificate, key))
        let pin = gateway.pin.description
        func remote(_ name: String, link: PairingLink? = nil) throws -> ScreenTimeClient {
            try ScreenTimeClient.remote(credentials: FileCredentialStore(path: stack.directory.file("\(name).credential")),
                                        databasePath: stack.directory.file("\(name).sqlite"), link: link, backoff: KitStack.fast)
        }
        let encodedPin = pin.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? pin
        let bootstrap = try #require(PairingLink("screentime://pair?v=2&server=x&family=smith&invitation=x&secret=x&url=\(gateway.url)&pin=\(encodedPin)"))

        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        let parent = try remote("parent", link: bootstrap)
        try await parent.pairing.enroll(family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone", urls: [gateway.url], pin: pin)
        let invitation = try await parent.pairing.inviteChild(childId: "emma")
        // The server's pairing URI is version 1 here (no gateway in this branch): add the gateway as version 2 would.
        let childURI = invitation.uri.replacingOccurrences(of: "v=1", with: "v=2") + "&url=\(gateway.url)&pin=\(encodedPin)"
        let child = try remote("child", link: try #require(PairingLink(childURI)))
        let pending = try await child.pairing.accept(uri: childURI, deviceId: "emma-ipad", deviceName: "Emma's iPad")
        #expect(try await parent.pairing.waitForAcceptance(of: invitation) == pending.shortCode)
        try await parent.pairing.confirm(invitation)
        let identity = try await pending.waitForConfirmation()
        #expect(identity.urls == [gateway.url] && identity.pin == pin)

        // A rule, heard by the child through push.listen over the WebSocket, applied.
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: invitation.zone, firesOn: [.create])
        let heard = Arrivals<PushNotification>()
        let listener = Task { try await child.notifications.handle { heard.append($0) } }
        defer { listener.cancel() }
        _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning"), for: "emma")
        try await within(.seconds(20), "the parent's queue drained") { await parent.queue.waitUntilDrained() }
        _ = try await heard.wait(for: 1, timeout: .seconds(20), "the command's notification over the WebSocket")
        let applied = try await child.child.applyPendingCommands { _ in }
        #expect(applied.executed.count == 1)
        try await within(.seconds(20), "the child's queue drained") { await child.queue.waitUntilDrained() }

        // The gateway goes away: the child's usage waits in its queue.
        let log = QueueLog(child.queue)
        let port = gateway.port
        await gateway.stop()
        try await waitUntil("the child sees the gateway gone") { child.transport.state != .connected }
        let ids = try child.child.uploadUsage([UsageSession(logicalID: "org.khan", category: "learning", start: todayUTC(0, 1), end: todayUTC(0, 11))])
        _ = try await log.events.wait(for: 1, "an attempt that could not be sent")
        #expect(log.applied.isEmpty)

        // Back on the same address with the same key: the write arrives once, the stream resumes.
        gateway = try await StubGateway.start(runtimeDirectory: stack.directory.path, port: port, identity: (certificate, key))
        try await within(.seconds(20), "the child's queue drained after the reconnect") { await child.queue.waitUntilDrained() }
        try await waitUntil("the batch reported applied") { log.applied.count == 1 }
        #expect(log.applied.map(\.0.requestId) == ids)
        #expect(log.applied.allSatisfy { !$0.1.replayed })
        #expect(try await parent.records.queryAll(UsageRecord.self, in: invitation.zone).count == 1)
        _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: "com.game", classification: "reward"), for: "emma")
        try await within(.seconds(20), "the parent's queue drained again") { await parent.queue.waitUntilDrained() }
        let all = try await heard.wait(for: 2, timeout: .seconds(20), "the second command's notification after the reconnect")
        #expect(Set(all.map(\.seq)).count == 2)

        listener.cancel()
        await child.close()
        await parent.close()
        await gateway.stop()
    }
}
