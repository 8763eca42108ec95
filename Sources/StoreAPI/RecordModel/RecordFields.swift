import Foundation
import RPCCore

/// A record type of the store's schema as a typed Codable struct: its stored properties are
/// the fields, named exactly as in the schema (docs/data-model.md, `store.schema`). A field
/// the store requires is a non-optional property, every other field an optional one;
/// fields a newer server adds are ignored when reading. A contract test (ContractTests,
/// `SchemaDocTests`) checks these types against the store's schema: every type, field,
/// field type, index and constraint.
public protocol RecordFields: Codable, Sendable, Hashable {
    /// The fields' names, as the wire has them (each type's own, so a name can only be one
    /// of the type's fields).
    associatedtype CodingKeys: CodingKey, CaseIterable, Hashable, Sendable
    /// The schema's record type name (`AppRule`).
    static var recordType: String { get }
    /// Lists that merge element by element when two devices change them at once (a rebase
    /// keeps what either side added and what the caller removed). The store's own
    /// `changedKeys` saves merge a subset of these by union (`mergeAsSet` in `store.schema`).
    static var setFields: Set<CodingKeys> { get }
    /// Fields the store indexes: the ones a query may filter or sort on.
    static var indexedFields: Set<CodingKeys> { get }
    /// Uniqueness constraints within a family, each over a list of fields.
    static var uniqueFields: [[CodingKeys]] { get }
}

extension RecordFields {
    public static var setFields: Set<CodingKeys> { [] }
    public static var uniqueFields: [[CodingKeys]] { [] }

    /// A field of this type, by its name on the wire.
    public typealias Field = CodingKeys

    /// The set-like lists, the indexed fields and the uniqueness constraints by name.
    public static var setFieldNames: Set<String> { Set(setFields.map(\.stringValue)) }
    public static var indexedFieldNames: Set<String> { Set(indexedFields.map(\.stringValue)) }
    public static var uniqueFieldNames: [[String]] { uniqueFields.map { $0.map(\.stringValue) } }

    /// Fields' names on the wire, in order (`includeKeys`, `desiredKeys`).
    public static func names(_ fields: [CodingKeys]) -> [String] { fields.map(\.stringValue) }
}

extension Dictionary where Key == String, Value == JSONValue {
    /// A record's field by its typed name (`fields[UsageRecord.Field.deviceID]`).
    public subscript<K: CodingKey>(field: K) -> JSONValue? {
        get { self[field.stringValue] }
        set { self[field.stringValue] = newValue }
    }
}

/// A reference field's value: another record, by name, in this zone unless `zone` says.
public struct RecordReference: Codable, Sendable, Hashable {
    public var recordName: String
    public var zone: String?

    public init(_ recordName: String, zone: String? = nil) {
        self.recordName = recordName
        self.zone = zone
    }

    /// A record in the family's `default` zone (its people, rules and ledger).
    public static func inDefaultZone(_ recordName: String) -> RecordReference {
        RecordReference(recordName, zone: StoreNames.defaultZone)
    }

    /// The wire form of a reference field.
    public var json: JSONValue { .reference(self.recordName, zone: self.zone) }
}
