// Made from docs/kit.md by KitDocsTests; do not edit (change the manual, then run
// UPDATE_KIT_SNIPPETS=1 swift test --filter KitDocsTests).
import Foundation
import PairingAPI
import PushAPI
import ScreenTimeKit
import StoreAPI
import Synchronization
#if os(iOS)
import SwiftUI
import UIKit
import UserNotifications
#endif
#if canImport(CloudKit)
import CloudKit
#endif

// docs/kit.md, Swift block 1
// .product(name: "ScreenTimeKit", package: "ScreenTimeServer")

// docs/kit.md, Swift block 2
extension KitDocs {
    static func block2() async throws {
        // On a phone: the gateway, at the URL and pin the pairing code carried.
        let kit = try ScreenTimeClient.remote(
            credentials: KeychainCredentialStore(),                 // the app's (below)
            databasePath: appSupport + "/screentime.sqlite",        // the kit's own SQLite file
            link: PairingURI(scannedText))                          // before pairing only (PairingAPI's parser)
        show("Connection", "\(kit.transport.state)")                  // connected, reconnecting, offline, revoked, suspended
    }
}

// docs/kit.md, Swift block 3
extension KitDocs {
    static func block3() async throws {
        // On the server itself (screentimectl, tests): the services' sockets.
        let kit = try ScreenTimeClient.local(runtimeDirectory: "/run/screentime",
                                             credentials: FileCredentialStore(path: home + "/.config/screentime/device.json"),
                                             databasePath: home + "/.local/state/screentime/kit.sqlite")
        show("Paired as", kit.identity?.deviceId ?? "not paired yet")
    }
}

// docs/kit.md, Swift block 4
extension KitDocs {
    static func block4() async throws {
        let pending = try await kit.pairing.accept(uri: scannedText, deviceId: deviceId, deviceName: "Emma's iPad")
        show(pending.shortCode.emojiLine, pending.shortCode.namesLine)   // the same as the parent's screen
        try await pending.waitForConfirmation()                          // throws if the parent rejects
    }
}

// docs/kit.md, Swift block 5
extension KitDocs {
    static func block5() async throws {
        try await kit.pairing.enroll(family: "smith", code: codeFromAdmin, deviceId: "mum-phone", deviceName: "Mum's phone")
        let invitation = try await kit.pairing.inviteChild(childId: "emma", childName: "Emma")
        showQR(invitation.uri)                                           // CIFilter.qrCodeGenerator on iOS
        let code = try await kit.pairing.waitForAcceptance(of: invitation)
        if userSaysCodesMatch(code) { try await kit.pairing.confirm(invitation) } else { try await kit.pairing.reject(invitation) }
        try await kit.pairing.revoke(deviceId: "emma-ipad")
        let coParent = try await kit.pairing.inviteParent()              // an enrollment code
        show(coParent.code, "for Dad's phone")
    }
}

// docs/kit.md, Swift block 6
extension KitDocs {
    static func block6() async throws {
        let rule = try await kit.records.fetch(AppRule.self, "rule-org.khanacademy", in: "default")
        show(rule?.fields.classification ?? "no rule", "for Khan Academy")
        let weekAgo = Date().addingTimeInterval(-7 * 86_400)
        for try await page in kit.records.query(UsageRecord.self, in: zone,
                                                where: [QueryFilter("deviceID", .equal, "emma-ipad"), QueryFilter("sessionStart", .greaterOrEqual, .date(weekAgo))],
                                                sort: QuerySort("sessionStart", descending: true)) {
            for usage in page { show(usage.fields.logicalID, "\(usage.fields.totalSeconds) s") }
        }
        if var policy = try await kit.records.fetch(ShieldPolicy.self, "shield-emma", in: "default") {
            policy.fields.rewardApps?.append("com.video")
            try await kit.records.save(policy)                           // ifServerRecordUnchanged
        }
        let result = try await kit.records.modify(in: zone, saves: [RecordSave(recordType: "AuditEntry", recordName: "note-1", fields: ["action": "note"])],
                                                  deletes: [RecordDelete(recordName: "note-0")], policy: .changedKeys, atomic: true)
        show("Saved", "\(result.saved.count) records")
        try await kit.records.fetchChanges(in: zone) { page in cache.apply(page) }   // token kept by the kit
    }
}

