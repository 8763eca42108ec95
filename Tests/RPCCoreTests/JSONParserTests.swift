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

@Suite("An object's members handed over one by one")
struct ObjectMembersTests {
    func members(_ text: String) throws -> (isObject: Bool, members: [String]) {
        var members: [String] = []
        let isObject = try JSONParser.parse(bytes: Array(text.utf8)) { key, value in members.append("\(key)=\(value)") }
        return (isObject, members)
    }

    @Test("each member in order, a key given twice twice, with the values parse(bytes:) gives")
    func inOrder() throws {
        let text = #"{"id":7,"method":"m","params":{"a":[1,"x"]},"id":"again"}"#
        let (isObject, members) = try self.members(text)
        #expect(isObject)
        guard case .object(let parsed) = try JSONParser.parse(text) else { Issue.record("not an object"); return }
        #expect(members == ["id=\(JSONValue.int(7))", "method=\(JSONValue.string("m"))", "params=\(parsed["params"]!)", "id=\(JSONValue.string("again"))"])
        #expect(try self.members(" { } ") == (true, []))
    }

    @Test("another value is checked and not an object; what parse(bytes:) refuses, this refuses", arguments: [
        #"[1,2]"#, #""text""#, "3", "null",
    ])
    func notAnObject(text: String) throws {
        #expect(try self.members(text) == (false, []))
    }

    @Test("refused as parse(bytes:) refuses it: a lone surrogate in a member nobody wants, trailing text, a missing comma", arguments: [
        #"{"id":1,"extra":"\ud800"}"#, #"{"id":1} x"#, #"{"id":1 "method":"m"}"#, #"{"id":"#, #"["#,
    ])
    func refused(text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(text) }
        #expect(throws: JSONParser.Failure.self) { try self.members(text) }
    }
}

@Suite("UTF-8 checked before parsing")
struct UTF8ValidationTests {
    @Test("ASCII of every length around the eight-byte steps, and UTF-8 of every width, are valid; the same with a bad byte anywhere are not")
    func validAndInvalid() {
        for length in 0...20 {
            let ascii = Array(String(repeating: "a", count: length).utf8)
            #expect(UTF8Validation.isValid(ascii))
            for position in 0..<length {
                var bad = ascii
                bad[position] = 0xFF
                #expect(!UTF8Validation.isValid(bad), "0xFF at \(position) of \(length)")
                var cut = ascii
                cut[position] = 0xC3  // a two-byte sequence's start, without its continuation (or with 'a' after it)
                #expect(!UTF8Validation.isValid(cut), "a lone lead byte at \(position) of \(length)")
            }
        }
        for text in ["é", "Ana's \"maths\" é 😀", "日本語のテキスト、八バイトを超える", "\u{7F}\u{80}"] {
            #expect(UTF8Validation.isValid(Array(text.utf8)), "\(text)")
            #expect(!UTF8Validation.isValid(Array(text.utf8.dropLast())) || text.utf8.last! < 0x80, "\(text) cut short")
        }
        #expect(!UTF8Validation.isValid([0xED, 0xA0, 0x80]))  // a surrogate, not UTF-8
    }
}
