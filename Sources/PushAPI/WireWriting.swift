import Foundation
import RPCCore

// A notification is written once per device it goes to: by hand (see `JSONWritable`),
// exactly as its `encode(to:)` says; PushTests checks the two agree.

extension Alert: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("title", self.title)
        writer.member("body", self.body)
        writer.endObject()
    }
}

extension PushNotification: JSONWritable {
    public func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        if self.seq != 0 { writer.member("seq", self.seq) }
        writer.member("family", self.family)
        writer.member("reason", self.reason.rawValue)
        writer.member("subscriptionId", self.subscriptionId)
        writer.member("zone", self.zone)
        writer.member("recordType", self.recordType)
        writer.member("recordName", self.recordName)
        writer.member("changeSeq", self.changeSeq)
        if let alert = self.alert {
            writer.member("alert")
            try alert.write(to: &writer)
        }
        if let fields = self.fields {
            writer.member("fields")
            try writer.value(.object(fields))
        }
        writer.member("collapseKey", self.collapseKey)
        writer.member("priority", self.priority.rawValue)
        writer.member("createdAt", self.createdAt)
        writer.member("expiresAt", self.expiresAt)
        writer.endObject()
    }
}

// And read back by hand (see `JSONReadable`): a device's listener reads every notification.

extension Alert: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(title: try object.string("title"), body: try object.stringIfPresent("body"))
    }
}

extension PushNotification: JSONReadable {
    public init(reading object: JSONObjectReader) throws {
        self.init(
            seq: try object.int64("seq"), family: try object.string("family"), reason: try object.enumeration("reason", as: NotificationReason.self),
            subscriptionId: try object.stringIfPresent("subscriptionId"), zone: try object.stringIfPresent("zone"),
            recordType: try object.stringIfPresent("recordType"), recordName: try object.stringIfPresent("recordName"),
            changeSeq: try object.int64IfPresent("changeSeq"), alert: try object.readIfPresent("alert", as: Alert.self),
            fields: try object.objectIfPresent("fields"), collapseKey: try object.stringIfPresent("collapseKey"),
            priority: try object.enumeration("priority", as: PushPriority.self),
            createdAt: try object.date("createdAt"), expiresAt: try object.date("expiresAt"))
    }
}
