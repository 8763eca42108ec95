import Foundation
import PushAPI
import RPCCore
import Testing

/// A notification written by hand must say what its `encode(to:)` says.
@Suite("Notifications on the wire without JSONEncoder")
struct NotificationWritingTests {
    func texts(_ notification: PushNotification) throws -> (written: JSONValue, encoded: JSONValue) {
        var writer = JSONWriter()
        try notification.write(to: &writer)
        return (try JSONParser.parse(bytes: writer.bytes), try JSONParser.parse(bytes: Array(try RPCJSON.makeEncoder().encode(notification))))
    }

    @Test("numbered or not, silent or alert, with fields or without")
    func sameAsEncoder() throws {
        let at = Date(timeIntervalSince1970: 1_795_000_000.25)
        let full = PushNotification(
            seq: 12, family: "fam", reason: .recordUpdated, subscriptionId: "s1", zone: "ChildMonitoring-c1", recordType: "AppRule",
            recordName: "rule-1", changeSeq: 99, alert: Alert(title: "Over the limit", body: "Ana used \"games\" for 2h"),
            fields: ["bundleId": "org.x", "minutes": 5, "tags": ["a"]], collapseKey: "k", priority: .high, createdAt: at,
            expiresAt: at.addingTimeInterval(3600))
        let bare = PushNotification(seq: 0, family: "fam", reason: .zoneChanged, createdAt: at, expiresAt: at)
        for notification in [full, bare, PushNotification(seq: 3, family: "f", reason: .message, alert: Alert(title: "t"), createdAt: at, expiresAt: at)] {
            let (written, encoded) = try self.texts(notification)
            #expect(written == encoded)
            if notification.seq != 0 {  // an unnumbered one is only ever sent numbered
                #expect(try JSONValueDecoding.decode(PushNotification.self, from: written) == notification)
                #expect(PushNotification.read(written) == notification, "read by hand")
            }
        }
        #expect(try self.texts(bare).written["seq"] == nil)
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
