import ArgumentParser
import Foundation
import PairingAPI
import PushAPI
import RPCCore
import StoreAPI
import Synchronization

/// The brief's whole story against a running server, one step after another, as the
/// parent's and the child's devices see it, with timings.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole story against a running server: bootstrap, pairing, a rule change, usage, a shield, revocation.",
        discussion: """
            Creates a new family (demo-XXXX) with a parent and a child profile, which stay so \
            you can go on exploring with them (--profile demo-XXXX-parent / demo-XXXX-child).

            With --server URL (and --pin) both devices act from here through the gateway, \
            over TLS with its key pinned, through ScreenTimeKit, as phones would; the timings are \
            then the network's. Creating a family is the administrator's, on the server: give \
            --family and --enroll-code from `screentimectl family create` there, or, on the \
            server itself, leave them out and the demo creates one on the local sockets.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var remote: RemoteOptions
    @Option(help: "Seconds to wait for each notification.") var wait: Double = 10
    @Option(help: "With --server: a family created on the server (`screentimectl family create`).") var family: String?
    @Option(help: "With --server: that family's enrollment code.") var enrollCode: String?

    func validate() throws {
        if (self.family == nil) != (self.enrollCode == nil) { throw ValidationError("give --family and --enroll-code together") }
    }

    func run() async throws {
        try await Output.orExit {
            try await Demo(connection: self.connection, remote: self.remote, wait: .milliseconds(Int64(self.wait * 1000)),
                           given: self.family.map { ($0, self.enrollCode!) }).run()
        }
    }
}

struct Demo {
    let connection: ConnectionOptions
    let remote: RemoteOptions
    let wait: Duration
    /// A family and its enrollment code made on the server beforehand.
    let given: (family: String, code: String)?
    let started = ContinuousClock.now

    func run() async throws {
        let family = self.given?.family ?? "demo-" + String(UUID().uuidString.lowercased().prefix(4))
        let zone = TimeZone.current.identifier
        if let server = self.remote.serverURL {
            Output.line("Over the network: both devices reach the gateway at \(server) through ScreenTimeKit (TLS, key pinned).")
        }

        let code: String
        if let given = self.given {
            self.step("1. Bootstrap: the family \(family) was created on the server; its enrollment code was given")
            code = given.code
        } else {
            self.step("1. Bootstrap: the server's administrator creates the family \(family) (\(zone))")
            let admin = self.connection.client(for: "pairing", token: nil)
            code = try await self.timed("pairing.createFamily (local, the administrator's)") {
                try await admin.call(PairingMethods.createFamily, NewFamilyParams(family: family, displayName: "Demo family", timeZone: zone)).code
            }
        }
        var parent = try await self.timed("parent enrolls with the code") {
            try await Device.enrollParent(self.options("\(family)-parent"), family: family, code: code, deviceName: "Parent's phone", displayName: "Parent")
        }
        self.say("parent", "enrolled as \(parent.profile.deviceId) (admin)")

        self.step("2. Pairing: the parent invites, the child scans, both compare the short code, the parent confirms")
        let invitation = try await self.timed("parent asks for an invitation") { try await parent.invite(child: "sam", childName: "Sam", expiresInSeconds: 600) }
        self.say("parent", "shows a QR code of \(invitation.uri)")
        let (acceptedChild, accepted) = try await self.timed("child accepts") {
            try await Device.acceptInvitation(self.options("\(family)-child"), link: try Device.pairingURI(invitation.uri), deviceName: "Sam's tablet")
        }
        var child = acceptedChild
        self.say("child", "shows \(accepted.shortCode.emojiLine)  (\(accepted.shortCode.namesLine))")
        let status = try await parent.waitForAcceptance(invitation.invitationId, timeout: self.wait)
        let parentCode = parent.shortCode(status)
        self.say("parent", "shows \(parentCode?.emojiLine ?? "?")  (\(parentCode == accepted.shortCode ? "the same: confirm" : "DIFFERENT: reject"))")
        do {
            _ = try await child.upload([Device.Session(app: "org.khanacademy", start: Date().addingTimeInterval(-60), end: Date(), category: "learning")], direct: true)
            self.say("child", "could write before confirmation (unexpected)")
        } catch let error as RPCError {
            self.say("child", "before confirmation its writes are refused: \(error.code)")
        }
        guard parentCode == accepted.shortCode else { throw CLIError(.refused, "the short codes differ") }
        _ = try await self.timed("parent confirms") { try await parent.decide(invitation.invitationId, confirm: true) }

        let parentInbox = try await Inbox.open(parent)
        let childInbox = try await Inbox.open(child)
        defer {
            parentInbox.close()
            childInbox.close()
        }

        self.step("3. Configuration: the parent makes Khan Academy a learning app (2 points a minute) and a game a reward app")
        let ruleSent = ContinuousClock.now
        _ = try await parent.setAppRule("org.khanacademy", category: "learning", pointsPerMinute: 2, enabled: true, blocked: nil, displayName: "Khan Academy")
        _ = try await parent.setAppRule("com.example.game", category: "reward", pointsPerMinute: nil, enabled: true, blocked: nil, displayName: "A game")
        self.say("parent", "saved two AppRules; the server sends the child's device the family's rules (one configuration command)")
        let ruleNotice = try await childInbox.next(within: self.wait) { $0.recordType == RecordTypes.configurationCommand }
        self.say("child", "notified (#\(ruleNotice.seq), \(ruleNotice.reason.rawValue)) \(Self.ms(ContinuousClock.now - ruleSent)) after the parent saved")
        // The server may send both rules at once or one after the other, and a newer
        // configuration may come while one is applied (its status is then refused, the newer
        // one pending): apply what is pending until nothing is and the configuration has both.
        var rounds = 0
        while true {
            let pending = try await child.pendingCommands()
            for command in pending {
                self.say("child", "applies \(command.recordName): \(try await child.apply(command))")
            }
            rounds += 1
            guard rounds < 20 else { throw CLIError(.timeout, "the child's configuration kept changing: still pending after 20 rounds") }
            guard pending.isEmpty else { continue }
            if child.profile.rules["org.khanacademy"] != nil && child.profile.rules["com.example.game"] != nil { break }
            _ = try await childInbox.next(within: self.wait) { $0.recordType == RecordTypes.configurationCommand }
        }
        let executed = try await parentInbox.next(within: self.wait) { $0.recordType == RecordTypes.configurationCommand && $0.fields?["status"] == "executed" }
        self.say("parent", "sees the command executed (#\(executed.seq))")

        self.step("4. Usage: the child uses Khan Academy for 30 minutes and uploads the session")
        let usageSent = ContinuousClock.now
        _ = try await child.upload([Device.Session(app: "org.khanacademy", start: Date().addingTimeInterval(-1800), end: Date(), category: nil)])
        let summary = try await parentInbox.next(within: self.wait) { $0.recordType == RecordTypes.dailySummary }
        self.say("parent", "DailySummary \(summary.recordName ?? "") arrives \(Self.ms(ContinuousClock.now - usageSent)) after the upload: learning \(Table.time(summary.fields?["totalLearningSeconds"]?.intValue ?? 0)), \(summary.fields?["totalPointsEarned"]?.intValue ?? 0) points")
        let balance = try await parentInbox.next(within: self.wait) { $0.recordType == RecordTypes.earnedTimeBalance }
        self.say("parent", "earned time is \(Table.time(balance.fields?["balanceSeconds"]?.intValue ?? 0)) (\(balance.fields?["pointsBalance"]?.intValue ?? 0) points)")

        self.step("5. Earned time runs out: the child plays the game for 70 minutes")
        let playSent = ContinuousClock.now
        _ = try await child.upload([Device.Session(app: "com.example.game", start: Date().addingTimeInterval(-4200), end: Date(), category: nil)])
        let shield = try await childInbox.next(within: self.wait) { $0.recordType == RecordTypes.configurationCommand && $0.recordName?.hasPrefix("shield-") == true }
        self.say("child", "shield command \(shield.recordName ?? "") arrives \(Self.ms(ContinuousClock.now - playSent)) after the upload")
        for command in try await child.pendingCommands() {
            self.say("child", "applies \(command.recordName): \(try await child.apply(command))")
        }
        if let alert = try? await parentInbox.next(within: self.wait, where: { $0.alert != nil }) {
            self.say("parent", "alert: \(alert.alert?.title ?? "")")
        }
        self.say("parent", "balance now \(Table.time(try await parent.balances(child: "sam").first?.fields.balanceSeconds ?? 0)); a bonus of 30 points lifts the shield")
        _ = try await parent.postLedgerEntry(child: "sam", type: "adjustment", points: 30, reason: "demo bonus", key: "\(family)-bonus")
        let unshield = try await childInbox.next(within: self.wait) { $0.recordType == RecordTypes.configurationCommand && $0.recordName?.hasPrefix("shield-") == true }
        for command in try await child.pendingCommands() {
            self.say("child", "applies \(command.recordName): \(try await child.apply(command))")
        }
        _ = unshield

        self.step("6. Revocation: the parent revokes the child's device")
        _ = try await self.timed("parent revokes") { try await parent.pairing.call(PairingMethods.revokeDevice, DeviceParams(deviceId: child.profile.deviceId)) }
        do {
            _ = try await child.upload([Device.Session(app: "org.khanacademy", start: Date().addingTimeInterval(-60), end: Date(), category: nil)], direct: true)
            self.say("child", "could still write (unexpected)")
        } catch let error as RPCError {
            self.say("child", "its next write is refused: \(error.code)")
        }

        self.step("Done in \(Self.ms(ContinuousClock.now - self.started)). The profiles stay: --profile \(family)-parent, --profile \(family)-child")
    }

    func options(_ profile: String) throws -> DeviceOptions {
        var arguments = ["--profile", profile, "--timeout", String(self.connection.timeout)]
        if let directory = self.connection.runtimeDirectory { arguments += ["--runtime-dir", directory] }
        if let server = self.remote.serverURL { arguments += ["--server", server] }
        if let pin = self.remote.pinText { arguments += ["--pin", pin] }
        return try DeviceOptions.parse(arguments)
    }

    func step(_ text: String) { Output.line("\n\(text)") }

    func say(_ who: String, _ text: String) { Output.line("  \(who.padding(toLength: 6, withPad: " ", startingAt: 0)) \(text)") }

    func timed<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        let begun = ContinuousClock.now
        let result = try await body()
        Output.line("  \("".padding(toLength: 6, withPad: " ", startingAt: 0)) \(what): \(Self.ms(ContinuousClock.now - begun))")
        return result
    }

    static func ms(_ duration: Duration) -> String {
        String(format: "%.1f ms", Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
    }
}

/// A device's notifications, listened to in the background and taken as they match.
final class Inbox: Sendable {
    private let received = Mutex<(notifications: [PushNotification], failure: (any Error)?)>(([], nil))
    private let listener = Mutex<Task<Void, Never>?>(nil)

    static func open(_ device: Device) async throws -> Inbox {
        try await device.subscribeForWatching()
        let inbox = Inbox()
        let listener = Task {
            do {
                try await device.watch { notification in
                    inbox.received.withLock { $0.notifications.append(notification) }
                    return true
                }
            } catch {
                inbox.received.withLock { $0.failure = error }
            }
        }
        inbox.listener.withLock { $0 = listener }
        return inbox
    }

    /// The first notification received that matches (taken out; the others stay); fails
    /// after `timeout`, or if the stream failed.
    func next(within timeout: Duration, where matches: (PushNotification) -> Bool) async throws -> PushNotification {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (found, failure): (PushNotification?, (any Error)?) = self.received.withLock { received in
                guard let index = received.notifications.firstIndex(where: matches) else { return (nil, received.failure) }
                return (received.notifications.remove(at: index), nil)
            }
            if let found { return found }
            if let failure { throw failure }
            guard ContinuousClock.now < deadline else { throw CLIError(.timeout, "the expected notification did not arrive within \(timeout)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func close() { self.listener.withLock { $0?.cancel() } }
}
