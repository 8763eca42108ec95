import AggregatorAPI
import Foundation
import PairingAPI
import ProcessSpawn
import PushAPI
import RPCCore
@testable import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

/// The same library over the network: the family story through the real
/// `screentime-gatewayd`, over TLS with its key pinned from the pairing URI, `push.listen`
/// streamed over the WebSocket, and the gateway stopped and started again.
///
/// The gateway starts as its own tests start it (`--listen 127.0.0.1:0`, its endpoint
/// published in `<state>/gateway/endpoint.json`); the URL and pin come from there. A restart
/// listens on the port the first start chose: a paired device keeps the URLs it was given
/// (in production the port is fixed, 8443), so a gateway that came back on another port
/// would be a different server to it.
@Suite("ScreenTimeKit through the gateway", .serialized)
struct GatewayEndToEndTests {
    struct Endpoint: Decodable {
        var urls: [String]
        var pin: String
        var port: Int { URLComponents(string: self.urls[0])?.port ?? 0 }
    }

    /// `port` 0: one below the ephemeral range, so that a test may stop the gateway and
    /// start it again on the same port without another test's port-0 bind taking it.
    static func startGateway(_ stack: KitStack, port: Int = 0) async throws -> (ServiceProcess, Endpoint) {
        let port = port == 0 ? try FreePort.outsideEphemeralRange() : port
        let endpointFile = (stack.state as NSString).appendingPathComponent("gateway/endpoint.json")
        try? FileManager.default.removeItem(atPath: endpointFile)
        let gateway = try ServiceProcess(
            executable: Binaries.path("screentime-gatewayd"),
            arguments: ["--runtime-dir", stack.directory.path, "--state-dir", stack.state, "--log-level", "debug",
                        "--listen", "127.0.0.1:\(port)", "--host", "127.0.0.1", "--host", "localhost"],
            socketPath: endpointFile, logPath: stack.directory.file("gateway-\(UUID().uuidString.prefix(4)).log"), environment: [:])
        try await waitUntil("the gateway publishes its endpoint", timeout: .seconds(30), detail: gateway.log) {
            if let status = gateway.exitStatus { throw TestFailure("the gateway exited (\(status)): \(gateway.log)") }
            return FileManager.default.fileExists(atPath: endpointFile) && gateway.log.contains("ready")
        }
        let endpoint = try JSONDecoder().decode(Endpoint.self, from: Data(contentsOf: URL(fileURLWithPath: endpointFile)))
        return (gateway, endpoint)
    }

