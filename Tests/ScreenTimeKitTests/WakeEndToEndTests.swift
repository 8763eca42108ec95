import WakeTestSupport
import Foundation
import PairingAPI
import PushAPI
import RelayCore
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

/// Wakes from end to end, with the real binaries: the kit seals its APNs token with the
/// relay and registers through the gateway; push signs wakes with the gateway's own key
/// (the pin the devices paired with), the relay pushes to the APNs stand-in, and the woken
/// app fetches what waits for it.
@Suite("ScreenTimeKit: wakes through the gateway, the relay and APNs", .serialized)
struct WakeEndToEndTests {
    @Test("a child's app registers for wakes and closes its connection; the parent changes a rule; APNs gets one background push for its token; the app, woken, fetches and applies the rule. An alert to two parents is two content-free alert pushes")
    func ruleChangeWakesTheChild() async throws {
        let phones = Phones()
        let apns = try await TestAPNs(onDelivery: phones.deliver)
        defer { apns.stop() }
        // Plain HTTP, as behind the publisher's reverse proxy: the kit's URLSession on Linux
        // cannot be told to trust a test CA (the relay's TLS is proven in RelayTests).
        let relay = try await LocalRelay(apns: apns, tls: false)
        let stack = try await KitStack.start(["store", "pairing", "aggregator"])
        defer { stack.stopAll() }
        try await stack.start("push", arguments: ["--wake-relay", relay.url, "--wake-key", stack.state + "/gateway/key.pem", "--wake-after", "2"])
        let (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
        defer { gateway.stopNow() }

        // A family over the network: a parent, a co-parent, a child.
        let family = try await GatewayEndToEndTests.remoteFamily(stack, endpoint, childDevice: "emma-iphone", childName: "Emma's iPhone")
        let mum = family.parent, invitation = family.invitation
        var child = family.child
        let bootstrap = PairingURI(server: "x", family: "smith", invitationId: "x", secret: "x", urls: endpoint.urls, pin: endpoint.pin)
        let dadCode = try await mum.pairing.inviteParent()
        let dad = try GatewayEndToEndTests.remoteKit(stack, "dad", bootstrap)
        _ = try await within(.seconds(60), "dad enrolled") {
            try await dad.pairing.enroll(family: "smith", code: dadCode.code, deviceId: "dad-phone", deviceName: "Dad's phone", urls: endpoint.urls, pin: endpoint.pin)
        }

        // The child's app: subscribes to its commands, registers for wakes, goes to the background.
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: invitation.zone, where: [QueryFilter("status", .equal, "pending")], firesOn: [.create, .update])
        let childToken = Data(repeating: 0x5a, count: 32)
        phones.open(child, on: childToken)
        let registered = try await child.notifications.enableWakes(apnsToken: childToken, relay: URL(string: relay.url)!, topic: apns.topic)
        #expect(registered.status == .active && registered.deviceId == "emma-iphone")
        await child.close()

        // The parent changes a rule: one silent push reaches the sleeping phone.
        _ = try await mum.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning"))
        try await within(.seconds(30), "mum's queue drained") { await mum.queue.waitUntilDrained() }
        let push = try await apns.wait(for: 1, timeout: .seconds(30))[0]
        #expect(push.token == LocalRelay.token(0x5a) && push.headers["apns-push-type"] == "background" && push.payload == #"{"aps":{"content-available":1}}"#)

        // Woken, the app opens the kit again, fetches what waits, acknowledges, and applies it.
        child = try GatewayEndToEndTests.remoteKit(stack, "child")
        phones.open(child, on: childToken)
        let heard = Arrivals<PushNotification>()
        let handled = try await child.notifications.handleWake { heard.append($0) }
        #expect(handled >= 1 && heard.all.contains { $0.recordType == "ConfigurationCommand" }, "\(heard.all)")
        let applied = try await child.child.applyPendingCommands { _ in }
        #expect(applied.executed.count == 1)
        let status = try await child.notifications.wakeStatus()
        #expect(status.lastOutcome == .sent && status.wakesLastHour == 1 && status.dueAt == nil, "\(status)")
        // Launched again, the app registers again (its sealed handle is kept: the relay is asked only for a new token).
        _ = try await child.notifications.enableWakes(apnsToken: childToken, relay: URL(string: relay.url)!, topic: apns.topic)

        // Both parents' phones asleep: an alert for the parents is two alert pushes, with no content.
        phones.open(mum, on: Data(repeating: 0x6b, count: 32))
        phones.open(dad, on: Data(repeating: 0x7c, count: 32))
        _ = try await mum.notifications.enableWakes(apnsToken: Data(repeating: 0x6b, count: 32), relay: URL(string: relay.url)!, topic: apns.topic)
        _ = try await dad.notifications.enableWakes(apnsToken: Data(repeating: 0x7c, count: 32), relay: URL(string: relay.url)!, topic: apns.topic)
        _ = try await stack.admin("push").call(PushMethods.notify, NotifyParams(
            family: "smith", parents: true, alert: Alert(title: "Emma asked for 15 more minutes", body: "for Minecraft"), priority: .high))
        let all = try await apns.wait(for: 3, timeout: .seconds(30))
        let alerts = all.dropFirst()
        #expect(Set(alerts.map(\.token)) == [LocalRelay.token(0x6b), LocalRelay.token(0x7c)])
        #expect(alerts.allSatisfy { $0.headers["apns-push-type"] == "alert" && !$0.payload.contains("Emma") && !$0.payload.contains("Minecraft") })
        // The parents' list shows each device's registration by name of device.
        let wakes = try await mum.notifications.familyWakes()
        #expect(Set(wakes.map(\.deviceId)) == ["mum-phone", "dad-phone", "emma-iphone"])
        // A parent at a terminal sees, in sentences, which devices are woken and how it went.
        let gran = RemoteCLITests.Machine(home: stack.directory.file("gran"))
        try FileManager.default.createDirectory(atPath: gran.home, withIntermediateDirectories: true)
        let granCode = try await mum.pairing.inviteParent()
        try await gran.ctl("parent", "enroll", "--profile", "gran", "--family", "smith", "--code", granCode.code,
                           "--server", endpoint.urls[0], "--pin", endpoint.pin)
        let listing = try await gran.ctl("devices", "--profile", "gran").stdout
        let row = { (device: String) in listing.split(separator: "\n").first { $0.hasPrefix(device + " ") }.map(String.init) ?? "" }
        #expect(listing.contains("WAKES"), "\(listing)")
        #expect(row("emma-iphone").contains("on, woken"), "\(listing)")
        let granRow = listing.split(separator: "\n").first { $0.hasPrefix("gran") }.map(String.init) ?? ""
        #expect(row("mum-phone").contains("on, woken") && !granRow.isEmpty && !granRow.contains("on,"), "a terminal is not woken: \(listing)")
        // The same in JSON, for scripts: each device with its wake and whether it listens now.
        let json = try JSONParser.parse(try await gran.ctl("devices", "--profile", "gran", "--json").stdout)
        let byId = Dictionary(uniqueKeysWithValues: (json.arrayValue ?? []).compactMap { row in row["deviceId"]?.stringValue.map { ($0, row) } })
        #expect(byId["emma-iphone"]?["wake"]?["status"] == "active", "\(json)")
        let granDevice = byId.first { $0.key.hasPrefix("gran") }?.value
        #expect(granDevice != nil && granDevice?["wake"] == nil && granDevice?["connected"] == false, "a terminal is not woken: \(json)")

        await child.close()
        await mum.close()
        await dad.close()
        await relay.stop()
        #expect(apns.pushes.count == 3, "one wake for the rule, one alert per parent: \(apns.pushes.map(\.token))")
    }

