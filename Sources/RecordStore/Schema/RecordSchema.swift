import RPCCore
import StoreAPI

/// One field of a record type.
struct FieldDefinition: Sendable {
    var name: String
    var type: FieldType
    var required = false
    var indexed = false
    var allowedValues: [String]? = nil
    var minimum: Int64? = nil
    /// Lists that hold a set (`deviceIds`): `changedKeys` saves merge them by union.
    var mergeAsSet = false
    var referenceAction: ReferenceAction? = nil
    /// Filled into existing records when a migration adds the field.
    var defaultValue: JSONValue? = nil

    var info: FieldInfo {
        FieldInfo(
            name: self.name, type: self.type, required: self.required, indexed: self.indexed,
            allowedValues: self.allowedValues, minimum: self.minimum, mergeAsSet: self.mergeAsSet ? true : nil,
            referenceAction: self.type == .reference ? (self.referenceAction ?? ReferenceAction.none) : nil,
            defaultValue: self.defaultValue
        )
    }
}

/// One record type: its fields, constraints and what child devices may do with it.
struct RecordTypeDefinition: Sendable {
    var name: String
    var summary: String
    var fields: [FieldDefinition]
    /// Uniqueness constraints, each over a list of fields, within a family. A record that
    /// lacks one of the fields is not constrained by it.
    var unique: [[String]] = []
    var childAccess: ChildAccess = .none
    var childWritableFields: Set<String> = []
    /// For child writers: the field that must hold the writer's own device id.
    var ownerField: String? = nil

    func field(_ name: String) -> FieldDefinition? {
        self.fields.first { $0.name == name }
    }

    var indexedFieldNames: [String] { self.fields.filter(\.indexed).map(\.name) }

    static func constraintName(_ fields: [String]) -> String { fields.joined(separator: "+") }

    var info: RecordTypeInfo {
        RecordTypeInfo(
            name: self.name, summary: self.summary, fields: self.fields.map(\.info), unique: self.unique,
            childAccess: self.childAccess,
            childWritableFields: self.childAccess == .updateFields ? self.childWritableFields.sorted() : nil,
            ownerField: self.ownerField
        )
    }
}

/// The record types in force: the fold of every schema version applied to the database.
struct SchemaRegistry: Sendable {
    private(set) var version = 0
    private(set) var types: [String: RecordTypeDefinition] = [:]
    private(set) var order: [String] = []

    init() {}

    init(applying versions: [SchemaVersion]) {
        for version in versions { self.apply(version) }
    }

    subscript(type: String) -> RecordTypeDefinition? { self.types[type] }

    mutating func apply(_ version: SchemaVersion) {
        for step in version.steps {
            switch step {
            case .addRecordType(let definition):
                precondition(self.types[definition.name] == nil, "record type \(definition.name) added twice")
                self.types[definition.name] = definition
                self.order.append(definition.name)
            case .addField(let type, let field):
                precondition(self.types[type]?.field(field.name) == nil, "field \(type).\(field.name) added twice")
                self.types[type]!.fields.append(field)
            case .addIndex(let type, let field):
                let position = self.types[type]!.fields.firstIndex { $0.name == field }!
                self.types[type]!.fields[position].indexed = true
            case .addUnique(let type, let fields):
                self.types[type]!.unique.append(fields)
            }
        }
        self.version = version.number
    }

    var info: SchemaResult {
        SchemaResult(version: self.version, recordTypes: self.order.compactMap { self.types[$0]?.info })
    }

    /// "unknown record type" with the list of known ones, for error messages.
    func unknownType(_ name: String, parameter: String) -> RPCError {
        RPCError.invalidParams(parameter, "is \"\(name)\", not a known record type; known: \(self.order.joined(separator: ", "))")
    }
}
