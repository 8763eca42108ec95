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
