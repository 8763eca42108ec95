import DurableSQLite
import Foundation
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
    /// The number that stands for this type and field in the field index (0: never
    /// indexed): given by ``SchemaRegistry`` in the order the schema's history first indexed
    /// each field, so the same in every database and never given to another field, also
    /// once the index is dropped.
    var indexKey: Int64 = 0
    /// Queryable, but with no entries in the field index: a query reads the field from the
    /// records themselves (a type whose records a query reads in order anyway, where no
    /// documented query starts from this field's values).
    var readFromRecords = false

    /// Whether a record's value of this field has entries in `field_index`.
    var hasIndexEntries: Bool { self.indexed && !self.readFromRecords }

    var info: FieldInfo {
        FieldInfo(
            name: self.name, type: self.type, required: self.required, indexed: self.indexed,
            readFromRecords: self.readFromRecords ? true : nil,
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
    /// Never changed once written; deleted only by local services (the points ledger).
    var appendOnly = false
    /// A date field that may not be after the server's time (beyond `ClockCheck.tolerance`),
    /// judged by the writer's clock (`ModifyParams.deviceClock`), whose offset the store
    /// writes into the record.
    var notInFuture: ClockCheck? = nil
    /// Values of a field that only local services (the server's own) may write: a device
    /// that saves one gets `forbidden` (the aggregator's own ledger entry types).
    var serverOnlyValues: [String: Set<String>] = [:]

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
            ownerField: self.ownerField, appendOnly: self.appendOnly ? true : nil,
            notInFuture: self.notInFuture.map { NotInFutureInfo(field: $0.field, offsetField: $0.offsetField, toleranceSeconds: Int(ClockCheck.tolerance / 1000)) },
            serverOnlyValues: self.serverOnlyValues.isEmpty ? nil : self.serverOnlyValues.mapValues { $0.sorted() }
        )
    }
}

/// The record types in force: the fold of every schema version applied to the database.
struct SchemaRegistry: Sendable {
    private(set) var version = 0
    private(set) var types: [String: RecordTypeDefinition] = [:]
    private(set) var order: [String] = []
    /// The last index key given (``FieldDefinition/indexKey``).
    private var lastIndexKey: Int64 = 0

    init() {}

    init(applying versions: [SchemaVersion]) {
        for version in versions { self.apply(version) }
    }

    subscript(type: String) -> RecordTypeDefinition? { self.types[type] }

    mutating func apply(_ version: SchemaVersion) {
        for step in version.steps {
            switch step {
            case .addRecordType(var definition):
                precondition(self.types[definition.name] == nil, "record type \(definition.name) added twice")
                for position in definition.fields.indices where definition.fields[position].indexed {
                    definition.fields[position].indexKey = self.nextIndexKey()
                }
                self.types[definition.name] = definition
                self.order.append(definition.name)
            case .addField(let type, var field):
                precondition(self.types[type]?.field(field.name) == nil, "field \(type).\(field.name) added twice")
                // Every live record holds a required field (a query sorted on one reads its
                // entries as all the records): records made before it get the default.
                precondition(!field.required || field.defaultValue != nil, "required field \(type).\(field.name) added without a default")
                if field.indexed { field.indexKey = self.nextIndexKey() }
                self.types[type]!.fields.append(field)
            case .addIndex(let type, let field):
                self.setIndexed(true, type: type, field: field)
            case .dropIndex(let type, let field):
                self.setIndexed(false, type: type, field: field)
            case .readFromRecords(let type, let field):
                let position = self.types[type]!.fields.firstIndex { $0.name == field }!
                precondition(self.types[type]!.fields[position].hasIndexEntries, "\(type).\(field) has no index entries to give up")
                self.types[type]!.fields[position].readFromRecords = true
            case .addUnique(let type, let fields):
                self.types[type]!.unique.append(fields)
            case .allowValues(let type, let field, let values):
                let position = self.types[type]!.fields.firstIndex { $0.name == field }!
                self.types[type]!.fields[position].allowedValues! += values
            case .makeAppendOnly(let type):
                self.types[type]!.appendOnly = true
            case .notInFuture(let type, let field, let offsetField):
                self.types[type]!.notInFuture = ClockCheck(field: field, offsetField: offsetField)
            case .serverOnlyValues(let type, let field, let values):
                self.types[type]!.serverOnlyValues[field, default: []].formUnion(values)
            }
        }
        self.version = version.number
    }

