import Foundation
@testable import RPCCore
import Testing

@Suite("Request and reply envelopes")
struct EnvelopeTests {
    func head(_ text: String) -> Result<RequestHead, RequestHead.Failure> {
        RequestHead.parse(Data(text.utf8))
    }

    @Test("a full request: integer id, method, auth")
    func fullRequest() throws {
        let head = try self.head(#"{"id": 7, "method": "store.modify", "params": {"a": 1}, "auth": {"token": "t"}}"#).get()
        #expect(head == RequestHead(id: .int(7), method: "store.modify", auth: Auth(token: "t")))
    }

    @Test("a string id, and no id for one-way")
    func ids() throws {
        #expect(try self.head(#"{"id": "x", "method": "m"}"#).get().id == .string("x"))
        #expect(try self.head(#"{"method": "m"}"#).get().id == nil)
    }

    @Test("malformed heads name what is wrong", arguments: [
        (#""#, "invalid_frame"),
        (#"{"#, "invalid_json"),
        (#"42"#, "invalid_request"),
        (#"[]"#, "invalid_request"),
        (#"{"id": 1}"#, "invalid_request"),
        (#"{"id": true, "method": "m"}"#, "invalid_request"),
        (#"{"id": 1.5, "method": "m"}"#, "invalid_request"),
        (#"{"id": 1, "method": ""}"#, "invalid_request"),
        (#"{"id": 1, "method": "m", "params": "x"}"#, "invalid_request"),
        (#"{"id": 1, "method": "m", "auth": "x"}"#, "invalid_request"),
    ])
    func malformed(text: String, code: String) {
        guard case .failure(let failure) = self.head(text) else {
            Issue.record("\(text) was accepted")
            return
        }
        #expect(failure.error.code.rawValue == code)
    }

    @Test("the id is kept for the error reply when only another field is wrong")
    func idKept() {
        guard case .failure(let failure) = self.head(#"{"id": 3, "method": 9}"#) else { Issue.record("accepted"); return }
        #expect(failure.id == .int(3))
        #expect(failure.error.message == "\"method\" must be a string")
    }

    @Test("invalid UTF-8 is reported as such")
    func invalidUTF8() {
        guard case .failure(let failure) = RequestHead.parse(Data([0x7b, 0xff, 0x7d])) else { Issue.record("accepted"); return }
        #expect(failure.error.code == .invalidJSON)
        #expect(failure.error.message.contains("UTF-8"))
    }

    struct Params: Codable, Sendable { var name: String; var items: [Int]?; var nested: Nested? }
    struct Nested: Codable, Sendable { var flag: Bool }

    @Test("params decode with paths in errors")
    func paramsErrors() throws {
        func decode(_ text: String) -> RPCError? {
            do { _ = try ParamsDecoding.decode(Params.self, from: Data(text.utf8)); return nil } catch { return error }
        }
        #expect(decode(#"{"params": {"name": "n"}}"#) == nil)
        #expect(decode(#"{}"#)?.message == "params.name is required")
        #expect(decode(#"{"params": null}"#)?.message == "params.name is required")
        #expect(decode(#"{"params": {"name": 1}}"#)?.message == "params.name must be a string")
        #expect(decode(#"{"params": {"name": "n", "items": [1, "x"]}}"#)?.message == "params.items[1] must be an integer")
        #expect(decode(#"{"params": {"name": "n", "nested": {"flag": "yes"}}}"#)?.message == "params.nested.flag must be a boolean")
        #expect(decode(#"{"params": {"name": "n", "nested": 4}}"#)?.data?["parameter"] == "params.nested")
    }

    @Test("replies: result, stream item, error with a null id")
    func replies() throws {
        let result = try JSONDecoder().decode(JSONValue.self, from: ReplyEncoding.result(id: .int(1), Empty()))
        #expect(result == ["id": 1, "result": [:]])
        let item = try JSONSerialization.jsonObject(with: ReplyEncoding.result(id: .string("s"), Empty(), continues: true)) as? [String: Any]
        #expect(item?["continues"] as? Bool == true)
        let error = try JSONSerialization.jsonObject(with: ReplyEncoding.error(id: nil, RPCError(.invalidJSON, "bad"))) as? [String: Any]
        #expect(error?["id"] is NSNull)
        #expect((error?["error"] as? [String: Any])?["code"] as? String == "invalid_json")
    }

    @Test("a reply's id and continues read straight from the bytes are what the parser reads", arguments: [
        (#"{"id":7,"result":{"a":1},"continues":true}"#, RequestID.int(7) as RequestID?, true as Bool?),
        (#"{"id":-12,"result":null,"continues":false}"#, .int(-12), false),
        (#"{"id":0,"result":[]}"#, .int(0), nil),
        (#"{"id":9223372036854775807,"result":1}"#, .int(Int64.max), nil),
        (#"{"id":"listen-1","result":1, "continues" : true }"#, .string("listen-1"), true),
        (#"{"id":null,"error":{"code":"invalid_json","message":"m"}}"#, nil, nil),
    ])
    func replyHeadFastPaths(text: String, id: RequestID?, continues: Bool?) throws {
        let head = try ReplyHead.parse(bytes: Array(text.utf8))
        #expect(head.id == id)
        #expect(head.continues == continues)
        #expect(try ReplyHead.parse(Data(text.utf8)).id == id)
    }

    @Test("an id that is not a plain integer goes to the parser: a fraction, an exponent, a leading zero, minus zero", arguments: [
        #"{"id":1.5,"result":1}"#, #"{"id":1e3,"result":1}"#, #"{"id":007,"result":1}"#, #"{"id":-0,"result":1}"#, #"{"id":12a,"result":1}"#,
    ])
    func replyHeadOddIDs(text: String) {
        // The id's text alone: between `{"id":` and `,"result"`.
        let bytes = Array(text.utf8)
        let end = bytes.count - #","result":1}"#.utf8.count
        #expect(String(decoding: bytes[6..<end], as: UTF8.self) + #","result":1}"# == String(text.dropFirst(6)))
        #expect(ReplyHead.integer(ArraySlice(bytes[6..<end])) == nil)
    }

    @Test("a plain integer id is read straight from its bytes, not left to the parser")
    func replyHeadIntegerIDs() {
        for (text, value) in [("0", Int64(0)), ("7", 7), ("-12", -12), ("999999999999999999", 999_999_999_999_999_999)] {
            #expect(ReplyHead.integer(ArraySlice(Array(text.utf8))) == value, "\(text)")
        }
        #expect(ReplyHead.integer(ArraySlice(Array("9223372036854775807".utf8))) == nil, "19 digits go to the parser")
    }
}
