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
}
