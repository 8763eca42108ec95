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
            }
        }
        #expect(try self.texts(bare).written["seq"] == nil)
    }
}
