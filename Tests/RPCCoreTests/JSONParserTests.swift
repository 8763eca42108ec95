import Foundation
import RPCCore
import Testing

@Suite("The fast JSON parser for stored fields")
struct JSONParserTests {
    @Test("it reads what JSONEncoder writes, escapes and all")
    func roundTrip() throws {
        let value: JSONValue = [
            "text": "a \"quoted\" line\nwith \\ slashes / and tabs\t, é, 😀 and \u{1}",
            "int": 9_007_199_254_740_993, "negative": -42, "double": 2.5, "exp": 1e-7,
            "flags": [true, false, nil], "nested": ["empty": [:], "list": []],
        ]
        let text = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        #expect(try JSONParser.parse(text) == value)
        #expect(try JSONParser.parse(" {\"a\" : [ 1 , 2 ] } ") == ["a": [1, 2]])
        #expect(try JSONParser.parse("\"\\ud83d\\ude00\"") == "😀")
    }

    @Test("it refuses what is not JSON", arguments: ["", "{", "{\"a\":}", "[1,]", "tru", "\"open", "1 2", "{\"a\" 1}", "\"\u{1}\"", "--1", "\"\\x\"",
        "+1", "01", "1.", ".5", "1e", "-", "1e+", "NaN", "Infinity", "1e400", "-1e400"])
    func refuses(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(text) }
    }

    @Test("members leaves each value as its bytes, exactly as written")
    func membersAsBytes() throws {
        let text = #"{"id":7, "result" : {"a":[1,2.5e3,"x\"y\u00e9"],"b":{"c":null}} ,"continues":true}"#
        let bytes = Array(text.utf8)
        let members = try JSONParser.members(bytes: bytes)
        #expect(members.map(\.key) == ["id", "result", "continues"])
        let values = members.map { String(decoding: bytes[$0.value], as: UTF8.self) }
        #expect(values == ["7", #"{"a":[1,2.5e3,"x\"y\u00e9"],"b":{"c":null}}"#, "true"])
        #expect(try JSONParser.members(bytes: Array("{}".utf8)).isEmpty)
    }

    @Test("members checks the values it does not build", arguments: ["", "[1]", "{\"a\":}", "{\"a\":[1,]}", "{\"a\":tru}", "{\"a\":\"open}",
        "{\"a\":1} 2", "{\"a\":{\"b\" 1}}", "{\"a\":\"\u{1}\"}", "{\"a\":\"\\x\"}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":\"\\u12\"}", "{\"a\":1,}"])
    func membersRefuses(_ text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.members(bytes: Array(text.utf8)) }
    }

    @Test("members refuses nesting past the parser's depth")
    func membersDepth() {
        let deep = "{\"a\":" + String(repeating: "[", count: JSONParser.maximumDepth + 1) + String(repeating: "]", count: JSONParser.maximumDepth + 1) + "}"
        #expect(throws: JSONParser.Failure.self) { try JSONParser.members(bytes: Array(deep.utf8)) }
        let fine = "{\"a\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}"
        #expect((try? JSONParser.members(bytes: Array(fine.utf8)))?.count == 1)
    }
}