    @Test("the handle comes only by push to the token: an app that does not pass its remote notifications to the kit gets a timeout saying so and registers nothing; passing them, it registers; a token APNs refuses gets a sentence and no handle")
    func handleComesByPush() async throws {
        let family = try await RelayedFamily.start()
        defer { family.stop() }
        let (phones, apns, parent, child) = (family.phones, family.apns, family.parent, family.child)
        let relay = family.relay
        let token = Data(repeating: 0x4e, count: 32)
        let relayURL = URL(string: relay.url)!

        // The push reached the phone, but the app kept it to itself: nothing to register.
        await expectError(.timeout, containing: "receiveRemoteNotification") {
            _ = try await child.notifications.enableWakes(apnsToken: token, relay: relayURL, topic: apns.topic, handleTimeout: .seconds(1))
        }
        #expect(apns.deliveries.count == 1)
        await expectError(.notFound) { _ = try await child.notifications.wakeStatus() }

        phones.open(child, on: token)
        let registered = try await child.notifications.enableWakes(apnsToken: token, relay: relayURL, topic: apns.topic)
        #expect(registered.status == .active && registered.deviceId == "emma-iphone")
        // What the app is handed beside it is not taken for a handle.
        #expect(!child.notifications.receiveRemoteNotification(["aps": ["content-available": 1]]))
        #expect(!child.notifications.receiveRemoteNotification([APNsPush.handleKey: "not a handle"]))

        let gone = Data(repeating: 0x4f, count: 32)
        apns.answer(LocalRelay.token(0x4f), [(410, "Unregistered")])
        phones.open(parent, on: gone)
        await expectError(.invalidParams, containing: "APNs no longer knows") {
            _ = try await parent.notifications.enableWakes(apnsToken: gone, relay: relayURL, topic: apns.topic)
        }
        #expect(apns.deliveries.count == 2, "no handle for a token APNs refused")
        await relay.stop()
    }

