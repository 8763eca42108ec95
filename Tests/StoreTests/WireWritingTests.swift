import Foundation
import RPCCore
import StoreAPI
import Testing

/// The store's replies written by hand must say exactly what `JSONEncoder` would.
@Suite("Records on the wire without JSONEncoder")
struct WireWritingTests {
    static let record = Record(
        recordType: "AppRule", recordName: "rule-org.khan\"academy", zone: "default",
        fields: ["familyRef": .reference("fam-1", zone: "default"), "pointsPerMinute": 2, "ratio": 0.25,
                 "tags": ["a", "b/c"], "note": "line\nnext", "missing": nil],
        changeTag: "2s", createdAt: Date(timeIntervalSince1970: 1_795_003_200.123), modifiedAt: Date(timeIntervalSince1970: 1_795_003_260),
        createdBy: "device:p1", modifiedBy: "local")

    /// Both texts as parsed values, and the written text decoded back to the type (and
    /// read back by hand, for the types that read themselves).
    func check<T: Codable & Equatable & JSONWritable>(_ value: T) throws {
        var writer = JSONWriter()
        try value.write(to: &writer)
        let encoded = try RPCJSON.makeEncoder().encode(value)
        #expect(try JSONParser.parse(bytes: writer.bytes) == JSONParser.parse(bytes: Array(encoded)))
        #expect(try RPCJSON.makeDecoder().decode(T.self, from: Data(writer.bytes)) == value)
        if let readable = T.self as? any JSONReadable.Type {
            #expect(readable.read(try JSONParser.parse(bytes: writer.bytes)) as? T == value, "read by hand")
        }
    }

    @Test("a record, a fetch, a query, a page of zone changes")
    func results() throws {
        try self.check(Self.record)
        try self.check(FetchResult(records: [Self.record, Self.record], missing: ["gone", "also gone"]))
        try self.check(FetchResult(records: [], missing: []))
        try self.check(QueryResult(records: [Self.record], cursor: "c1"))
        try self.check(QueryResult(records: [], cursor: nil))
        try self.check(ZoneChangesResult(
            records: [Self.record], deletions: [RecordID(zone: "z", recordName: "r", recordType: "T"), RecordID(zone: "z", recordName: "s")],
            token: "t", moreComing: true))
    }

    @Test("a modify's request and its result, failures included")
    func modify() throws {
        let save = RecordSave(recordType: "AppRule", recordName: "r", fields: Self.record.fields, changeTag: "2s")
        try self.check(ModifyParams(family: "f", zone: "z", saves: [save, RecordSave(recordType: "T", recordName: "n", fields: [:])],
                                    deletes: [RecordDelete(recordName: "d", changeTag: "1"), RecordDelete(recordName: "e")],
                                    savePolicy: .changedKeys, atomic: true, requestId: "req-1"))
        try self.check(ModifyParams(family: "f", zone: "z"))
        try self.check(FetchParams(family: "f", zone: "z", recordNames: ["a", "b"]))
        try self.check(ModifyResult(
            saved: [SaveOutcome(recordName: "r", record: Self.record),
                    SaveOutcome(recordName: "s", error: ItemError(code: .conflict, message: "changed", field: "x", serverRecord: Self.record))],
            deleted: [DeleteOutcome(recordName: "d", deleted: true), DeleteOutcome(recordName: "e", error: ItemError(code: .notFound, message: "gone"))],
            cascaded: [RecordID(zone: "z", recordName: "c", recordType: "T")], replayed: false))
    }

    @Test("change events, with and without their optional parts")
    func changeEvents() throws {
        let at = Date(timeIntervalSince1970: 1_795_003_200.5)
        try self.check(ChangeEvent(seq: 7, family: "f", zone: "z", kind: .recordSaved, recordType: "AppRule", recordName: "r",
                                   changeTag: "7", record: Self.record, at: at, created: true))
        try self.check(ChangeEvent(seq: 8, family: "f", zone: "z", kind: .recordDeleted, recordType: "AppRule", recordName: "r",
                                   changeTag: nil, record: nil, at: at, created: nil, deletedFields: ["bundleId": "org.x"]))
        try self.check(ChangeEvent(seq: 9, family: "f", zone: "z", kind: .zoneCreated, recordType: nil, recordName: nil,
                                   changeTag: nil, record: nil, at: at))
    }

    @Test("a reply around a written result is the same as around an encoded one")
    func replies() throws {
        let result = FetchResult(records: [Self.record], missing: ["x"])
        let written = try ReplyEncoding.result(id: .string("id-1"), result, continues: true)
        let reply = try ReplyHead.parse(written)
        #expect(reply.id == .string("id-1"))
        #expect(reply.continues == true)
        #expect(try ResultDecoding.decode(FetchResult.self, from: reply) == result)

        let params = FetchParams(family: "f", zone: "z", recordNames: ["a"])
        let request = try ReplyEncoding.request(id: .int(3), method: "store.fetch", params: params, auth: Auth(token: "t"))
        let (head, raw) = try RequestHead.parseRequest(request).get()
        #expect(head == RequestHead(id: .int(3), method: "store.fetch", auth: Auth(token: "t")))
        #expect(try ParamsDecoding.decode(FetchParams.self, params: raw) == params)
    }
}
