import WakeTestSupport
import Crypto
import Foundation
import PairingAPI
import PushAPI
import PushEngine
import RPCClient
import RPCCore
import StackSupport
import Testing
import TestSupport

/// Wakes through the real relay (in this process, over TLS) to the APNs stand-in: which
/// notifications wake a device, how often, and what the relay's answers do to its
/// registration.
@Suite("Push: wakes through the relay (who is woken, how often, registrations gone)", .serialized)
struct WakeTests {
    /// The relay and APNs, and the "gateway" key wakes are signed with.
    final class Wakes: Sendable {
        let apns: TestAPNs
        let relay: LocalRelay
        let directory = TemporaryDirectory()
        let keyFile: String
        private let keyBytes: Data

        var key: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: self.keyBytes) }
        var pin: String { LocalRelay.pin(self.key) }

        init() async throws {
            self.apns = try await TestAPNs()
            self.relay = try await LocalRelay(apns: self.apns)
            let key = P256.Signing.PrivateKey()
            self.keyBytes = key.rawRepresentation
            self.keyFile = self.directory.file("gateway-key.pem")
            try key.pemRepresentation.write(toFile: self.keyFile, atomically: true, encoding: .utf8)
        }

        func configure(perHour: Int = 3, ackWait: Duration = .milliseconds(300)) -> @Sendable (inout PushConfiguration) -> Void {
            let relay = self.relay.url, ca = self.relay.caFile, key = self.keyFile
            return { configuration in
                configuration.wakes = .init(relay: relay, relayCAFile: ca, signingKeyFile: key, ackWait: ackWait, perHour: perHour)
            }
        }

        /// What an app does: seals its APNs token with the relay for its server's pin, and
        /// gives the handle to its server.
        func register(_ device: RPCClient, token: String, pin: String? = nil) async throws -> WakeInfo {
            let handle = try await self.relay.seal(token: token, pin: pin ?? self.pin)
            return try await device.call(PushMethods.registerWake, RegisterWakeParams(handle: handle, relay: self.relay.url))
        }

        func stop() async {
            await self.relay.stop()
            self.apns.stop()
        }
    }

    static func notifyChild(_ stack: PushStack, alert: Alert? = nil, priority: PushPriority? = nil) async throws -> Int64 {
        let result = try await stack.local.call(PushMethods.notify, NotifyParams(
            family: stack.family.family, deviceId: stack.child.deviceId, alert: alert, data: alert == nil ? ["rules": "changed"] : nil, priority: priority))
        return result.queued[0].seq
    }

    @Test("off by default: registering is refused, saying how to turn wakes on")
    func offByDefault() async throws {
        try await PushStack.inProcess { stack in
            let child = stack.client(token: stack.child.token)
            await expectError(.unavailable, containing: "--wake-relay") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: "v1.abc", relay: "https://relay.example.org"))
            }
            await expectError(.notFound, containing: "push.registerWake") { _ = try await child.call(PushMethods.getWake, Empty()) }
        }
    }

    @Test("a sleeping device is woken once per burst with a silent background push; the parent sees how it went; an alert wakes with a content-free alert")
    func sleepingDeviceIsWoken() async throws {
        let wakes = try await Wakes()
        try await PushStack.inProcess(configure: wakes.configure()) { stack in
            let child = stack.client(token: stack.child.token)
            let registered = try await wakes.register(child, token: LocalRelay.token(0x41))
            #expect(registered.status == .active && registered.relayHost == "localhost" && registered.lastWakeAt == nil)

            for _ in 1...3 { _ = try await Self.notifyChild(stack) }
            let push = try #require(try await wakes.apns.wait(for: 1).first)
            #expect(push.token == LocalRelay.token(0x41) && push.headers["apns-push-type"] == "background" && push.headers["apns-priority"] == "5")
            #expect(push.headers["apns-collapse-id"] == "screentime-background" && push.payload == #"{"aps":{"content-available":1}}"#)
            let info = try await eventually("the wake recorded") { seen in
                let info = try await child.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.lastOutcome == .sent ? info : nil
            }
            #expect(info.wakesLastHour == 1 && info.lastError == nil)

            // The parent's view (and a child may not look).
            let listed = try await stack.parent.call(PushMethods.listWakes, ListWakesParams())
            #expect(listed.wakes.map(\.deviceId) == [stack.child.deviceId] && listed.wakes[0].lastOutcome == .sent)
            await expectError(.forbidden) { _ = try await child.call(PushMethods.listWakes, ListWakesParams()) }

            // The device wakes and fetches: it acknowledges; an alert then wakes it at once, visibly, with no content.
            _ = try await child.call(PushMethods.ack, AckParams(upTo: 3))
            _ = try await Self.notifyChild(stack, alert: Alert(title: "Your request was approved"), priority: .high)
            let alert = try await wakes.apns.wait(for: 2)[1]
            #expect(alert.headers["apns-push-type"] == "alert" && alert.headers["apns-priority"] == "10")
            #expect(alert.payload.contains("New activity") && !alert.payload.contains("approved"))
        }
        #expect(wakes.apns.pushes.count == 2, "the burst of three woke the device once")
        await wakes.stop()
    }

    @Test("after a wake, what comes before the device fetched waits for it to wake (30 s); what comes after it fetched wakes it at once")
    func settleAfterAWake() async throws {
        let wakes = try await Wakes()
        try await PushStack.inProcess(configure: wakes.configure(perHour: 10)) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await wakes.register(child, token: LocalRelay.token(0x4a))
            _ = try await Self.notifyChild(stack)
            try await wakes.apns.wait(for: 1)
            _ = try await eventually("the first wake recorded") { seen in
                let info = try await child.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.lastOutcome == .sent ? info : nil
            }
            // The device is still waking: this one waits.
            let second = try await Self.notifyChild(stack)
            // Due at once when queued; the sender, finding the device still waking, puts it off.
            let waiting = try await eventually("the second wake put off") { seen in
                let info = try await child.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.dueAt.flatMap { $0.timeIntervalSinceNow > 1 ? $0 : nil }
            }
            #expect(waiting.timeIntervalSinceNow > 20, "held for the device to wake: \(waiting)")
            // It woke and fetched both: the wake is not needed; the next change wakes it at once.
            _ = try await child.call(PushMethods.ack, AckParams(upTo: second))
            #expect(try await child.call(PushMethods.getWake, Empty()).dueAt == nil)
            _ = try await Self.notifyChild(stack)
            try await wakes.apns.wait(for: 2)
        }
        await wakes.stop()
    }

    @Test("a listening device that acknowledges is not woken; one that listens and does not acknowledge (suspended) is woken after --wake-after; low priority wakes nobody")
    func listeningDevices() async throws {
        let wakes = try await Wakes()
        try await PushStack.inProcess(configure: wakes.configure(ackWait: .seconds(2))) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await wakes.register(child, token: LocalRelay.token(0x42))
            let listening = Listening(child)
            _ = try await eventually("the child listens") { _ in
                try await stack.local.call(PushMethods.listening, ListeningParams(family: stack.family.family)).deviceIds.contains(stack.child.deviceId) ? true : nil
            }

            // Read and acknowledged at once: no wake.
            let first = try await Self.notifyChild(stack)
            _ = try await listening.wait(for: 1)
            _ = try await child.call(PushMethods.ack, AckParams(upTo: first))
            // Low priority: never a wake, even unacknowledged.
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: stack.child.deviceId, data: ["x": 1], priority: .low))
            _ = try await listening.wait(for: 2)
            let quiet = try await child.call(PushMethods.getWake, Empty())
            #expect(quiet.dueAt == nil && quiet.lastWakeAt == nil, "nothing to wake for: \(quiet)")
            // Read and not acknowledged (an app suspended with its socket open): woken after the wait.
            _ = try await Self.notifyChild(stack)
            _ = try await listening.wait(for: 3)
            let pushes = try await wakes.apns.wait(for: 1)
            #expect(pushes.count == 1 && pushes[0].headers["apns-push-type"] == "background")
            listening.cancel()
        }
        await wakes.stop()
    }

    @Test("at most --wakes-per-hour background wakes per device: the next is held until the hour allows it, alerts still go")
    func hourlyCap() async throws {
        let wakes = try await Wakes()
        try await PushStack.inProcess(configure: wakes.configure(perHour: 2)) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await wakes.register(child, token: LocalRelay.token(0x43))
            for count in 1...2 {
                let seq = try await Self.notifyChild(stack)
                try await wakes.apns.wait(for: count)
                _ = try await child.call(PushMethods.ack, AckParams(upTo: seq))  // woken, fetched
            }
            _ = try await Self.notifyChild(stack)
            let held = try await eventually("the third wake held") { seen in
                let info = try await child.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.lastOutcome == .held ? info : nil
            }
            #expect(held.wakesLastHour == 2)
            let due = try #require(held.dueAt)
            #expect(due.timeIntervalSinceNow > 3000 && due.timeIntervalSinceNow <= 3600, "held until the first wake is an hour old: \(due)")
            _ = try await Self.notifyChild(stack, alert: Alert(title: "Time is up"), priority: .high)
            let pushes = try await wakes.apns.wait(for: 3)
            #expect(pushes.map { $0.headers["apns-push-type"] } == ["background", "background", "alert"])
        }
        await wakes.stop()
    }

    @Test("APNs no longer knows the device (410): the registration is gone, nothing more is sent, until the device registers again")
    func unregisteredDevice() async throws {
        let wakes = try await Wakes()
        let token = LocalRelay.token(0x44)
        try await PushStack.inProcess(configure: wakes.configure()) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await wakes.register(child, token: token)
            // Sealed while APNs still knew it; gone by the time of the wake.
            wakes.apns.answer(token, [(410, "Unregistered")])
            _ = try await Self.notifyChild(stack)
            let gone = try await eventually("the registration gone") { seen in
                let info = try await child.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.status == .gone ? info : nil
            }
            #expect(gone.lastOutcome == .unregistered && gone.lastError?.contains("Unregistered") == true, "\(gone)")
            #expect(stack.pushLog.contains("wake registration is gone"))
            _ = try await Self.notifyChild(stack)
            // Registering again makes it active; the next notification wakes it.
            let again = try await wakes.register(child, token: token)
            #expect(again.status == .active)
            _ = try await Self.notifyChild(stack)
            let pushes = try await wakes.apns.wait(for: 1)
            #expect(pushes.count == 1)
        }
        await wakes.stop()
    }

    @Test("a revoked parent's device: its listener ends and its wake registration and webhook go as the store commits the revocation, with no refresh period to wait for")
    func revokedDeviceForgotten() async throws {
        let wakes = try await Wakes()
        let configureWakes = wakes.configure()
        try await PushStack.inProcess(configure: { configuration in
            configureWakes(&configuration)
            configuration.webhooks = .init(timeout: .seconds(5), attempts: 1, firstRetry: .seconds(1))
            // An hour: only the store's change feed can tell push in time.
            configuration.accessRefresh = .seconds(3600)
            configuration.maintenanceInterval = .seconds(3600)
        }) { stack in
            // A second parent: a parent's device has no zone shared with it, so no share
            // change tells push of its revocation; only its credential's does.
            let code = try await stack.family.parent.call(PairingMethods.inviteParent, InviteParentParams())
            let dad = try await stack.harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(
                family: stack.family.family, code: code.code, deviceId: "dad-phone", deviceName: "Dad's phone"))
            let device = stack.client(token: dad.token)
            _ = try await wakes.register(device, token: LocalRelay.token(0x51))
            _ = try await device.call(PushMethods.setWebhook, SetWebhookParams(url: "https://ntfy.sh/dad", format: .ntfy))
            let listening = Listening(device)
            try await stack.waitForListeners(1)
            #expect(try await stack.local.call(PushMethods.listWakes, ListWakesParams(family: stack.family.family)).wakes.map(\.deviceId) == ["dad-phone"])

            _ = try await stack.family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: "dad-phone"))
            try await waitUntil("the revoked device's stream ending") { listening.error != nil }
            #expect((listening.error as? RPCError)?.code == .deviceRevoked)
            _ = try await eventually("its wake registration removed") { seen in
                let wakes = try await stack.local.call(PushMethods.listWakes, ListWakesParams(family: stack.family.family)).wakes
                seen = "\(wakes)"
                return wakes.isEmpty ? () : nil
            }
            try await waitUntil("the removal logged") { stack.pushLog.contains("a revoked device's registrations removed") }
            #expect(stack.pushLog.contains("webhook=true") && stack.pushLog.contains("wake=true"))
            // Its credential is refused by push itself from then on, naming the device.
            let refused = await expectError(.deviceRevoked) { _ = try await device.call(PushMethods.getWebhook, Empty()) }
            #expect(refused?.data?["deviceId"] == "dad-phone")
        }
        await wakes.stop()
    }

    @Test("a handle sealed for another server's key is refused by the relay: the registration is marked gone, nothing reaches APNs")
    func anotherServersHandle() async throws {
        let wakes = try await Wakes()
        try await PushStack.inProcess(configure: wakes.configure()) { stack in
            let child = stack.client(token: stack.child.token)
            _ = try await wakes.register(child, token: LocalRelay.token(0x45), pin: LocalRelay.pin(P256.Signing.PrivateKey()))
            _ = try await Self.notifyChild(stack)
            let gone = try await eventually("the registration refused") { seen in
                let info = try await child.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.status == .gone ? info : nil
            }
            #expect(gone.lastOutcome == .refused && gone.lastError?.contains("wrong_server") == true, "\(gone)")
            #expect(wakes.apns.pushes.isEmpty)
        }
        await wakes.stop()
    }

    @Test("bad registrations are refused with a sentence, and the service stays up; removing one stops the wakes")
    func badRegistrations() async throws {
        let wakes = try await Wakes()
        try await PushStack.inProcess(configure: wakes.configure()) { stack in
            let child = stack.client(token: stack.child.token)
            await expectError(.invalidParams, containing: "the relay this server sends wakes through, \(wakes.relay.url)") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: "v1.abc", relay: "https://elsewhere.example.org"))
            }
            await expectError(.invalidParams, containing: "params.handle") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: "", relay: wakes.relay.url))
            }
            await expectError(.invalidParams, containing: "params.handle") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: String(repeating: "a", count: 1025), relay: wakes.relay.url))
            }
            await expectError(.invalidParams, containing: "params.handle") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: "has space", relay: wakes.relay.url))
            }
            await expectError(.unauthorized) {
                _ = try await stack.local.call(PushMethods.registerWake, RegisterWakeParams(handle: "v1.abc", relay: wakes.relay.url))
            }
            await expectError(.invalidParams, containing: "params.family") { _ = try await stack.local.call(PushMethods.listWakes, ListWakesParams()) }
            // The same relay spelled differently is the same relay.
            let handle = try await wakes.relay.seal(token: LocalRelay.token(0x46), pin: wakes.pin)
            _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: handle, relay: wakes.relay.url.uppercased() + "/"))
            #expect(try await child.call(PushMethods.removeWake, Empty()).removed)
            #expect(try await child.call(PushMethods.removeWake, Empty()).removed == false)
            _ = try await Self.notifyChild(stack)
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, deviceId: stack.child.deviceId, alert: Alert(title: "x")))
            #expect(try await stack.local.call(PushMethods.listWakes, ListWakesParams(family: stack.family.family)).wakes.isEmpty)
        }
        #expect(wakes.apns.pushes.isEmpty)
        await wakes.stop()
    }

    @Test("a wake due when push is killed (-9) is sent after it starts again, and the registration still wakes the device afterwards")
    func wakeSurvivesACrash() async throws {
        let wakes = try await Wakes()
        let stack = try await PushStack.start(pushArguments: [
            "--wake-relay", wakes.relay.url, "--wake-relay-ca", wakes.relay.caFile!, "--wake-key", wakes.keyFile, "--wake-after", "8",
        ])
        defer { stack.stopNow() }
        let child = stack.client(token: stack.child.token)
        _ = try await wakes.register(child, token: LocalRelay.token(0x47))
        let listening = Listening(child)
        _ = try await eventually("the child listens") { _ in
            try await stack.local.call(PushMethods.listening, ListeningParams(family: stack.family.family)).deviceIds.contains(stack.child.deviceId) ? true : nil
        }
        _ = try await Self.notifyChild(stack)
        _ = try await listening.wait(for: 1)  // read, never acknowledged: a wake is due in 8 s
        listening.cancel()
        await stack.kill()
        #expect(wakes.apns.pushes.isEmpty, "killed before the wake was due")
        try await stack.startPush()
        try await wakes.apns.wait(for: 1, timeout: .seconds(30))
        // Woken and fetched; the next notification wakes it again (the registration was read back at start).
        let info = try await eventually("the wake recorded") { seen in
            let info = try await child.call(PushMethods.getWake, Empty())
            seen = "\(info)"
            return info.lastOutcome == .sent ? info : nil
        }
        #expect(info.status == .active)
        _ = try await child.call(PushMethods.ack, AckParams(upTo: 1))
        _ = try await Self.notifyChild(stack)
        try await wakes.apns.wait(for: 2, timeout: .seconds(30))
        await wakes.stop()
    }

    @Test("direct mode: push holds the family's own APNs key and sends to APNs itself; the device registers its token; 410 marks it gone; a relay's handle or an unknown topic is refused")
    func directMode() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let key = PushConfiguration.WakeDelivery.DirectAPNsKey(
            keyId: apns.keyId, teamId: apns.teamId, p8: apns.p8, topics: [apns.topic], apnsURL: apns.url, apnsCAFile: apns.certificateFile)
        try await PushStack.inProcess(configure: { $0.wakes = .init(route: .direct(key)) }) { stack in
            let child = stack.client(token: stack.child.token)
            await expectError(.invalidParams, containing: "params.token") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(handle: "v1.abc", relay: "https://relay.example.org"))
            }
            await expectError(.invalidParams, containing: apns.topic) {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(token: LocalRelay.token(0x48), topic: "com.other.app"))
            }
            await expectError(.invalidParams, containing: "hex") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(token: "not-a-token", topic: apns.topic))
            }
            // Hex digits that are not ASCII (fullwidth) would reach APNs in its URL: refused here.
            await expectError(.invalidParams, containing: "hex") {
                _ = try await child.call(PushMethods.registerWake, RegisterWakeParams(token: String(repeating: "０", count: 64), topic: apns.topic))
            }
            let registered = try await child.call(PushMethods.registerWake, RegisterWakeParams(token: LocalRelay.token(0x48).uppercased(), topic: apns.topic))
            #expect(registered.status == .active && registered.relayHost == "APNs")
            _ = try await Self.notifyChild(stack)
            let push = try await apns.wait(for: 1)[0]
            #expect(push.token == LocalRelay.token(0x48) && push.headers["apns-push-type"] == "background" && push.http2)

            // The parent's phone: APNs says the token is gone.
            let parent = stack.parent
            apns.answer(LocalRelay.token(0x49), [(410, "Unregistered")])
            _ = try await parent.call(PushMethods.registerWake, RegisterWakeParams(token: LocalRelay.token(0x49), topic: apns.topic, environment: .development))
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: stack.family.family, parents: true, alert: Alert(title: "Emma asked for more time")))
            let gone = try await eventually("the parent's registration gone") { seen in
                let info = try await parent.call(PushMethods.getWake, Empty())
                seen = "\(info)"
                return info.status == .gone ? info : nil
            }
            #expect(gone.lastOutcome == .unregistered && gone.lastError?.contains("Unregistered") == true)
        }
        #expect(apns.pushes.count == 1)
    }

    @Test("wake options that cannot work are refused with a usage error that says what to give")
    func badOptions() async throws {
        let cases: [([String], String)] = [
            (["--wake-relay", "relay.example.org"], "base URL"),
            (["--wake-relay", "https://user:secret@relay.example.org"], "base URL"),
            (["--wake-relay", "https://relay.example.org", "--apns-key-file", "/nonexistent.p8"], "not both"),
            (["--apns-key-file", "/nonexistent.p8", "--apns-topic", "com.example.app"], "--apns-key-id and --apns-team-id"),
            (["--apns-key-file", "/nonexistent.p8", "--apns-key-id", "ABC123DEFG", "--apns-team-id", "DEF123GHIJ"], "--apns-topic"),
            (["--apns-topic", "com.example.app"], "go with --apns-key-file"),
            (["--apns-key-file", "/nonexistent.p8", "--apns-key-id", "ABC123DEFG", "--apns-team-id", "DEF123GHIJ", "--apns-topic", "a.b"], "cannot read --apns-key-file"),
            (["--wakes-per-hour", "0"], "--wakes-per-hour must be between"),
            (["--wake-after", "0"], "--wake-after must be between"),
        ]
        let directory = TemporaryDirectory()
        for (arguments, message) in cases {
            let result = try await runCommand(Binaries.path("screentime-pushd"), ["--runtime-dir", directory.path, "--state-dir", directory.file("state")] + arguments)
            #expect(result.status == 64 && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }
}
