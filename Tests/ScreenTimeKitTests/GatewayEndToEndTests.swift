import Foundation
import PairingAPI
import PushAPI
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

/// The same library over the network: the family story through `screentime-gatewayd`,
/// over TLS with its key pinned from the pairing URI, and a connection lost and recovered.
///
/// It starts the gateway as the gateway's own tests do (`--listen 127.0.0.1:0`, its endpoint published in
/// `<state>/gateway/endpoint.json`) and takes the URL and pin from there.
@Suite("ScreenTimeKit through the gateway", .serialized, .disabled("written against a stand-in; against the real screentime-gatewayd it does not finish yet (issue 27): the next step"))
struct GatewayEndToEndTests {
    struct Endpoint: Decodable {
        var urls: [String]
        var pin: String
    }

    static func startGateway(_ stack: KitStack) async throws -> (ServiceProcess, Endpoint) {
        let endpointFile = (stack.state as NSString).appendingPathComponent("gateway/endpoint.json")
        try? FileManager.default.removeItem(atPath: endpointFile)
        let gateway = try ServiceProcess(
            executable: Binaries.path("screentime-gatewayd"),
            arguments: ["--runtime-dir", stack.directory.path, "--state-dir", stack.state, "--log-level", "debug",
                        "--listen", "127.0.0.1:0", "--host", "127.0.0.1", "--host", "localhost"],
            socketPath: endpointFile, logPath: stack.directory.file("gateway.log"), environment: [:])
        try await waitUntil("the gateway publishes its endpoint", detail: gateway.log) {
            FileManager.default.fileExists(atPath: endpointFile) && gateway.log.contains("ready")
        }
        let endpoint = try JSONDecoder().decode(Endpoint.self, from: Data(contentsOf: URL(fileURLWithPath: endpointFile)))
        return (gateway, endpoint)
    }

    static func remoteKit(_ stack: KitStack, _ name: String, _ endpoint: Endpoint) throws -> ScreenTimeClient {
        let credentials = FileCredentialStore(path: stack.directory.file("\(name).credential"))
        let link = PairingLink("screentime://pair?v=2&server=x&family=x&invitation=x&secret=x&url=\(endpoint.urls[0])&pin=\(endpoint.pin.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")
        return try ScreenTimeClient.remote(credentials: credentials, databasePath: stack.directory.file("\(name).sqlite"), link: link, backoff: KitStack.fast)
    }

    @Test("the family story over TLS; a wrong pin refused; usage recorded while the gateway is down arrives once")
    func familyStoryRemote() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        var (gateway, endpoint) = try await Self.startGateway(stack)
        defer { gateway.stopNow() }

        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        let parent = try Self.remoteKit(stack, "parent", endpoint)
        try await parent.pairing.enroll(family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone",
                                        urls: endpoint.urls, pin: endpoint.pin)
        let invitation = try await parent.pairing.inviteChild(childId: "emma")
        let link = try #require(PairingLink(invitation.uri))
        #expect(link.pin == endpoint.pin)
        let child = try ScreenTimeClient.remote(credentials: FileCredentialStore(path: stack.directory.file("child.credential")),
                                                databasePath: stack.directory.file("child.sqlite"), link: link, backoff: KitStack.fast)
        let pending = try await child.pairing.accept(uri: invitation.uri, deviceId: "emma-ipad", deviceName: "Emma's iPad")
        #expect(try await parent.pairing.waitForAcceptance(of: invitation) == pending.shortCode)
        try await parent.pairing.confirm(invitation)
        try await pending.waitForConfirmation()

        // Offline: the gateway stops while the child records usage.
        let log = QueueLog(child.queue)
        await gateway.stop()
        let ids = try child.child.uploadUsage([UsageSession(logicalID: "org.khan", category: "learning", start: todayUTC(0, 1), end: todayUTC(0, 11))])
        try await waitUntil("the child sees the gateway gone") { child.transport.state != .connected }
        (gateway, endpoint) = try await Self.startGateway(stack)
        await child.queue.waitUntilDrained()
        try await waitUntil("the batch reported applied") { log.applied.count == 1 }
        #expect(log.applied.map(\.0.requestId) == ids)
        #expect(try await parent.records.queryAll(UsageRecord.self, in: invitation.zone).count == 1)

        // A wrong pin: refused, never connected.
        let wrong = FileCredentialStore(path: stack.directory.file("wrong.credential"))
        var identity = try #require(child.identity)
        identity.pin = String(repeating: "A", count: 43) + "="
        try wrong.save(identity)
        let refused = try ScreenTimeClient.remote(credentials: wrong, databasePath: stack.directory.file("wrong.sqlite"))
        await #expect(throws: RPCError.self) { _ = try await refused.child.pendingCommands() }
        await refused.close()
        await child.close()
        await parent.close()
    }
}
