import Foundation
import RPCCore

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
        self.fields = try Self.fields(from: record.fields, what: "record \(record.zone)/\(record.recordName)")
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
        let value: JSONValue
        do {
            value = try JSONValue(encoding: fields)
        } catch {
            throw RPCError(.invalidParams, "\(Fields.self) could not be encoded: \(error)")
        }
        guard case .object(let members) = value else {
            throw RPCError(.invalidParams, "\(Fields.self) does not encode as an object of fields")
        }
        return members
    }

    /// Wire fields read as `Fields`: `what` names the record in the error.
    public static func fields(from fields: [String: JSONValue], what: @autoclosure () -> String) throws(RPCError) -> Fields {
        do {
            return try JSONValueDecoding.decode(Fields.self, from: .object(fields))
        } catch {
            throw RPCError(.invalidJSON, "\(what()) is not a \(Fields.recordType): \(error)")
        }
    }
}

extension Record {
    /// The record's fields as `F`, or nil when it is another type or its fields do not read
    /// as `F` (a deleted record's last fields, say).
    public func fields<F: RecordFields>(as type: F.Type) -> F? {
        guard self.recordType == F.recordType else { return nil }
        return try? JSONValueDecoding.decode(F.self, from: .object(self.fields))
    }
}

extension RecordSave {
    /// The save of a whole record of a typed record type.
    public static func record<F: RecordFields>(_ fields: F, named recordName: String, changeTag: String? = nil) throws(RPCError) -> RecordSave {
        RecordSave(recordType: F.recordType, recordName: recordName, fields: try TypedRecord<F>.wireFields(fields), changeTag: changeTag)
    }

    /// The save of some fields of a record, named by the type's own field names: what a
    /// `changedKeys` save sends (`.changes(MonitoringSession.self, named: "session", [.status: "active"])`).
    public static func changes<F: RecordFields>(_ type: F.Type, named recordName: String, _ fields: [F.Field: JSONValue], changeTag: String? = nil) -> RecordSave {
        RecordSave(recordType: F.recordType, recordName: recordName,
                   fields: Dictionary(uniqueKeysWithValues: fields.map { ($0.key.stringValue, $0.value) }), changeTag: changeTag)
    }
}

extension QueryFilter {
    /// A filter on a typed record's field (`QueryFilter(RegisteredDevice.Field.deviceID, .equal, "tablet")`).
    public init<K: CodingKey>(_ field: K, _ op: FilterOperator, _ value: JSONValue) {
        self.init(field.stringValue, op, value)
    }
}
