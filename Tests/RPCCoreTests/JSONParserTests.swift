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
}
