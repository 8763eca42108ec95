import Foundation
import RPCCore
import RecordStore
import ServiceHarness
import ServiceKit
import StoreAPI
import Testing
import TestSupport

/// docs/protocol.md's record types and schema versions are what `store.schema` reports.
@Suite("docs/protocol.md's record types and schema versions agree with store.schema")
struct SchemaDocTests {
    @Test("every record type the store has is a row of the record types table, and the versions paragraph reaches the store's version")
    func recordTypesAndVersions() async throws {
        let schema = try await withService("store", in: TemporaryDirectory(), setup: { try await .store(StoreConfiguration(wake: []), environment: $0) }) { service in
            try await service.client.call(StoreMethods.schema, Empty())
        }
        let doc = try String(contentsOfFile: ProtocolDoc.path, encoding: .utf8)
        let lines = doc.split(separator: "\n").map(String.init)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("| type | key fields") }) else {
            Issue.record("docs/protocol.md has no record types table")
            return
        }
        let rows = lines[(header + 2)...].prefix { $0.hasPrefix("|") }
            .map { $0.split(separator: "|").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" }
        #expect(Set(rows) == Set(schema.recordTypes.map(\.name)), "documented \(rows.sorted()), the store has \(schema.recordTypes.map(\.name).sorted())")
        for version in 1...schema.version {
            #expect(doc.contains("v\(version): "), "docs/protocol.md does not describe schema version \(version)")
        }
        #expect(!doc.contains("v\(schema.version + 1): "), "docs/protocol.md describes a schema version the store does not have")
    }

    @Test("the typed records are the store's schema: every type, field, field type, required field, index, constraint and set-like list")
    func typedRecordsAreTheSchema() async throws {
        let schema = try await withService("store", in: TemporaryDirectory(), setup: { try await .store(StoreConfiguration(wake: []), environment: $0) }) { service in
            try await service.client.call(StoreMethods.schema, Empty())
        }
        #expect(RecordTypes.all == schema.recordTypes.map(\.name), "typed \(RecordTypes.all), the store has \(schema.recordTypes.map(\.name))")
        for type in RecordTypes.types {
            guard let stored = schema.recordTypes.first(where: { $0.name == type.recordType }) else { continue }
            let typed = TypedFieldShape.fields(of: type)
            let storedFields = Dictionary(uniqueKeysWithValues: stored.fields.map { ($0.name, $0) })
            #expect(Set(typed.keys) == Set(storedFields.keys), "\(type.recordType): typed fields \(typed.keys.sorted()), stored \(storedFields.keys.sorted())")
            for (name, field) in storedFields {
                guard let shape = typed[name] else { continue }
                #expect(shape.type == field.type || (field.type == .json && shape.type == .string), "\(type.recordType).\(name) is a \(field.type) in the store, typed as \(shape.type.map(\.rawValue) ?? "something else")")
                #expect(shape.required == field.required, "\(type.recordType).\(name): required \(field.required) in the store, \(shape.required ? "non-optional" : "optional") typed")
            }
            #expect(type.indexedFieldNames == Set(stored.fields.filter(\.indexed).map(\.name)), "\(type.recordType): indexes")
            #expect(type.uniqueFieldNames == stored.unique, "\(type.recordType): uniqueness constraints")
            let mergedAsSet = Set(stored.fields.filter { $0.mergeAsSet == true }.map(\.name))
            #expect(mergedAsSet.isSubset(of: type.setFieldNames), "\(type.recordType): the store merges \(mergedAsSet.sorted()) as sets, the typed record \(type.setFieldNames.sorted())")
        }
    }
}

/// A typed record's fields as the store would see them: the wire type each property
/// encodes as and whether it is optional, read from its Codable conformance.
enum TypedFieldShape {
    struct Shape {
        var type: FieldType?
        var required: Bool
    }

    static func fields(of type: any RecordFields.Type) -> [String: Shape] {
        let schema = SchemaRecorder.schema(for: type)
        let required = Set(schema.required ?? [])
        return (schema.properties ?? [:]).reduce(into: [:]) { shapes, property in
            shapes[property.key] = Shape(type: self.fieldType(property.value), required: required.contains(property.key))
        }
    }

    /// JSON-typed fields (`payloadJSON`) hold JSON text: a string, typed as `String`.
    static func fieldType(_ schema: Schema) -> FieldType? {
        switch (schema.type, schema.format) {
        case ("string", "date-time"): return .date
        case ("string", _): return .string
        case ("integer", _): return .int64
        case ("number", _): return .double
        case ("boolean", _): return .bool
        case ("object", _) where schema.properties?["recordName"] != nil: return .reference
        case ("array", _) where schema.items?.type == "string": return .stringList
        case ("array", _) where schema.items?.type == "integer": return .intList
        default: return nil
        }
    }
}