    /// A family over the network: mum's phone enrolled (its kit `parent`), emma's device
    /// (its kit `child`, device `childDevice`) paired and confirmed.
    static func remoteFamily(_ stack: KitStack, _ endpoint: Endpoint, childDevice: String = "emma-ipad", childName: String = "Emma's iPad")
        async throws -> (parent: ScreenTimeClient, child: ScreenTimeClient, invitation: ChildInvitation) {
        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        let bootstrap = PairingURI(server: "x", family: "smith", invitationId: "x", secret: "x", urls: endpoint.urls, pin: endpoint.pin)
        let parent = try Self.remoteKit(stack, "parent", bootstrap)
        _ = try await within(.seconds(60), "the parent enrolled") {
            try await parent.pairing.enroll(family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone", urls: endpoint.urls, pin: endpoint.pin)
        }
        let invitation = try await parent.pairing.inviteChild(childId: "emma")
        let child = try Self.remoteKit(stack, "child", try #require(PairingURI(invitation.uri)))
        let pending = try await child.pairing.accept(uri: invitation.uri, deviceId: childDevice, deviceName: childName)
        _ = try await parent.pairing.waitForAcceptance(of: invitation, poll: .milliseconds(50), timeout: .seconds(30))
        try await parent.pairing.confirm(invitation)
        _ = try await within(.seconds(30), "the child confirmed") { try await pending.waitForConfirmation() }
        return (parent, child, invitation)
    }

    static func remoteKit(_ stack: KitStack, _ name: String, _ link: PairingURI? = nil) throws -> ScreenTimeClient {
        stack.track(try ScreenTimeClient.remote(credentials: FileCredentialStore(path: stack.directory.file("\(name).credential")),
                                                databasePath: stack.directory.file("\(name).sqlite"), link: link, backoff: KitStack.fast))
    }

    @Test("the family story over TLS: pairing, a rule heard over push.listen and applied; the gateway down while the child records usage and a rule is set: after the reconnect the usage arrives once, the rule's notification waited, none missed or handled twice; a wrong pin refused")
    func familyStoryRemote() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        var (gateway, endpoint) = try await Self.startGateway(stack)
        defer { gateway.stopNow() }

        // The parent enrolls over the network: before it has a credential, the URL and pin
        // come from where the admin read them (`screentimectl gateway pin`), here the endpoint.
        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        let bootstrap = PairingURI(server: "x", family: "smith", invitationId: "x", secret: "x", urls: endpoint.urls, pin: endpoint.pin)
        let parent = try Self.remoteKit(stack, "parent", bootstrap)
        let first = endpoint
        do {
            _ = try await within(.seconds(60), "the parent enrolled") {
                try await parent.pairing.enroll(family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone",
                                                urls: first.urls, pin: first.pin)
            }
        } catch {
            throw TestFailure("enrolling through the gateway failed: \(error)\nthe gateway's log:\n\(gateway.log.suffix(4000))")
        }
        let invitation = try await parent.pairing.inviteChild(childId: "emma")
        // The server's own pairing URI (version 2) carries the gateway: the child needs nothing else.
        let link = try #require(PairingURI(invitation.uri))
        #expect(link.pin == endpoint.pin && link.urls == endpoint.urls)
        let child = try Self.remoteKit(stack, "child", link)
        let pending = try await child.pairing.accept(uri: invitation.uri, deviceId: "emma-ipad", deviceName: "Emma's iPad")
        #expect(try await parent.pairing.waitForAcceptance(of: invitation, poll: .milliseconds(50), timeout: .seconds(30)) == pending.shortCode)
        try await parent.pairing.confirm(invitation)
        let identity = try await within(.seconds(30), "the child confirmed") { try await pending.waitForConfirmation() }
        #expect(identity.urls == endpoint.urls && identity.pin == endpoint.pin)

        // A rule, heard by the child through push.listen over the WebSocket, applied.
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: invitation.zone, where: [QueryFilter("status", .equal, "pending")], firesOn: [.create, .update])
        let heard = Arrivals<PushNotification>()
        let listener = Task { try await child.notifications.handle { heard.append($0) } }
        defer { listener.cancel() }
        _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning"))
        try await within(.seconds(30), "the parent's queue drained") { await parent.queue.waitUntilDrained() }
        _ = try await heard.wait(for: 1, timeout: .seconds(30), "the command's notification over the WebSocket")
        let applied = try await child.child.applyPendingCommands { _ in }
        #expect(applied.executed.count == 1)
        try await within(.seconds(30), "the child's queue drained") { await child.queue.waitUntilDrained() }

        // Offline: the gateway stops while the child records usage. A call fails at once
        // (the transport decided it is offline), and the write waits in the queue.
        let log = QueueLog(child.queue)
        let port = endpoint.port
        await gateway.stop()
        try await waitUntil("the child sees the gateway gone", timeout: .seconds(30)) { child.transport.state == .offline }
        await #expect(throws: RPCError.self) { _ = try await child.child.pendingCommands() }
        let ids = try child.child.uploadUsage([UsageSession(logicalID: "org.khan", category: "learning", start: usageUTC(0, 1), end: usageUTC(0, 11))])
        _ = try await log.events.wait(for: 1, timeout: .seconds(30), "an attempt that could not be sent")
        #expect(log.applied.isEmpty)
        // A rule set while the child is cut off (the parent here on the server's own sockets):
        // its notification waits on the server for the child.
        let parentHere = try stack.track(ScreenTimeClient(
            transport: UnixSocketTransport(runtimeDirectory: stack.directory.path, backoff: KitStack.fast),
            credentials: FileCredentialStore(path: stack.directory.file("parent.credential")),
            databasePath: stack.directory.file("parent-here.sqlite"), backoff: KitStack.fast))
        _ = try await parentHere.parent.setAppRule(AppRuleChange(bundleId: "org.wikipedia", classification: "learning"))
        try await within(.seconds(30), "the rule saved while the child is cut off") { await parentHere.queue.waitUntilDrained() }
        await parentHere.close()
        #expect(heard.all.count == 1, "nothing reaches the child while it is cut off")

        // Back on the same port with the same key: the write arrives once, the stream resumes.
        (gateway, endpoint) = try await Self.startGateway(stack, port: port)
        try await within(.seconds(60), "the child's queue drained after the reconnect") { await child.queue.waitUntilDrained() }
        try await waitUntil("the batch reported applied", timeout: .seconds(30)) { log.applied.count == 1 }
        #expect(log.applied.map(\.0.requestId) == ids)
        // The parent's transport decided it was offline too: its calls fail at once until its
        // next attempt connects. An app waits for that event (or shows "offline"); so does this.
        try await within(.seconds(30), "the parent connected again") { await parent.transport.waitUntilConnected() }
        #expect(try await parent.records.queryAll(UsageRecord.self, in: invitation.zone).count == 1)
        _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: "com.game", classification: "reward"))
        try await within(.seconds(30), "the parent's queue drained again") { await parent.queue.waitUntilDrained() }
        _ = try await heard.wait(for: 2, timeout: .seconds(30), "the notification that waited during the outage")
        let all = try await heard.wait(for: 3, timeout: .seconds(30), "the next command's notification after the reconnect")
        #expect(Set(all.map(\.seq)).count == 3, "each notification handled once, none missed: \(all.map(\.seq))")
        #expect(all.map(\.seq) == all.map(\.seq).sorted(), "in order")

        #expect(heard.all.count == 3, "no notification handled twice")

        // A wrong pin: refused, never connected.
        let wrong = FileCredentialStore(path: stack.directory.file("wrong.credential"))
        var wrongIdentity = identity
        wrongIdentity.pin = String(repeating: "A", count: 43) + "="
        try wrong.save(wrongIdentity)
        let refused = try stack.track(ScreenTimeClient.remote(credentials: wrong, databasePath: stack.directory.file("wrong.sqlite"), backoff: KitStack.fast))
        do {
            _ = try await within(.seconds(30), "the wrong pin's call") { try await refused.child.pendingCommands() }
            Issue.record("a call went through a gateway whose key is not the pinned one")
        } catch let error as RPCError {
            #expect(error.code == .pinMismatch)
        }

        listener.cancel()
        await refused.close()
        await child.close()
        await parent.close()
        await gateway.stop()
    }

    @Test("everyday parenting through the kit over TLS: the child asks, the parent hears and approves, the child hears the answer; a second answer is a conflict; a grant and a pause; downtime, a chore done and approved once, and the week's digest")
    func parentingThroughTheKit() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await Self.startGateway(stack)
        defer { gateway.stopNow() }
        let (parent, child, _) = try await Self.remoteFamily(stack, endpoint)
        let parentHears = Arrivals<PushNotification>()
        let childHears = Arrivals<PushNotification>()
        let listeners = [Task { try? await parent.notifications.handle { parentHears.append($0) } },
                         Task { try? await child.notifications.handle { childHears.append($0) } }]
        defer { listeners.forEach { $0.cancel() } }

        // The aggregator may not have seen the confirmation yet: the child is told to wait.
        let request = try await eventually("the request taken", timeout: .seconds(30)) { seen -> TimeRequestInfo? in
            do throws(RPCError) {
                return try await child.child.askForTime(minutes: 20, app: "com.youtube", appName: "YouTube", note: "homework done")
            } catch {
                seen = "\(error)"
                guard error.code == .notFound else { throw error }
                return nil
            }
        }
        try await waitUntil("the parent's alert", timeout: .seconds(30), detail: "\(parentHears.all.map { $0.alert?.title ?? "\($0.reason)" })") {
            parentHears.all.contains { $0.fields?["event"] == "timeRequest" }
        }
        #expect(parentHears.all.first { $0.fields?["event"] == "timeRequest" }?.alert?.title == "emma asks for 20 min of YouTube", "named as invited (no name given)")
        let open = try await parent.parent.requests(status: .open)
        #expect(open.map(\.id) == [request.id])
        let answered = try await parent.parent.answer(request.id, approve: true, reply: "well done")
        #expect(answered.status == .approved && answered.grantedMinutes == 20)
        try await waitUntil("the child hears the answer", timeout: .seconds(30)) { childHears.all.contains { $0.fields?["event"] == "timeRequestAnswered" } }
        let again = await #expect(throws: RPCError.self) { _ = try await parent.parent.answer(request.id, approve: false) }
        #expect(again?.code == .conflict, "\(String(describing: again))")
        #expect(try await child.child.requests().first?.status == .approved)

        let granted = try await parent.parent.grant(to: "emma", minutes: 10, reason: "bonus")
        #expect(granted.points == 10 && granted.time.pointsBalance == 30)
        let paused = try await parent.parent.pause("emma", minutes: 15)
        #expect(paused.shielded && paused.shieldReason == "paused")
        #expect(!(try await parent.parent.resume("emma")).shielded)

        // The week's rhythms through the gateway: downtime, chores, the digest.
        let nights = DowntimeWindow(days: [.sun, .mon, .tue, .wed, .thu], start: "20:00", end: "07:00")
        let schedule = try await parent.parent.setSchedule("emma", windows: [nights], alwaysAllowed: ["com.apple.Maps"])
        #expect(schedule.windows == [nights] && schedule.updatedBy != nil)
        #expect(try await child.child.downtime()?.windows == [nights])
        let chore = try await parent.parent.setChore(SetChoreParams(child: "emma", title: "Dishes", points: 5))
        let done = try await child.child.choreDone(chore.id, note: "all of them")
        try await waitUntil("the parent hears the chore done", timeout: .seconds(30)) { parentHears.all.contains { $0.fields?["event"] == "choreDone" } }
        #expect(try await parent.parent.answerChore(done.id, approve: true).status == .approved)
        let twice = await #expect(throws: RPCError.self) { _ = try await parent.parent.answerChore(done.id, approve: true) }
        #expect(twice?.code == .conflict)
        #expect(try await child.child.chores().chores.first?.todayStatus == .approved)
        let refused = await #expect(throws: RPCError.self) { _ = try await child.child.choreDone(chore.id) }
        #expect(refused?.code == .conflict, "done once today")
        let digest = try await parent.parent.digest()
        #expect(digest.children.first?.choresDone == 1 && digest.children.first?.requestsAsked == 1, "\(digest)")
    }

    @Test("a call that meets a connection the gateway closed, before the request went out, is sent once more on the next connection and answered")
    func unsentRequestGoesOnTheNextConnection() async throws {
        let stack = try await KitStack.start(["store", "pairing"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await Self.startGateway(stack)
        defer { gateway.stopNow() }
        let transport = WebSocketTransport(configuration: .init(urls: endpoint.urls, pin: try #require(KeyPin(endpoint.pin)), backoff: KitStack.fast))
        let closed = try await eventually("the transport connected", timeout: .seconds(30)) { _ in transport.currentConnection }
        // The connection is gone (as when the gateway restarts or closes a silent socket),
        // and the request is written to it before the transport has noticed.
        await closed.discard()
        let answer = try await transport.call(TransportRequest(method: "rpc.ping"), startingOn: closed)
        #expect(answer["service"]?.stringValue == "gateway", "\(answer)")
        #expect(transport.currentConnection !== closed)
        await transport.close()
    }

    @Test("a device removed from the family: its kit enters `revoked` once, makes no more connections, fails calls at once with device_revoked and keeps its queue unsent; the gateway's log names the device")
    func revokedDeviceStops() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await Self.startGateway(stack)
        defer { gateway.stopNow() }
        let (parent, child, _) = try await Self.remoteFamily(stack, endpoint)
        _ = try await child.child.pendingCommands()
        let states = Arrivals<ConnectionState>()
        let watcher = Task { for await state in child.transport.states() { states.append(state) } }
        defer { watcher.cancel() }

        try await parent.pairing.revoke(deviceId: "emma-ipad")
        // Cut off by the gateway's credential check (or refused at its next call): either
        // way the kit hears device_revoked and stops.
        try await waitUntil("the kit in revoked", timeout: .seconds(30)) { states.all.contains(.revoked) }
        let refused = await #expect(throws: RPCError.self) { _ = try await child.child.pendingCommands() }
        #expect(refused?.code == .deviceRevoked && refused?.message.contains("removed from the family") == true, "\(String(describing: refused))")

        // A write while revoked: kept, held, never sent.
        let log = QueueLog(child.queue)
        _ = try child.child.uploadUsage([UsageSession(logicalID: "org.khan", category: "learning", start: usageUTC(0, 1), end: usageUTC(0, 11))])
        let held = try await log.events.wait(for: 1, timeout: .seconds(30), "the write held")
        guard case .held(_, let why) = held[0] else { Issue.record("not held: \(held[0])"); return }
        #expect(why.code == .deviceRevoked)
        #expect(try child.queue.pending().count == 1 && child.queue.failures().isEmpty, "kept in the queue, not set aside")
        // Many calls and the parent's work later (time in which a reconnecting transport
        // would have tried again many times): still one cut-off in the gateway's log, naming the device.
        for _ in 0..<20 { _ = try? await child.child.pendingCommands() }
        for app in ["org.a", "org.b", "org.c"] {
            _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: app, classification: "learning"))
            try await within(.seconds(30), "the parent's rule saved") { await parent.queue.waitUntilDrained() }
        }
        let cutOffs = gateway.log.split(separator: "\n").filter { $0.contains("websocket cut off") && $0.contains("device_id=emma-ipad") }
        #expect(cutOffs.count == 1 && cutOffs[0].contains("reason=device_revoked"), "\(cutOffs)")
        #expect(states.all.filter { $0 == .revoked }.count == 1, "told once: \(states.all)")
        #expect(child.transport.state == .revoked)

        await child.close()
        await parent.close()
        await gateway.stop()
    }
}
