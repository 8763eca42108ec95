import Foundation
import GRDB
@testable import RecordStore
import RPCCore
import StoreAPI
import Testing

/// Texts the store keeps and compares (a request's hash for idempotent retries, a record's
/// uniqueness keys, a query's cursor) were written by Foundation's encoder in earlier
/// versions; the store's own encoder must give the same bytes, or a retry over an upgrade
/// would be a conflict and a stored key would not match its record.
@Suite("What the store compares is written as earlier versions wrote it")
struct StoredTextTests {
    static let fields: [String: JSONValue] = [
        "bundleId": "org.khan/academy", "title": "Ana's \"maths\" é 😀\nnext", "minutes": 25, "ratio": 0.1, "big": 1e21,
        "tags": ["a/b", "c"], "nested": ["z": 1, "a": [true, nil]], "ref": .reference("fam-1", zone: "default"),
    ]

    static func foundationSorted<T: Encodable>(_ value: T, escapingSlashes: Bool = false) throws -> Data {
        let encoder = RPCJSON.makeEncoder()
        encoder.outputFormatting = escapingSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    @Test("a modify's request hash (a retry over an upgrade is still the same request)")
    func modifyHash() throws {
        let params = ModifyParams(
            family: "fam", zone: "ChildMonitoring-c1",
            saves: [RecordSave(recordType: "UsageRecord", recordName: "u/1", fields: Self.fields, changeTag: "3")],
            deletes: [RecordDelete(recordName: "old", changeTag: "1")], savePolicy: .changedKeys, atomic: true,
            requestId: "req-7", deviceClock: Date(timeIntervalSince1970: 1_795_003_200.5))
        var unclocked = params
        unclocked.deviceClock = nil
        #expect(try ModifyOperation.hash(params) == SHA256Hex.of(try Self.foundationSorted(unclocked)))
    }

    @Test("a uniqueness key", arguments: Array(fields.values) + [.array(Array(fields.values.prefix(3)))])
    func uniquenessKey(value: JSONValue) throws {
        #expect(try FieldsCoding.encodeValue(value) == String(decoding: try Self.foundationSorted(value), as: UTF8.self))
    }

    @Test("a query's cursor key (a cursor handed out before an upgrade still continues its query)")
    func queryKey() throws {
        let params = QueryParams(family: "fam", zone: "z/1", recordType: "UsageRecord",
                                 filters: [QueryFilter("bundleId", .equal, "org.khan/academy"), QueryFilter("minutes", .greater, 5)],
                                 sort: QuerySort("sessionStart", descending: true))
        #expect(try QueryOperation.fingerprint(params) == String(SHA256Hex.of(try Self.foundationSorted(params, escapingSlashes: true)).prefix(24)))
    }

    @Test("a fetch answered on the loop writes the stored fields' text as it is: the same result as the records parsed and written again")
    func fetchReplyWithStoredFields() throws {
        let text = try FieldsCoding.encode(Self.fields)
        let stored = try DatabaseQueue().read { db in
            try Row.fetchOne(db, sql: "SELECT 7, 'u/1', 'UsageRecord', ?, '3s', 12, 1795003200123, 'device:c1', 1795003260000, 'local', 0",
                             arguments: [text]).map { StoredRecord($0) }
        }
        let record = try #require(stored)
        var writer = JSONWriter()
        try FetchReply(zone: "ChildMonitoring-c1", records: [record, record], missing: ["gone"]).write(to: &writer)
        let expected = FetchResult(records: Array(repeating: try record.record(zone: "ChildMonitoring-c1"), count: 2), missing: ["gone"])
        #expect(try RPCJSON.decode(FetchResult.self, from: writer.bytes) == expected)
        #expect(String(decoding: writer.bytes, as: UTF8.self).contains(text))
    }
}
