import AggregatorAPI
import Foundation
import PushAPI
import RPCCore
import StoreAPI
import Testing

/// Some replies are written (and read) by hand, for speed: each such type must say exactly
/// what its `Codable` form says. The examples below cover every type that conforms to
/// `JSONWritable` or `JSONReadable` in Sources/, and a test fails if a conformance appears
/// there without an example here.
@Suite("Hand-written JSON says what Codable says, for every type that has it")
struct HandWrittenJSONTests {
    struct Example: Sendable, CustomTestStringConvertible {
        let typeName: String
        let check: @Sendable () throws -> Void
        var testDescription: String { self.typeName }

        /// `decodes`: whether the written text decodes back to the value (a notification not
        /// numbered yet is only ever sent numbered).
        init<T: Codable & Equatable & Sendable & JSONWritable>(_ values: [T], decodes: @escaping @Sendable (T) -> Bool = { _ in true }) {
            self.typeName = String(describing: T.self)
            self.check = {
                for value in values {
                    var writer = JSONWriter()
                    try value.write(to: &writer)
                    let written = try JSONParser.parse(bytes: writer.bytes)
                    #expect(written == (try JSONParser.parse(bytes: Array(try RPCJSON.makeEncoder().encode(value)))), "\(T.self) written as encoded")
                    guard decodes(value) else { continue }
                    #expect(try RPCJSON.makeDecoder().decode(T.self, from: Data(writer.bytes)) == value, "\(T.self) decodes back")
                    if let readable = T.self as? any JSONReadable.Type {
                        #expect(readable.read(written) as? T == value, "\(T.self) read by hand")
                        #expect(readable.read(bytes: writer.bytes, range: 0..<writer.bytes.count) as? T == value, "\(T.self) read by hand from its text")
                    }
                }
            }
        }
    }

    static let at = Date(timeIntervalSince1970: 1_795_003_200.123)
    static let record = Record(
        recordType: "AppRule", recordName: "rule-org.khan\"academy", zone: "default",
        fields: ["familyRef": .reference("fam-1", zone: "default"), "pointsPerMinute": 2, "ratio": 0.25,
                 "tags": ["a", "b/c"], "note": "line\nnext", "missing": nil],
        changeTag: "2s", createdAt: Self.at, modifiedAt: Date(timeIntervalSince1970: 1_795_003_260),
        createdBy: "device:p1", modifiedBy: "local")
    static let save = RecordSave(recordType: "AppRule", recordName: "r", fields: Self.record.fields, changeTag: "2s")
    static let apps = [ReportApp(app: "org.khan/academy", category: "learning", seconds: 600, points: 20), ReportApp(app: "x", category: nil, seconds: 1, points: 0)]
    static let rows = [ReportRow(period: "2026-11-21", learningSeconds: 600, rewardSeconds: 1, points: 20, topApps: Self.apps),
                       ReportRow(period: "2026-11-22", learningSeconds: 0, rewardSeconds: 0, points: 0, topApps: [])]

