import Foundation
import RPCCore

/// A record as the store returns it: CloudKit-shaped, with typed fields and server-set
/// system fields.
///
/// ```json
/// {"recordType": RecordTypes.appRule, "recordName": "rule-org.khanacademy", "zone": "default",
///  "fields": {"familyRef": {"recordName": "fam-1", "zone": "default"}, "bundleId": "org.khanacademy",
///             "classification": "learning"},
///  "changeTag": "2s", "createdAt": "…", "modifiedAt": "…", "createdBy": "device:p1", "modifiedBy": "device:p1"}
/// ```
public struct Record: Codable, Sendable, Hashable {
    public var recordType: String
    public var recordName: String
    /// The zone it lives in.
    public var zone: String
    /// Field values in their wire form: see `docs/protocol.md` ("Field types").
    public var fields: [String: JSONValue]
    /// New on every change; send it back with a save to detect concurrent edits.
    public var changeTag: String
    public var createdAt: Date
    public var modifiedAt: Date
    /// The principal that created it: `device:<id>` or `local` (a service on the server).
    public var createdBy: String
    public var modifiedBy: String

    public init(
        recordType: String, recordName: String, zone: String, fields: [String: JSONValue], changeTag: String,
        createdAt: Date, modifiedAt: Date, createdBy: String, modifiedBy: String
    ) {
        self.recordType = recordType
        self.recordName = recordName
        self.zone = zone
        self.fields = fields
        self.changeTag = changeTag
        self.createdAt = createdAt
        self.modifiedAt = modifiedAt
        self.createdBy = createdBy
        self.modifiedBy = modifiedBy
    }
}

/// A record to save: what the client chooses. System fields come from the server.
public struct RecordSave: Codable, Sendable, Hashable {
    public var recordType: String
    /// Client-chosen, so identifiers can be deterministic (`<deviceID>_<YYYY-MM-DD>`).
    public var recordName: String
    /// With `savePolicy` `changedKeys`, only the fields to change (`null` removes one);
    /// otherwise every field of the record.
    public var fields: [String: JSONValue]
    /// The change tag the client's copy is based on; nil for a new record. Checked by
    /// `ifServerRecordUnchanged`.
    public var changeTag: String?

    public init(recordType: String, recordName: String, fields: [String: JSONValue], changeTag: String? = nil) {
        self.recordType = recordType
        self.recordName = recordName
        self.fields = fields
        self.changeTag = changeTag
    }
}

/// A record to delete.
public struct RecordDelete: Codable, Sendable, Hashable {
    public var recordName: String
    /// When given, the delete happens only if the record still has this change tag.
    public var changeTag: String?

    public init(recordName: String, changeTag: String? = nil) {
        self.recordName = recordName
        self.changeTag = changeTag
    }
}

/// A record named across zones: where a deletion or a cascade happened.
public struct RecordID: Codable, Sendable, Hashable {
    public var zone: String
    public var recordName: String
    public var recordType: String?

    public init(zone: String, recordName: String, recordType: String? = nil) {
        self.zone = zone
        self.recordName = recordName
        self.recordType = recordType
    }
}

extension JSONValue {
    /// A reference field's value: `{"recordName": …, "zone": …}`. Without `zone`, the
    /// referenced record is in the same zone as the referring one.
    public static func reference(_ recordName: String, zone: String? = nil) -> JSONValue {
        var object: [String: JSONValue] = ["recordName": .string(recordName)]
        if let zone { object["zone"] = .string(zone) }
        return .object(object)
    }

    /// A date field's value, in the wire's RFC 3339 form.
    public static func date(_ date: Date) -> JSONValue {
        .string(StoreDates.format(date))
    }
}

/// The one date format of field values: RFC 3339, UTC, milliseconds.
public enum StoreDates {
    public static func format(_ date: Date) -> String { RFC3339.format(date) }

    public static func parse(_ text: String) -> Date? { RFC3339.parse(text) }
}