// docs/kit.md, Swift block 7
extension KitDocs {
    static func block7() async throws {
        for await event in kit.queue.events() {
            switch event {
            case .sending(let batch): show("sending", batch.requestId)                    // each attempt, as it starts
            case .applied(let batch, let result): show("sent", "\(batch.requestId) replayed: \(result.replayed == true)")
            case .failed(let batch, let error): show("refused", "\(batch.requestId): \(error.message)")   // failures(), retry(requestId:), discard(requestId:)
            case .willRetry(let batch, let error, let after): show("retrying", "\(batch.requestId) in \(after): \(error.code)")
            case .held(let batch, let error): show("held", "\(batch.requestId): \(error.message)")        // device_revoked: kept, not sent until paired again
            }
        }
    }
}

// docs/kit.md, Swift block 8
extension KitDocs {
    static func block8() async throws {
        // The server rewrites the device's configuration in place: listen to creations and
        // updates of pending commands (the device's own "executed" does not match).
        try await kit.notifications.subscribe(to: "ConfigurationCommand", in: zone,
                                              where: [QueryFilter("status", .equal, "pending")], firesOn: [.create, .update])
        try await kit.notifications.handle { notification in
            _ = try await kit.child.applyPendingCommands(enforce)           // acknowledged after this returns
        }
        // or: for try await notification in kit.notifications.stream() { … }   (acknowledged when the loop asks for the next)
    }
}

// docs/kit.md, Swift block 9
#if os(iOS)
final class AppDelegate: NSObject, UIApplicationDelegate {
    let kit = try! ScreenTimeClient.remote(credentials: KeychainCredentialStore(), databasePath: appSupport + "/screentime.sqlite")

    // On every launch, after registerForRemoteNotifications()
    func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken token: Data) {
        Task {
            try await kit.notifications.enableWakes(apnsToken: token, relay: URL(string: "https://relay.example.com")!,
                                                    environment: .production)   // .development for Xcode builds
        }
    }

    // A silent push ("content-available"): the relay's handle for enableWakes, or a wake:
    // fetch what waits, apply it, within iOS's ~30 s.
    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any]) async -> UIBackgroundFetchResult {
        if kit.notifications.receiveRemoteNotification(userInfo) { return .newData }
        await kit.resume()
        defer { Task { await self.kit.suspend() } }
        do {
            let kit = self.kit
            let handled = try await kit.notifications.handleWake { notification in
                if notification.recordType == "ConfigurationCommand" { _ = try await kit.child.applyPendingCommands(enforce) }
            }
            return handled > 0 ? .newData : .noData
        } catch {
            return .failed
        }
    }
}
#endif

// docs/kit.md, Swift block 10
#if os(iOS)
struct FamilyView: View {
    let kit: ScreenTimeClient
    @Environment(\.scenePhase) private var scenePhase

    var body: some View {
        Text("Emma's day")
            .onChange(of: scenePhase) { _, phase in
                Task {
                    switch phase {
                    case .background: await kit.suspend()      // sends what is queued (≤ 5 s), closes the connection cleanly
                    case .active: await kit.resume()           // connects again, replays the queue
                    default: break
                    }
                }
            }
    }
}
#endif

