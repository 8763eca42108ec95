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
        "+1", "01", "1.", ".5", "1e", "-", "1e+", "NaN", "Infinity", "1e400", "-1e400", #""\u+041""#, #""\u-000""#, #""\u 041""#, #""\u04g1""#])
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

@Suite("Values inside a larger text, left as their bytes")
struct ValuesInPlaceTests {
    @Test("members(in:), elements(in:) and parse(in:) read a value where it is, ranges counted in the whole text")
    func inPlace() throws {
        let bytes = Array(#"xx{"a":[1, "x" ,{"b":null}],"c":"d","a":[]}yy"#.utf8)
        let object = 2..<(bytes.count - 2)
        let members = try JSONParser.members(bytes: bytes, in: object)
        #expect(members.map(\.key) == ["a", "c", "a"])
        let elements = try JSONParser.elements(bytes: bytes, in: members[0].value)
        #expect(elements.map { String(decoding: bytes[$0], as: UTF8.self) } == ["1", #""x""#, #"{"b":null}"#])
        #expect(try JSONParser.parse(bytes: bytes, in: elements[2]) == ["b": nil])
        #expect(try JSONParser.elements(bytes: bytes, in: members[2].value).isEmpty)
        #expect(try JSONParser.parse(bytes: bytes, in: object) == ["a": [], "c": "d"])
        // The range's end is the text's end: what follows it is not read.
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes: bytes, in: 2..<10) }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.elements(bytes: bytes, in: members[1].value) }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.members(bytes: bytes, in: members[0].value) }
    }

    @Test("what parse(bytes:) refuses, members refuses, in a value nobody builds", arguments: [
        #"{"id":1,"extra":"\ud800"}"#, #"{"id":1,"extra":"\udc00"}"#, #"{"id":1,"extra":"\ud800\u0041"}"#, #"{"id":1,"extra":"\ud800x"}"#,
        #"{"id":1,"extra":1e400}"#, #"{"id":1,"extra":[-1e400]}"#, #"{"id":1,"extra":1"# + String(repeating: "0", count: 400) + "}",
        #"{"id":1} x"#, #"{"id":1 "method":"m"}"#, #"{"id":"#, #"["#,
    ])
    func refused(text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(text) }
        #expect(throws: JSONParser.Failure.self) { try JSONParser.members(bytes: Array(text.utf8)) }
    }

    @Test("what parse(bytes:) accepts, members accepts", arguments: [
        #"{"a":"\ud83d\ude00"}"#, #"{"a":12345678901234567890123}"#, #"{"a":-9223372036854775808}"#, #"{"a":1.5e300}"#, #"{"a":-0}"#,
        #"{"a":"\u00e9\n"}"#, #"{"a":[{"b":[true,false,null]}]}"#,
    ])
    func accepted(text: String) throws {
        let value = try JSONParser.parse(text)
        let bytes = Array(text.utf8)
        let members = try JSONParser.members(bytes: bytes)
        #expect(try JSONParser.parse(bytes: bytes, in: members[0].value) == value.objectValue?["a"])
    }
}

@Suite("A request's envelope, its params left as their bytes")
struct RequestEnvelopeTests {
    @Test("the head and the params' place, with a key given twice counted as the last")
    func headAndParams() throws {
        let bytes = Array(#" {"id":7,"method":"m","params":{"a":[1,"x"]},"auth":{"token":"t"},"id":"again"} "#.utf8)
        let (head, params) = try RequestHead.parseRequestLeavingParams(bytes: bytes).get()
        #expect(head == RequestHead(id: .string("again"), method: "m", auth: Auth(token: "t")))
        let range = try #require(params?.range)
        #expect(String(decoding: bytes[range], as: UTF8.self) == #"{"a":[1,"x"]}"#)
        #expect(params?.value == ["a": [1, "x"]])
        #expect(try RequestHead.parseRequestLeavingParams(bytes: Array(#"{"method":"m","params":null}"#.utf8)).get().params == nil)
        // The gateway's note of where a request came from, as written and as read.
        let relayed = try ReplyEncoding.request(id: .int(1), method: "m", params: ["a": 1] as JSONValue, auth: nil, from: "2001:db8:1:2::/64")
        #expect(try RequestHead.parseRequestLeavingParams(bytes: Array(relayed)).get().head.from == "2001:db8:1:2::/64")
    }

    @Test("each bad envelope refused with its code, and its id when that was readable", arguments: [
        (#"[1,2]"#, "invalid_request", nil), (#""text""#, "invalid_request", nil), ("3", "invalid_request", nil), ("null", "invalid_request", nil),
        ("{", "invalid_json", nil), ("", "invalid_frame", nil), (#"{"id":1,"method":"m","extra":"\ud800"}"#, "invalid_json", nil),
        (#"{"id":1,"params":{"x":1e400},"method":"m"}"#, "invalid_json", nil), (#"{"id":1.5,"method":"m"}"#, "invalid_request", nil),
        (#"{"id":null,"method":"m"}"#, "invalid_request", nil), (#"{"id":2,"method":"m","params":[1]}"#, "invalid_request", RequestID.int(2)),
        (#"{"id":"a","method":""}"#, "invalid_request", RequestID.string("a")), (#"{"id":3,"method":"m","auth":{"token":1}}"#, "invalid_request", RequestID.int(3)),
        (#"{"id":4,"method":"m","from":7}"#, "invalid_request", RequestID.int(4)), (#"{"id":5,"method":"m","from":""}"#, "invalid_request", RequestID.int(5)),
        ("{\"id\":6,\"method\":\"m\",\"from\":\"" + String(repeating: "a", count: 65) + "\"}", "invalid_request", RequestID.int(6)),
    ] as [(String, String, RequestID?)])
    func errors(text: String, code: String, id: RequestID?) {
        guard case .failure(let failure) = RequestHead.parseRequestLeavingParams(bytes: Array(text.utf8)) else {
            Issue.record("accepted: \(text)")
            return
        }
        #expect(failure.error.code.rawValue == code)
        #expect(failure.id == id)
    }

    @Test("ids the fast path leaves to the parser: -0, nineteen digits, an exponent, past 64 bits")
    func unusualIDs() throws {
        func id(_ text: String) -> Result<RequestID?, RequestHead.Failure> {
            RequestHead.parseRequestLeavingParams(bytes: Array(#"{"id":\#(text),"method":"m"}"#.utf8)).map(\.head.id)
        }
        #expect(try id("-0").get() == .int(0))
        #expect(try id(" 42 ").get() == .int(42))
        #expect(try id("1234567890123456789").get() == .int(1_234_567_890_123_456_789))
        #expect(try id("-9223372036854775808").get() == .int(Int64.min))
        for refused in ["1e2", "9223372036854775808", "1.0"] {
            guard case .failure(let failure) = id(refused) else {
                Issue.record("\(refused) accepted as an id")
                continue
            }
            #expect(failure.error.code == .invalidRequest, "\(refused)")
        }
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
