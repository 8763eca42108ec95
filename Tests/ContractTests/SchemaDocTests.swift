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

    @Test("RecordFieldNames names exactly the fields of the store's schema, and RecordTypes its record types")
    func fieldAndTypeConstants() async throws {
        let schema = try await withService("store", in: TemporaryDirectory(), setup: { try await .store(StoreConfiguration(wake: []), environment: $0) }) { service in
            try await service.client.call(StoreMethods.schema, Empty())
        }
        let fields = Set(schema.recordTypes.flatMap { $0.fields.map(\.name) })
        #expect(RecordFieldNames.all.subtracting(fields).isEmpty, "constants for fields no record type has: \(RecordFieldNames.all.subtracting(fields).sorted())")
        #expect(fields.subtracting(RecordFieldNames.all).isEmpty, "fields with no constant in RecordFieldNames: \(fields.subtracting(RecordFieldNames.all).sorted())")
        #expect(Set(RecordTypes.all) == Set(schema.recordTypes.map(\.name)))
    }
}