    @Test("direct mode, the same app code with no relay: the kit gives the server its APNs token, and push sends to APNs with the family's own key")
    func directModeThroughTheKit() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let stack = try await KitStack.start(["store", "pairing", "aggregator"])
        defer { stack.stopAll() }
        let p8 = stack.directory.file("AuthKey.p8")
        try apns.p8.write(toFile: p8, atomically: true, encoding: .utf8)
        try await stack.start("push", arguments: [
            "--apns-key-file", p8, "--apns-key-id", apns.keyId, "--apns-team-id", apns.teamId, "--apns-topic", apns.topic,
            "--apns-url", apns.url, "--apns-ca-file", apns.certificateFile,
        ])
        let (parent, child, zone) = try await stack.family()
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: zone, where: [QueryFilter("status", .equal, "pending")], firesOn: [.create, .update])
        let registered = try await child.notifications.enableWakes(apnsToken: Data(repeating: 0x3c, count: 32), relay: nil, topic: apns.topic, environment: .development)
        #expect(registered.relayHost == "APNs" && registered.status == .active)
        _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning"))
        try await within(.seconds(30), "the parent's queue drained") { await parent.queue.waitUntilDrained() }
        let push = try await apns.wait(for: 1, timeout: .seconds(30))[0]
        #expect(push.token == LocalRelay.token(0x3c) && push.headers["apns-push-type"] == "background")
        #expect(try await child.notifications.handleWake { _ in } >= 1)
        await child.close()
        await parent.close()
    }

    @Test("suspend() closes the connection cleanly: the server sees the device gone at once and wakes it instead; resume() connects again and the stream picks up what waited")
    func suspendAndResume() async throws {
        let family = try await RelayedFamily.start()
        defer { family.stop() }
        let (phones, apns, stack, parent, child) = (family.phones, family.apns, family.stack, family.parent, family.child)
        let relay = family.relay
        let invitation = family.invitation
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: invitation.zone, where: [QueryFilter("status", .equal, "pending")], firesOn: [.create, .update])
        phones.open(child, on: Data(repeating: 0x2b, count: 32))
        _ = try await child.notifications.enableWakes(apnsToken: Data(repeating: 0x2b, count: 32), relay: URL(string: relay.url)!, topic: apns.topic)
        let heard = Arrivals<PushNotification>()
        let listener = Task { try await child.notifications.handle { heard.append($0) } }
        defer { listener.cancel() }
        let push = stack.admin("push")
        let listening = { @Sendable () async throws -> Bool in
            try await push.call(PushMethods.listening, ListeningParams(family: "smith")).deviceIds.contains("emma-iphone")
        }
        _ = try await eventually("the child's app listens") { _ in try await listening() ? true : nil }

        // To the background: the server knows at once, not at the gateway's next ping (30 s
        // away). The bound leaves room for a loaded machine: in CI, beside systemd containers
        // booting, a second was once not enough; alone it is well within one.
        await child.suspend()
        #expect(child.transport.state == .suspended)
        _ = try await eventually("the server sees the child gone", timeout: .seconds(5)) { _ in try await listening() ? nil : true }
        await expectError(.unavailable, containing: "suspended") { _ = try await child.child.pendingCommands() }

        // A rule change while it sleeps: a wake, not a write to a frozen socket.
        _ = try await parent.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning"))
        try await within(.seconds(30), "the parent's queue drained") { await parent.queue.waitUntilDrained() }
        let wake = try await apns.wait(for: 1, timeout: .seconds(30))[0]
        #expect(wake.token == LocalRelay.token(0x2b) && wake.headers["apns-push-type"] == "background")
        #expect(heard.all.isEmpty)

        // Back to the foreground: connected again, the stream hears what waited.
        await child.resume()
        _ = try await heard.wait(for: 1, timeout: .seconds(30), "the command's notification after resume")
        #expect(try await child.child.applyPendingCommands { _ in }.executed.count == 1)
        listener.cancel()
        await child.close()
        await parent.close()
        await relay.stop()
    }

    @Test("the relay lost its sealing key: the next wake is refused and the registration gone; at the app's next launch enableWakes seals its token again, and wakes work")
    func relayLostItsKey() async throws {
        let family = try await RelayedFamily.start()
        defer { family.stop() }
        let (phones, apns, stack, parent, child) = (family.phones, family.apns, family.stack, family.parent, family.child)
        let first = family.relay
        let token = Data(repeating: 0x1d, count: 32)
        phones.open(child, on: token)
        let relayURL = URL(string: first.url)!
        _ = try await child.notifications.enableWakes(apnsToken: token, relay: relayURL, topic: apns.topic)

        // The same address, a new sealing key: the handle the device holds opens no more.
        let port = try #require(relayURL.port)
        await first.stop()
        let second = try await LocalRelay(apns: apns, tls: false, port: port)
        let notify = { @Sendable in
            _ = try await stack.admin("push").call(PushMethods.notify, NotifyParams(family: "smith", deviceId: "emma-iphone", data: ["rules": "changed"]))
        }
        try await notify()
        let gone = try await eventually("the wake refused") { seen in
            let status = try await child.notifications.wakeStatus()
            seen = "\(status)"
            return status.status == .gone ? status : nil
        }
        #expect(gone.lastOutcome == .refused && apns.pushes.isEmpty, "\(gone)")

        // Launched again: the same token, relay and server, but the handle is sealed anew.
        let again = try await child.notifications.enableWakes(apnsToken: token, relay: relayURL, topic: apns.topic)
        #expect(again.status == .active)
        try await notify()
        let push = try await apns.wait(for: 1, timeout: .seconds(30))[0]
        #expect(push.token == LocalRelay.token(0x1d))
        await child.close()
        await parent.close()
        await second.stop()
    }
}

