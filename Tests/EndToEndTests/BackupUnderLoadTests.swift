import Foundation
import RPCCore
import StackSupport
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// A whole-server backup taken while 32 clients write: the archive is consistent (no
/// follower ahead of the store) and holds every save acknowledged before it began.
@Suite("Backups under load", .serialized)
struct BackupUnderLoadTests {
    @Test("a backup while 32 clients write: the followers' positions at most the store's, and every save acknowledged before it began is in the restored server")
    func backupWhileWriting() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let admin = stack.client("store")
        _ = try await admin.call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
        _ = try await admin.call(StoreMethods.createZone, ZoneParams(family: "smith", zone: "usage"))

        let load = Load()
        let writers = (0..<32).map { writer in
            Task {
                let client = stack.client("store")
                var count = 0
                while !load.stop.withLock({ $0 }) {
                    let name = "w\(writer)-\(count)"
                    let save = RecordSave(recordType: "UsageRecord", recordName: name, fields: [
                        "logicalID": "org.khan", "deviceID": .string("tablet-\(writer)"), "category": "learning", "totalSeconds": .int(60),
                        "sessionStart": .date(Date(timeIntervalSince1970: 1_790_000_000 + Double(count * 120))),
                        "sessionEnd": .date(Date(timeIntervalSince1970: 1_790_000_060 + Double(count * 120))),
                    ])
                    _ = try await client.call(StoreMethods.modify, ModifyParams(family: "smith", zone: "usage", saves: [save], savePolicy: .allKeys, atomic: true))
                    load.acknowledged.withLock { $0.append(name) }
                    count += 1
                }
            }
        }
        try await stack.waitUntil("the writers under way", timeout: .seconds(60)) { load.acknowledged.withLock { $0.count } >= 640 }
        let before = load.acknowledged.withLock { $0 }
        let backup = try await stack.ctl("backup", "under-load", "--config-dir", stack.directory.file("no-etc"), timeout: .seconds(120))
        try await stack.waitUntil("more writes after the backup", timeout: .seconds(60)) { load.acknowledged.withLock { $0.count } >= before.count + 320 }
        load.stop.withLock { $0 = true }
        for writer in writers { try await writer.value }
        #expect(backup.status == 0, "\(backup)")
        func position(_ label: String) -> Int64? {
            backup.stdout.range(of: label + #" [0-9]+"#, options: .regularExpression).flatMap { Int64(backup.stdout[$0].split(separator: " ").last ?? "") }
        }
        let store = try #require(position("the store up to change")), push = try #require(position("push up to")), aggregator = try #require(position("the aggregator up to"))
        #expect(push <= store && aggregator <= store, "no follower ahead of the store: \(backup.stdout)")

        // Restored into a server of its own: every save acknowledged before the backup began.
        let elsewhere = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: elsewhere.file("stack/state"), withIntermediateDirectories: true)
        let restored = try await runCommand(Binaries.path("screentimectl"), ["restore", stack.stack + "/state/backups/under-load.tar", "--state-dir", elsewhere.file("stack/state"),
                                                                             "--config-dir", elsewhere.file("etc"), "--services-stopped"], timeout: .seconds(120))
        #expect(restored.status == 0, "\(restored)")
        let copy = try await DevStack.start(in: elsewhere)
        defer { copy.stopNow() }
        var missing: [String] = []
        for names in stride(from: 0, to: before.count, by: 400).map({ Array(before[$0..<min($0 + 400, before.count)]) }) {
            missing += try await copy.client("store").call(StoreMethods.fetch, FetchParams(family: "smith", zone: "usage", recordNames: names)).missing
        }
        #expect(missing.isEmpty, "\(missing.count) of \(before.count) acknowledged saves missing, e.g. \(missing.prefix(5))")
    }
}

/// What the writers share: the names acknowledged, in order, and when to stop.
private final class Load: Sendable {
    let acknowledged = Mutex<[String]>([])
    let stop = Mutex(false)
}