    static let examples: [Example] = [
        // The store
        Example([Self.record]),
        Example([RecordID(zone: "z", recordName: "r", recordType: "T"), RecordID(zone: "z", recordName: "s")]),
        Example([FetchResult(records: [Self.record, Self.record], missing: ["gone", "also gone"]), FetchResult(records: [], missing: [])]),
        Example([QueryResult(records: [Self.record], cursor: "c1"), QueryResult(records: [], cursor: nil)]),
        Example([ZoneChangesResult(
            records: [Self.record], deletions: [RecordID(zone: "z", recordName: "r", recordType: "T"), RecordID(zone: "z", recordName: "s")],
            token: "t", moreComing: true)]),
        Example([
            ChangeEvent(seq: 7, family: "f", zone: "z", kind: .recordSaved, recordType: "AppRule", recordName: "r",
                        changeTag: "7", record: Self.record, at: Self.at, created: true),
            ChangeEvent(seq: 8, family: "f", zone: "z", kind: .recordDeleted, recordType: "AppRule", recordName: "r",
                        changeTag: nil, record: nil, at: Self.at, created: nil, deletedFields: ["bundleId": "org.x"]),
            ChangeEvent(seq: 9, family: "f", zone: "z", kind: .zoneCreated, recordType: nil, recordName: nil, changeTag: nil, record: nil, at: Self.at),
            ChangeEvent(seq: 10, family: "f", zone: "", kind: .credentialChanged, recordType: nil, recordName: "d", changeTag: nil, record: nil, at: Self.at,
                        credential: CredentialEntry(family: "f", deviceId: "d", role: .child, status: .revoked, tokenSHA256: String(repeating: "a", count: 64), updatedAt: Self.at)),
        ]),
        Example([SaveOutcome(recordName: "r", record: Self.record),
                 SaveOutcome(recordName: "s", error: ItemError(code: .conflict, message: "changed", field: "x", serverRecord: Self.record))]),
        Example([DeleteOutcome(recordName: "d", deleted: true), DeleteOutcome(recordName: "e", error: ItemError(code: .notFound, message: "gone"))]),
        Example([ModifyResult(
            saved: [SaveOutcome(recordName: "r", record: Self.record)],
            deleted: [DeleteOutcome(recordName: "d", deleted: true)],
            cascaded: [RecordID(zone: "z", recordName: "c", recordType: "T")], replayed: false)]),
        Example([Self.save, RecordSave(recordType: "T", recordName: "n", fields: [:])]),
        Example([RecordDelete(recordName: "d", changeTag: "1"), RecordDelete(recordName: "e")]),
        Example([
            ModifyParams(family: "f", zone: "z", saves: [Self.save], deletes: [RecordDelete(recordName: "d", changeTag: "1")],
                         savePolicy: .changedKeys, atomic: true, requestId: "req-1", deviceClock: Date(timeIntervalSince1970: 1_790_000_000.25)),
            ModifyParams(family: "f", zone: "z"),
        ]),
        Example([FetchParams(family: "f", zone: "z", recordNames: ["a", "b"])]),
        // Push
        Example([Alert(title: "Over the limit", body: "Ana used \"games\" for 2h"), Alert(title: "t")]),
        Example([
            PushNotification(
                seq: 12, family: "fam", reason: .recordUpdated, subscriptionId: "s1", zone: "ChildMonitoring-c1", recordType: "AppRule",
                recordName: "rule-1", changeSeq: 99, alert: Alert(title: "Over the limit", body: "2h"),
                fields: ["bundleId": "org.x", "minutes": 5, "tags": ["a"]], collapseKey: "k", priority: .high, createdAt: Self.at,
                expiresAt: Self.at.addingTimeInterval(3600)),
            PushNotification(seq: 0, family: "fam", reason: .zoneChanged, createdAt: Self.at, expiresAt: Self.at),
            PushNotification(seq: 3, family: "f", reason: .message, alert: Alert(title: "t"), createdAt: Self.at, expiresAt: Self.at),
        ], decodes: { $0.seq != 0 }),
        // The built-ins
        Example([PingResult(service: "store", version: "0.9.1", uptimeSeconds: 12.25, pid: 42), PingResult(service: "push", version: "1", uptimeSeconds: 3, pid: 7)]),
        // The aggregator
        Example(Self.apps),
        Example(Self.rows),
        Example([
            Report(family: "f", child: "c1", deviceId: nil, from: "2026-11-21", to: "2026-11-22", by: .day, timeZone: "Europe/Paris",
                   rows: Self.rows, learningSeconds: 600, rewardSeconds: 1, points: 20, topApps: Self.apps),
            Report(family: "f", child: nil, deviceId: "d1", from: "2026-11-16", to: "2026-11-22", by: .week, timeZone: "UTC",
                   rows: [], learningSeconds: 0, rewardSeconds: 0, points: 0, topApps: []),
        ]),
    ]

    @Test("written by hand as encoded, decoded back, read back by hand", arguments: Self.examples)
    func sameAsCodable(_ example: Example) throws {
        try example.check()
    }

    @Test("a notification not numbered yet is written without seq (each device's number goes in front on the way out)")
    func unnumberedNotification() throws {
        var writer = JSONWriter()
        try PushNotification(seq: 0, family: "f", reason: .zoneChanged, createdAt: Self.at, expiresAt: Self.at).write(to: &writer)
        #expect(try JSONParser.parse(bytes: writer.bytes)["seq"] == nil)
    }

    @Test("every type with a hand-written form in Sources/ has an example here")
    func noTypeIsMissed() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        // A nested type (`extension DailySummary.AppUsage: …`) by its own name, as `String(describing:)` gives it.
        let conformance = /(?:extension|struct|enum|final class|class)\s+(?:\w+\.)*(\w+)\s*:[^{]*\bJSON(?:Writable|Readable)\b/
        var found = Set<String>()
        let files = try #require(FileManager.default.enumerator(atPath: sources.path))
        for case let file as String in files where file.hasSuffix(".swift") && !file.hasPrefix("WireJSON/") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for match in text.matches(of: conformance) { found.insert(String(match.1)) }
        }
        #expect(found.count >= Self.examples.count, "the scan found too few conformances: \(found.sorted())")
        // Types that write another type's JSON (not Codable themselves), each checked
        // against that type where it lives.
        let writingAnother: Set = [
            "FetchReply",  // a FetchResult from stored fields' text: StoreTests/StoredTextTests
        ]
        let missing = found.subtracting(Self.examples.map(\.typeName)).subtracting(writingAnother)
        #expect(missing.isEmpty, "no example for \(missing.sorted())")
    }
}