    private mutating func setIndexed(_ indexed: Bool, type: String, field: String) {
        let position = self.types[type]!.fields.firstIndex { $0.name == field }!
        precondition(self.types[type]!.fields[position].indexed != indexed, "\(type).\(field) is already \(indexed ? "indexed" : "not indexed")")
        self.types[type]!.fields[position].indexed = indexed
        self.types[type]!.fields[position].readFromRecords = false
        if indexed && self.types[type]!.fields[position].indexKey == 0 {
            self.types[type]!.fields[position].indexKey = self.nextIndexKey()
        }
    }

    private mutating func nextIndexKey() -> Int64 {
        self.lastIndexKey += 1
        return self.lastIndexKey
    }

    /// Every field that has an index key (indexed now or once), with it.
    var indexKeys: [(type: String, field: String, key: Int64)] {
        self.order.flatMap { type in
            self.types[type]!.fields.filter { $0.indexKey != 0 }.map { (type, $0.name, $0.indexKey) }
        }.sorted { $0.key < $1.key }
    }

    var info: SchemaResult {
        SchemaResult(version: self.version, recordTypes: self.order.compactMap { self.types[$0]?.info })
    }

    /// "unknown record type" with the list of known ones, for error messages.
    func unknownType(_ name: String, parameter: String) -> RPCError {
        RPCError.invalidParams(parameter, "is \"\(name)\", not a known record type; known: \(self.order.joined(separator: ", "))")
    }
}

/// A date field that may not be in the future by the server's clock. A device's clock can
/// be wrong (set ahead on purpose, to beat a limit): the writer's clock when it sent the call
/// (`ModifyParams.deviceClock`) tells how far off it is; the store writes that offset into
/// the record (`offsetField`, whole minutes in seconds: a difference under half a minute is
/// the time the request spent on its way, not a wrong clock) and judges the field as moved
/// back by it.
struct ClockCheck: Sendable {
    /// How far in the future a value may be (milliseconds): clocks that agree to within a
    /// couple of minutes.
    static let tolerance: Int64 = 120_000

    var field: String
    var offsetField: String

    /// The writer's clock less the server's, rounded to whole minutes; nil without a clock.
    static func offsetSeconds(deviceClock: Date?, now: Int64) -> Int64? {
        deviceClock.map { clock in
            let millis = Millis.of(clock) - now
            return Int64((Double(millis) / 60_000).rounded()) * 60
        }
    }

    /// Nil when `fields` pass at the server's `now`, else the refusal.
    func refusal(_ fields: [String: JSONValue], offsetSeconds: Int64, now: Int64) -> ItemError? {
        guard let value = fields[self.field]?.stringValue.flatMap(StoreDates.parse).map(Millis.of) else { return nil }
        let ahead = value - offsetSeconds * 1000 - now
        guard ahead > Self.tolerance else { return nil }
        let clockNote = offsetSeconds == 0 ? "" : " (after correcting for this device's clock, \(Self.describe(abs(offsetSeconds) * 1000)) \(offsetSeconds > 0 ? "ahead" : "behind"))"
        return ItemError(code: .invalidParams, message: "\(self.field) is \(Self.describe(ahead)) after the server's time\(clockNote): "
                         + "a session cannot end in the future; check the device's date and time", field: self.field)
    }

    private static func describe(_ millis: Int64) -> String {
        let seconds = millis / 1000
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return seconds % 3600 < 60 ? "\(seconds / 3600) h" : "\(seconds / 3600) h \(seconds % 3600 / 60) min" }
        return "\(seconds / 86400) days"
    }
}
