import Foundation
import RPCCore
import Testing

@Suite("Schemas derived from Codable types")
struct SchemaTests {
    enum Role: String, StringEnum { case admin, coParent = "co_parent" }
    struct Inner: Codable { var when: Date; var tags: [String] }
    struct Outer: Codable {
        var id: String
        var count: Int64?
        var ratio: Double
        var role: Role
        var inner: Inner
        var list: [Inner]?
        var map: [String: Int]
        var any: JSONValue?
    }

    @Test("objects, optionality, enums, arrays, maps, dates")
    func recordsShape() throws {
        let schema = SchemaRecorder.schema(for: Outer.self)
        #expect(schema.type == "object")
        #expect(Set(schema.required ?? []) == ["id", "ratio", "role", "inner", "map"])
        let properties = try #require(schema.properties)
        #expect(properties["id"]?.type == "string")
        #expect(properties["count"]?.type == "integer")
        #expect(properties["ratio"]?.type == "number")
        #expect(properties["role"]?.enum == ["admin", "co_parent"])
        #expect(properties["inner"]?.properties?["when"]?.format == "date-time")
        #expect(properties["inner"]?.properties?["tags"]?.items?.type == "string")
        #expect(properties["list"]?.items?.properties?["when"] != nil)
        #expect(properties["map"]?.additionalProperties?.type == "integer")
        #expect(properties["any"]?.type == nil)
    }

    @Test("a string enum refuses other values, listing the allowed ones")
    func enumErrors() {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Role].self, from: Data(#"["boss"]"#.utf8)) }
        do {
            _ = try ParamsDecoding.decode(Outer.self, from: Data(#"{"params": {"id": "i", "ratio": 1, "role": "boss", "inner": {"when": "2026-11-22T08:00:00Z", "tags": []}, "map": {}}}"#.utf8))
            Issue.record("accepted")
        } catch {
            #expect(error.message == #"params.role must be one of "admin", "co_parent", not "boss""#)
        }
    }

    @Test("dates travel as RFC 3339 with milliseconds, and decode without them too")
    func dates() throws {
        let date = Date(timeIntervalSince1970: 1_795_000_000.25)
        let text = String(decoding: try RPCJSON.makeEncoder().encode([date]), as: UTF8.self)
        #expect(text == #"["2026-11-18T11:06:40.250Z"]"#)
        #expect(try RPCJSON.makeDecoder().decode([Date].self, from: Data(#"["2026-11-18T11:06:40Z"]"#.utf8)) == [Date(timeIntervalSince1970: 1_795_000_000)])
    }
}