/// A family paired through the gateway, whose push wakes through a relay (plain HTTP, as
/// behind the publisher's proxy) to the APNs stand-in; the phones hand the relay's pushes
/// to the kit open on them.
struct RelayedFamily: Sendable {
    let phones: Phones
    let apns: TestAPNs
    let relay: LocalRelay
    let stack: KitStack
    let gateway: ServiceProcess
    let parent: ScreenTimeClient
    let child: ScreenTimeClient
    let invitation: ChildInvitation

    static func start() async throws -> RelayedFamily {
        let phones = Phones()
        let apns = try await TestAPNs(onDelivery: phones.deliver)
        let relay = try await LocalRelay(apns: apns, tls: false)
        let stack = try await KitStack.start(["store", "pairing", "aggregator"])
        var gateway: ServiceProcess?
        do {
            try await stack.start("push", arguments: ["--wake-relay", relay.url, "--wake-key", stack.state + "/gateway/key.pem"])
            let (started, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
            gateway = started
            let (parent, child, invitation) = try await GatewayEndToEndTests.remoteFamily(stack, endpoint, childDevice: "emma-iphone", childName: "Emma's iPhone")
            return RelayedFamily(phones: phones, apns: apns, relay: relay, stack: stack, gateway: started, parent: parent, child: child, invitation: invitation)
        } catch {
            gateway?.stopNow()
            stack.stopAll()
            apns.stop()
            throw error
        }
    }

    func stop() {
        self.gateway.stopNow()
        self.stack.stopAll()
        self.apns.stop()
    }
}
