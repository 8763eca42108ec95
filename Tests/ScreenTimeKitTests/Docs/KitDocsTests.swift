import Foundation
import PairingAPI
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

/// docs/kit.md is the app developer's manual: its code is compiled with the tests
/// (Snippets.swift, made from it), and its flows run against the real services.
@Suite("docs/kit.md: its code compiles and its flows run", .serialized)
struct KitDocsTests {
    @Test("Snippets.swift is what docs/kit.md's code blocks make (UPDATE_KIT_SNIPPETS=1 writes it), and the manifest line names a real product")
    func snippetsMatchTheManual() throws {
        let markdown = try String(contentsOfFile: KitDocsSnippets.manual, encoding: .utf8)
        let blocks = try KitDocsSnippets.blocks(markdown)
        #expect(blocks.count >= 10, "the manual's blocks were found: \(blocks.map(\.line))")
        let source = try KitDocsSnippets.source(blocks)
        if ProcessInfo.processInfo.environment["UPDATE_KIT_SNIPPETS"] == "1" {
            try source.write(toFile: KitDocsSnippets.generated, atomically: true, encoding: .utf8)
        }
        let current = (try? String(contentsOfFile: KitDocsSnippets.generated, encoding: .utf8)) ?? ""
        #expect(current == source, "docs/kit.md's code changed: run UPDATE_KIT_SNIPPETS=1 swift test --filter KitDocsTests, then build")
        let package = try String(contentsOf: KitDocsSnippets.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        for block in blocks where block.kind == "manifest" {
            #expect(package.contains(#".library(name: "ScreenTimeKit""#) && block.code.contains(#""ScreenTimeKit""#))
        }
    }

    @Test("the parent's and child's flows from the manual, run as the two apps would against the real services: enroll and invite, join, confirm and set rules, sync, check today")
    func manualFlowsRun() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        let parent = try stack.kit("parent")
        let child = try stack.kit("child")
        let invitation = try await parentInvitesChild(parent, enrollmentCode: code.code)
        let shown = Arrivals<ShortCode>()
        async let joined: Void = childJoins(child, scanned: invitation.uri) { shown.append($0) }
        let childSaw = try await shown.wait(for: 1, timeout: .seconds(30))[0]
        try await parentConfirmsAndSetsRules(parent, invitation: invitation) { $0 == childSaw }
        try await joined

        let enforced = Arrivals<String>()
        // Twenty minutes of today (UTC, the family's zone), ended before now: shorter just after
        // midnight, whole minutes (2 points each) whatever the time.
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let now = Date(), startOfDay = utc.startOfDay(for: now)
        let seconds = max(60, Int64(min(1200, now.timeIntervalSince(startOfDay) - 1)) / 60 * 60)
        let start = now.addingTimeInterval(-Double(seconds))
        let applied = try await childSyncs(child, sessions: [UsageSession(logicalID: "org.khanacademy", bundleId: "org.khanacademy", category: "learning",
                                                                           start: start, end: now)]) { enforced.append($0.recordName) }
        #expect(applied.executed.count == 1 && enforced.count == 1, "the family's configuration applied: \(applied.executed)")
        let today = try await eventually("the aggregator counted the usage") { seen in
            let today = try await parentChecksToday(parent)
            seen = "\(today)"
            // The day's summary and the balance are written one after the other.
            return today.learningSeconds == seconds && (today.pointsBalance ?? 0) > 0 ? today : nil
        }
        #expect(today.pointsBalance == seconds / 60 * 2, "learning at 2 points a minute: \(today)")
        await child.close()
        await parent.close()
    }
}
