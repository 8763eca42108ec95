import Foundation
import PushAPI
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

/// The brief's flows end to end through the library, against the real services on their
/// Unix sockets: pairing with the same code on both sides, a rule set by the parent and
/// applied by the child, usage uploaded by the child and summed up for the parent, a
/// co-parent, a revocation.
@Suite("Family story through ScreenTimeKit", .serialized)
struct FamilyStoryTests {
    @Test("pairing, a rule to the child, usage to the parent, a co-parent, revocation")
    func familyStory() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (parent, child, childZone) = try await stack.family()
        #expect(child.identity?.status == .active)
        #expect(child.identity?.zone == childZone)
        // The credential is in a file only its owner can read.
        let attributes = try FileManager.default.attributesOfItem(atPath: stack.directory.file("child.credential"))
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        // Subscriptions: the child hears of its commands, the parent of summaries.
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: childZone, where: [QueryFilter("status", .equal, "pending")], firesOn: [.create, .update])
        try await parent.notifications.subscribe(to: "DailySummary")
        let childHeard = Arrivals<PushNotification>()
        let parentHeard = Arrivals<PushNotification>()
        let listeners = [
            Task { try await child.notifications.handle { childHeard.append($0) } },
            Task { try await parent.notifications.handle { parentHeard.append($0) } },
        ]
        defer { for listener in listeners { listener.cancel() } }

        // Flow 3: the parent sets a rule; the server sends the child's device the family's
        // configuration; its subscription fires; it applies it.
        let update = try await parent.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning", pointsPerMinute: 2))
        #expect(update.ruleName == "app-org.khanacademy" && update.requestIds.count == 1)
        await parent.queue.waitUntilDrained()
        let heard = try await childHeard.wait(for: 1, timeout: .seconds(20), "the child's command notification")
        #expect(heard[0].recordType == "ConfigurationCommand")
        let applied = try await eventually("the configuration with the rule, applied") { seen in
            var rules: [String] = []
            _ = try await child.child.applyPendingCommands { command in
                if let configuration = command.fields.configuration { rules = configuration.rules.map(\.bundleId) }
            }
            seen = "\(rules)"
            return rules == ["org.khanacademy"] ? rules : nil
        }
        #expect(applied == ["org.khanacademy"])
        await child.queue.waitUntilDrained()
        #expect(try child.queue.failures().isEmpty)
        let command = try #require(try await parent.records.fetch(ConfigurationCommand.self, ConfigurationSnapshot.recordName, in: childZone))
        #expect(command.fields.status == "executed" && command.fields.configuration?.rules.first?.pointsPerMinute == 2)
        #expect(command.fields.executedAt != nil)
        #expect(try await child.child.pendingCommands().isEmpty)
        let rule = try #require(try await parent.records.fetch(AppRule.self, "app-org.khanacademy", in: "default"))
        #expect(rule.fields.classification == "learning")
        // The app tells the parents which version it runs.
        try child.child.reportAppVersion("2.1.0")
        await child.queue.waitUntilDrained()
        let registered = try #require(try await parent.records.queryAll(RegisteredDevice.self, in: childZone).first)
        #expect(registered.fields.appVersion == "2.1.0")

        // Flow 4: the child uploads usage; the aggregator sums it up; the parent reads it.
        try child.child.uploadUsage([
            UsageSession(logicalID: "org.khanacademy", bundleId: "org.khanacademy", category: "learning", start: usageUTC(0, 1), end: usageUTC(0, 21)),
            UsageSession(logicalID: "com.game", category: "reward", start: usageUTC(0, 30), end: usageUTC(0, 35)),
        ])
        await child.queue.waitUntilDrained()
        _ = try await parentHeard.wait(for: 1, timeout: .seconds(20), "the parent's summary notification")
        let summary = try await eventually("today's summary counts both sessions", timeout: .seconds(20), detail: stack.log("aggregator")) { seen in
            let summaries = try await parent.parent.todaySummary(for: "emma", now: usageUTC(12, 0))
            seen = "\(summaries.map(\.fields))"
            guard let first = summaries.first, first.fields.totalLearningSeconds == 1200, first.fields.totalRewardSeconds == 300 else { return nil as TypedRecord<DailySummary>? }
            return first
        }
        #expect(summary.fields.totalPointsEarned == 40)
        #expect(summary.fields.appsUsed.map(\.app).contains("org.khanacademy"))
        let balance = try await eventually("the balance counts the points") { seen in
            let balance = try await parent.parent.balance(for: "emma")
            seen = "\(String(describing: balance?.fields))"
            return balance?.fields.pointsBalance == 40 ? balance : nil
        }
        #expect(balance.fields.rewardSecondsUsed == 300)
        let day = ISO8601DateFormatter.string(from: usageDayUTC, timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate])
        let weekly = try await parent.parent.report(for: "emma", from: day, to: day)
        #expect(weekly.learningSeconds == 1200)
        #expect(weekly.points == 40)

        // A co-parent joins with a code from the admin parent.
        let code = try await parent.pairing.inviteParent()
        let dad = try stack.kit("dad")
        let dadIdentity = try await dad.pairing.enroll(family: "smith", code: code.code, deviceId: "dad-phone", deviceName: "Dad's phone")
        #expect(dadIdentity.role == .coParent)
        #expect(try await dad.parent.balance(for: "emma")?.fields.pointsBalance == 40)

        // Revocation cuts the child off at once.
        try await parent.pairing.revoke(deviceId: "emma-ipad")
        let revoked = await #expect(throws: RPCError.self) { _ = try await child.child.pendingCommands() }
        #expect(revoked?.code == .deviceRevoked)
        for listener in listeners { listener.cancel() }
        await child.close()
        await parent.close()
        await dad.close()
    }

    @Test("a rejected pairing: the child hears it, and its credential stops working")
    func rejected() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let code = try await stack.admin("pairing").call(PairingMethodsShim.createFamily, PairingMethodsShim.family)
        let parent = try stack.kit("parent")
        try await parent.pairing.enroll(family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone")
        let invitation = try await parent.pairing.inviteChild(childId: "emma")
        let child = try stack.kit("child")
        let pending = try await child.pairing.accept(uri: invitation.uri, deviceId: "stranger", deviceName: "Not Emma's")
        // Not confirmed yet: writes wait in the queue (pairing_unconfirmed is "not yet").
        try child.child.uploadUsage([UsageSession(logicalID: "x", start: usageUTC(0, 1), end: usageUTC(0, 2))])
        _ = try await parent.pairing.waitForAcceptance(of: invitation)
        try await parent.pairing.reject(invitation)
        await #expect(throws: RPCError.self) { try await pending.waitForConfirmation(timeout: .seconds(10)) }
        // The device is out of the family now: the queued write is kept, not sent, and
        // not set aside as failed either (pairing again sends it).
        let held = try await eventually("the queued write is held with device_revoked") { seen in
            let pending = try child.queue.pending()
            seen = "pending \(pending.map { $0.lastError?.description ?? "-" })"
            return pending.first?.lastError?.code == .deviceRevoked ? pending : nil
        }
        #expect(held.count == 1)
        #expect(try child.queue.failures().isEmpty)
        await child.close()
        await parent.close()
    }

    @Test("a URI that is not a pairing code is refused clearly")
    func badURI() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let child = try stack.kit("child")
        await #expect(throws: RPCError.self) { _ = try await child.pairing.accept(uri: "https://example.com", deviceId: "d", deviceName: "d") }
        await child.close()
    }
}

import PairingAPI

/// The administrator's bootstrap call, named once for the tests.
enum PairingMethodsShim {
    static let createFamily = PairingMethods.createFamily
    static let family = NewFamilyParams(family: "smith", displayName: "The Smiths", timeZone: "UTC")
}
