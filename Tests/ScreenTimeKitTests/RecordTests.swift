import Foundation
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

@Suite("Records", .serialized)
struct RecordTests {
    @Test("a query the server answers with an empty page and a cursor (it read 10,000 records and found none) gives no empty page: the kit asks on")
    func emptyPagesAreNotGivenOn() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()
        // 10,100 sessions of Emma's iPad, then one of her old one, saved by the server's admin.
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        for chunk in stride(from: 0, to: 10_101, by: 400) {
            let saves = try (chunk..<min(10_101, chunk + 400)).map { i in
                try RecordSave.record(UsageRecord(logicalID: "org.khan", sessionStart: start.addingTimeInterval(Double(i) * 60),
                                                  sessionEnd: start.addingTimeInterval(Double(i) * 60 + 30), totalSeconds: 30,
                                                  deviceID: i == 10_100 ? "emma-old-ipad" : "emma-ipad"), named: "s\(i)")
            }
            let result = try await stack.admin("store").call(StoreMethods.modify, ModifyParams(family: "smith", zone: zone, saves: saves))
            #expect(result.saved.allSatisfy { $0.error == nil })
        }
        var pages: [[String]] = []
        for try await page in parent.records.query(UsageRecord.self, in: zone, where: [QueryFilter(UsageRecord.Field.deviceID, .equal, "emma-old-ipad")]) {
            pages.append(page.map(\.recordName))
        }
        #expect(pages == [["s10100"]])
        await child.close()
        await parent.close()
    }

    @Test("typed records round-trip every field type; queries come in pages; zone changes move the kept token only after the handler")
    func recordsPagesAndChanges() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()

        // Strings, integers, booleans, dates, in the store's own forms.
        let added = Date(timeIntervalSince1970: 1_790_000_000.123)
        let configuration = AppConfiguration(logicalID: "org.khan", bundleIdentifier: "org.khanacademy", displayName: "Khan", category: "learning",
                                             pointsPerMinute: 3, isEnabled: true, blockingEnabled: false, dateAdded: added, deviceID: "emma-ipad")
        let saved = try await parent.records.save(TypedRecord(configuration, recordName: "config-org.khan", zone: zone))
        #expect(saved.fields == configuration)
        #expect(saved.changeTag != nil)
        #expect(try await child.records.fetch(AppConfiguration.self, "config-org.khan", in: zone)?.fields == configuration)
        #expect(try await child.records.fetch(AppConfiguration.self, "nothing", in: zone) == nil)

        // Five sessions, read back two at a time.
        try child.child.uploadUsage((0..<5).map { UsageSession(logicalID: "app-\($0)", start: usageUTC(0, $0), end: usageUTC(0, $0).addingTimeInterval(60)) })
        await child.queue.waitUntilDrained()
        var pages: [[TypedRecord<UsageRecord>]] = []
        for try await page in parent.records.query(UsageRecord.self, in: zone, sort: QuerySort("sessionStart", descending: true), pageSize: 2) {
            pages.append(page)
        }
        #expect(pages.map(\.count) == [2, 2, 1])
        #expect(pages.flatMap { $0 }.map(\.fields.logicalID) == ["app-4", "app-3", "app-2", "app-1", "app-0"])

        // Zone changes: everything, then nothing, then only what is new.
        var seen: [String] = []
        try await parent.records.fetchChanges(in: zone) { page in seen += page.records.map(\.recordName) }
        #expect(seen.contains("config-org.khan"))
        #expect(seen.filter { $0.hasPrefix("usage-") }.count == 5)
        seen = []
        try await parent.records.fetchChanges(in: zone) { page in seen += page.records.map(\.recordName) }
        #expect(seen.isEmpty)

        try child.child.uploadUsage([UsageSession(logicalID: "app-9", start: usageUTC(0, 30), end: usageUTC(0, 31))])
        await child.queue.waitUntilDrained()
        struct Interrupted: Error {}
        await #expect(throws: Interrupted.self) { try await parent.records.fetchChanges(in: zone) { _ in throw Interrupted() } }
        try await parent.records.fetchChanges(in: zone) { page in seen += try page.records(UsageRecord.self).map(\.fields.logicalID) }
        #expect(seen == ["app-9"], "the page the handler did not finish comes again")
        seen = []
        try await parent.records.fetchChanges(in: zone) { page in seen += page.records.map(\.recordName) }
        #expect(seen.isEmpty)

        // Deletes show up as deletions.
        _ = try await parent.records.delete(["config-org.khan"], in: zone)
        var deleted: [String] = []
        try await parent.records.fetchChanges(in: zone) { page in deleted += page.deletions.map(\.recordName) }
        #expect(deleted == ["config-org.khan"])
        await child.close()
        await parent.close()
    }
}
