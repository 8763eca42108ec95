import Foundation
import RPCCore
import StoreAPI

/// A record of a known type as the server has it (CloudKit's `CKRecord`): its typed
/// fields, where it lives, and the system fields the server sets.
public struct TypedRecord<Fields: RecordFields>: Sendable, Hashable {
    public var recordName: String
    public var zone: String
    public var fields: Fields
    /// The server's change tag; send the record back with it to save only if unchanged.
    public var changeTag: String?
    public var createdAt: Date?
    public var modifiedAt: Date?
    public var modifiedBy: String?

    /// A new record (no change tag): saving it with `ifServerRecordUnchanged` creates it.
    public init(_ fields: Fields, recordName: String, zone: String) {
        self.fields = fields
        self.recordName = recordName
        self.zone = zone
    }

    /// Reads a record the store returned.
    public init(_ record: Record) throws(RPCError) {
        guard record.recordType == Fields.recordType else {
            throw RPCError(.invalidParams, "record \(record.recordName) is a \(record.recordType), not a \(Fields.recordType)")
        }
        self.fields = try WireValues.decode(Fields.self, from: .object(record.fields), what: "record \(record.zone)/\(record.recordName)")
        self.recordName = record.recordName
        self.zone = record.zone
        self.changeTag = record.changeTag
        self.createdAt = record.createdAt
        self.modifiedAt = record.modifiedAt
        self.modifiedBy = record.modifiedBy
    }

    /// The save of this record: every field, with its change tag.
    public func save() throws(RPCError) -> RecordSave {
        RecordSave(recordType: Fields.recordType, recordName: self.recordName, fields: try Self.wireFields(self.fields), changeTag: self.changeTag)
    }

    /// Typed fields in their wire form (nil optionals left out).
    public static func wireFields(_ fields: Fields) throws(RPCError) -> [String: JSONValue] {
        guard case .object(let members) = try WireValues.encode(fields) else {
            throw RPCError(.invalidParams, "\(Fields.self) does not encode as an object of fields")
        }
        return members
    }
}

extension RecordReference {
    /// The wire form of a reference field.
    public var json: JSONValue { .reference(self.recordName, zone: self.zone) }
}