// docs/kit.md, Swift block 11
#if canImport(CloudKit) && os(iOS)
// CloudKit: the subscription's silent push, and the fetch it triggered
final class CloudKitAppDelegate: NSObject, UIApplicationDelegate {
    func subscriptionInfo() -> CKSubscription.NotificationInfo {
        let info = CKSubscription.NotificationInfo()
        info.shouldSendContentAvailable = true
        return info
    }

    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                     fetchCompletionHandler completion: @escaping (UIBackgroundFetchResult) -> Void) {
        _ = CKNotification(fromRemoteNotificationDictionary: userInfo)
        downloadParentConfiguration { completion(.newData) }
    }

    func downloadParentConfiguration(_ done: @escaping () -> Void) { done() }
}
#endif

// docs/kit.md, Swift block 12
#if os(iOS)
final class NotificationService: UNNotificationServiceExtension {
    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        let content = (request.content.mutableCopy() as? UNMutableNotificationContent) ?? UNMutableNotificationContent()
        Task {
            let kit = try ScreenTimeClient.remote(credentials: KeychainCredentialStore(),
                                                  databasePath: appGroup + "/screentime.sqlite")
            let latest = Mutex<Alert?>(nil)
            _ = try? await kit.notifications.handleWake(within: .seconds(20)) { note in
                if let alert = note.alert { latest.withLock { $0 = alert } }
            }
            if let alert = latest.withLock({ $0 }) {
                content.title = alert.title
                content.body = alert.body ?? ""
            }
            await kit.close()
            contentHandler(content)
        }
    }
}
#endif

// docs/kit.md, Swift block 13
/// Parent, first launch: join the family with the administrator's code, then invite the
/// child's device; the QR code shows `invitation.uri`.
func parentInvitesChild(_ kit: ScreenTimeClient, enrollmentCode: String) async throws -> ChildInvitation {
    try await kit.pairing.enroll(family: "smith", code: enrollmentCode, deviceId: "mum-phone", deviceName: "Mum's phone")
    return try await kit.pairing.inviteChild(childId: "emma", childName: "Emma")
}

/// Child, first launch: scan the code, show the short code, wait for the parent.
func childJoins(_ kit: ScreenTimeClient, scanned: String, showCode: @Sendable (ShortCode) -> Void) async throws {
    let pending = try await kit.pairing.accept(uri: scanned, deviceId: "emma-ipad", deviceName: "Emma's iPad")
    showCode(pending.shortCode)
    try await pending.waitForConfirmation()
}

/// Parent: the child's screen shows the same code: confirm, then make Khan Academy a
/// learning app (2 points a minute) and YouTube a reward app.
func parentConfirmsAndSetsRules(_ kit: ScreenTimeClient, invitation: ChildInvitation, codesMatch: (ShortCode) -> Bool) async throws {
    let code = try await kit.pairing.waitForAcceptance(of: invitation)
    guard codesMatch(code) else {
        _ = try await kit.pairing.reject(invitation)
        return
    }
    _ = try await kit.pairing.confirm(invitation)
    _ = try await kit.parent.setAppRule(AppRuleChange(bundleId: "org.khanacademy", classification: "learning", pointsPerMinute: 2))
    _ = try await kit.parent.setAppRule(AppRuleChange(bundleId: "com.google.ios.youtube", classification: "reward"))
    await kit.queue.waitUntilDrained()
}

/// Child, in the background: apply the parent's rules, upload what DeviceActivity recorded.
func childSyncs(_ kit: ScreenTimeClient, sessions: [UsageSession], enforce: (TypedRecord<ConfigurationCommand>) async throws -> Void) async throws -> AppliedCommands {
    let applied = try await kit.child.applyPendingCommands(enforce)
    _ = try kit.child.uploadUsage(sessions)
    await kit.queue.waitUntilDrained()
    return applied
}

/// Parent: Emma's day and what she has earned.
func parentChecksToday(_ kit: ScreenTimeClient) async throws -> (learningSeconds: Int64, pointsBalance: Int64?) {
    let days = try await kit.parent.todaySummary(for: "emma")
    let balance = try await kit.parent.balance(for: "emma")
    return (days.reduce(0) { $0 + ($1.fields.totalLearningSeconds ?? 0) }, balance?.fields.pointsBalance)
}
