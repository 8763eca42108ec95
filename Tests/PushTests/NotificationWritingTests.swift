import Foundation
import PushAPI
import RPCCore
import Testing

/// How the hand reader of notifications falls back (written forms: ContractTests).
@Suite("Notifications on the wire without JSONEncoder")
struct NotificationWritingTests {
    func texts(_ notification: PushNotification) throws -> (written: JSONValue, encoded: JSONValue) {
        var writer = JSONWriter()
        try notification.write(to: &writer)
        return (try JSONParser.parse(bytes: writer.bytes), try JSONParser.parse(bytes: Array(try RPCJSON.makeEncoder().encode(notification))))
    }

    @Test("what the hand reader cannot read goes through Decodable: a number where a string belongs is its error, an integral double its value")
    func readerFallsBack() throws {
        let at = Date(timeIntervalSince1970: 1_795_000_000)
        var members = try #require(try self.texts(PushNotification(seq: 4, family: "f", reason: .recordCreated, createdAt: at, expiresAt: at)).written.objectValue)
        members["seq"] = .double(4)
        let reply = { (result: JSONValue) in try ReplyHead.parse(RPCJSON.makeEncoder().encode(JSONValue.object(["id": 1, "result": result]))) }
        #expect(PushNotification.read(.object(members)) == nil)
        #expect(try ResultDecoding.decode(PushNotification.self, from: reply(.object(members))).seq == 4)
        members["family"] = 5
        #expect(throws: DecodingError.self) { try ResultDecoding.decode(PushNotification.self, from: reply(.object(members))) }
    }
}
