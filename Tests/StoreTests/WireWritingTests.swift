import Foundation
import RPCCore
import StoreAPI
import Testing

/// Replies around hand-written results (the results themselves: ContractTests).
@Suite("Records on the wire without JSONEncoder")
struct WireWritingTests {
    static let record = Record(
        recordType: "AppRule", recordName: "r", zone: "default", fields: ["note": "line\nnext"],
        changeTag: "2s", createdAt: Date(timeIntervalSince1970: 1_795_003_200.123), modifiedAt: Date(timeIntervalSince1970: 1_795_003_260),
        createdBy: "device:p1", modifiedBy: "local")

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

    func params<P: Decodable>(_ type: P.Type, _ text: String) throws -> P {
        let request = Array(#"{"id":1,"method":"m","params":"#.utf8) + Array(text.utf8) + Array("}".utf8)
        let (_, params) = try RequestHead.parseRequestLeavingParams(bytes: request).get()
        return try ParamsDecoding.decode(P.self, params: params)
    }

    @Test("params read from the request's bytes by the hand reader itself: escapes, a key given twice (the last), keys nobody reads, nested saves")
    func paramsFromBytes() throws {
        // The hand reader, not the Decodable fallback, must take these.
        let text = Array(#"{"family":"f","zone":"z\u00e9","recordNames":["a"],"extra":[{"x":1}],"family":"g"}"#.utf8)
        #expect(FetchParams.read(bytes: text, range: 0..<text.count) == FetchParams(family: "g", zone: "zé", recordNames: ["a"]))
        let saves = Array(#"{"family":"f","zone":"z","saves":[{"recordType":"T","recordName":"r","fields":{"n":2}}],"deletes":null}"#.utf8)
        #expect(ModifyParams.read(bytes: saves, range: 0..<saves.count) == ModifyParams(family: "f", zone: "z", saves: [RecordSave(recordType: "T", recordName: "r", fields: ["n": 2])]))
        #expect(try self.params(FetchParams.self, #"{"family":"f","zone":"z\u00e9\n","recordNames":["a","b\"c"],"extra":{"x":[1]},"family":"g"}"#)
            == FetchParams(family: "g", zone: "zé\n", recordNames: ["a", "b\"c"]))
        let modify = try self.params(ModifyParams.self, #"{"family":"f","zone":"z","saves":[{"recordType":"T","recordName":"r","fields":{"n":2,"t":"x"}}],"deletes":null}"#)
        #expect(modify == ModifyParams(family: "f", zone: "z", saves: [RecordSave(recordType: "T", recordName: "r", fields: ["n": 2, "t": "x"])]))
    }

    @Test("params of another shape than the hand reader's go through Decodable, which names what is wrong", arguments: [
        (#"{"family":"f","zone":"z","recordNames":["a",2]}"#, "params.recordNames[1] must be a string"),
        (#"{"family":"f","zone":"z"}"#, "params.recordNames is required"),
        (#"{"family":5,"zone":"z","recordNames":[]}"#, "params.family must be a string"),
    ])
    func paramsOfAnotherShape(text: String, message: String) {
        #expect {
            _ = try self.params(FetchParams.self, text)
        } throws: { error in
            (error as? RPCError)?.code == .invalidParams && (error as? RPCError)?.message.contains(message) == true
        }
    }
}
