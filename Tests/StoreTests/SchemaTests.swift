import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Schema: types, required fields, allowed values, uniqueness, migrations")
struct SchemaTests {
    struct Violation: Sendable, CustomTestStringConvertible {
        var label: String
        var save: RecordSave
        var code: ErrorCode = .invalidParams
        /// The field the error must name.
        var field: String?
        var testDescription: String { self.label }
    }

    static let familyRef = JSONValue.reference(FamilyFixture.family, zone: "default")

    static let violations: [Violation] = [
        Violation(label: "unknown record type", save: RecordSave(recordType: "Homework", recordName: "h", fields: [:]), field: "recordType"),
        Violation(label: "unknown field", save: RecordSave(recordType: "AppRule", recordName: "r", fields: [
            "familyRef": familyRef, "bundleId": "a", "classification": "learning", "colour": "red"]), field: "colour"),
        Violation(label: "string where an integer belongs", save: RecordSave(recordType: "AppRule", recordName: "r", fields: [
            "familyRef": familyRef, "bundleId": "a", "classification": "learning", "pointsPerMinute": "2"]), field: "pointsPerMinute"),
        Violation(label: "a fraction where an integer belongs", save: RecordSave(recordType: "AppRule", recordName: "r", fields: [
            "familyRef": familyRef, "bundleId": "a", "classification": "learning", "pointsPerMinute": 2.5]), field: "pointsPerMinute"),
        Violation(label: "integer for a boolean", save: RecordSave(recordType: "AppRule", recordName: "r", fields: [
            "familyRef": familyRef, "bundleId": "a", "classification": "learning", "isEnabled": 1]), field: "isEnabled"),
        Violation(label: "missing required field", save: RecordSave(recordType: "AppRule", recordName: "r", fields: [
            "familyRef": familyRef, "classification": "learning"]), field: "bundleId"),
        Violation(label: "value outside the allowed ones", save: RecordSave(recordType: "ParentProfile", recordName: "p", fields: [
            "familyRef": familyRef, "role": "owner"]), field: "role"),
        Violation(label: "below the minimum (ledger amounts are positive)", save: RecordSave(recordType: "PointsLedgerEntry", recordName: "l", fields: [
            "familyRef": familyRef, "childRef": .reference("c"), "type": "redemption", "amount": -5, "timestamp": .date(Date())]), field: "amount"),
        Violation(label: "a date that is not RFC 3339", save: RecordSave(recordType: "UsageRecord", recordName: "u", fields: [
            "logicalID": "a", "deviceID": "c1", "sessionStart": "yesterday", "sessionEnd": .date(Date()), "totalSeconds": 5]), field: "sessionStart"),
        Violation(label: "a date before the year 0000 once in UTC", save: RecordSave(recordType: "PointsLedgerEntry", recordName: "l", fields: [
            "familyRef": familyRef, "childRef": .reference("c"), "type": "redemption", "amount": 5, "timestamp": "0000-01-01T00:30:00+01:00"]),
                  field: "timestamp"),
        Violation(label: "a date past the year 9999 once in UTC", save: RecordSave(recordType: "PointsLedgerEntry", recordName: "l", fields: [
            "familyRef": familyRef, "childRef": .reference("c"), "type": "redemption", "amount": 5, "timestamp": "9999-12-31T23:00:00-05:00"]),
                  field: "timestamp"),
        Violation(label: "a reference that is a bare string", save: RecordSave(recordType: "EarnedTimeBalance", recordName: "b", fields: [
            "childRef": "child-1", "balanceSeconds": 5]), field: "childRef"),
        Violation(label: "a list holding a number", save: RecordSave(recordType: "ShieldPolicy", recordName: "s", fields: [
            "familyRef": familyRef, "rewardApps": ["a", 3]]), field: "rewardApps"),
        Violation(label: "JSON text that is not JSON", save: RecordSave(recordType: "AuditEntry", recordName: "a", fields: [
            "familyRef": familyRef, "actorParentRef": .reference("p"), "action": "x", "timestamp": .date(Date()), "metadata": "{oops"]), field: "metadata"),
        Violation(label: "JSON text nested deeper than the parser takes", save: RecordSave(recordType: "AuditEntry", recordName: "a", fields: [
            "familyRef": familyRef, "actorParentRef": .reference("p"), "action": "x", "timestamp": .date(Date()),
            "metadata": .string(String(repeating: "[", count: 600) + String(repeating: "]", count: 600))]), field: "metadata"),
    ]

    @Test("a schema violation fails with invalid_params naming the field, and nothing is saved", arguments: violations)
    func violation(_ case_: Violation) async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let outcome = try await family.parent.save([case_.save]).saved[0]
            let error = try #require(outcome.error)
            #expect(error.code == case_.code)
            #expect(error.field == case_.field, "\(error.message)")
            #expect(error.message.isEmpty == false)
            #expect(try await family.parent.fetch([case_.save.recordName]).missing == [case_.save.recordName])
        }
    }

    @Test("uniqueness: one ChildContext per opaque id, one AppRule per bundle, one balance per child")
    func uniqueness() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.parent.save([Make.child("child-a", opaque: "same-opaque")])
            let twin = try await family.parent.save([Make.child("child-b", opaque: "same-opaque")]).saved[0]
            #expect(twin.error?.code == .conflict && twin.error?.field == "childOpaqueId")
            #expect(twin.error?.message.contains("child-a") == true)

            try await family.parent.save([Make.appRule("org.khan")])
            var copy = Make.appRule("org.khan")
            copy.recordName = "another-name"
            #expect(try await family.parent.save([copy]).saved[0].error?.code == .conflict)

            let balance = { (name: String) in
                RecordSave(recordType: "EarnedTimeBalance", recordName: name, fields: ["childRef": .reference("child-a"), "balanceSeconds": 0])
            }
            try await family.parent.save([balance("balance-1")])
            // Uniqueness holds across zones of the family.
            let elsewhere = try await family.parent.save([RecordSave(recordType: "EarnedTimeBalance", recordName: "balance-2", fields: [
                "childRef": .reference("child-a", zone: "default"), "balanceSeconds": 0])], zone: FamilyFixture.zone1).saved[0]
            #expect(elsewhere.error?.code == .conflict && elsewhere.error?.field == "childRef")

            // A record keeps its own key when saved again; two records claiming one key in the
            // same batch: the first has it, the second gets conflict and leaves nothing.
            let childA = try #require(try await family.parent.fetch(["child-a"]).records.first)
            var again = Make.child("child-a", opaque: "same-opaque")
            again.changeTag = childA.changeTag
            #expect(try await family.parent.save([again]).allSucceeded)
            let pair = try await family.parent.save([Make.child("child-c", opaque: "opaque-c"), Make.child("child-d", opaque: "opaque-c")])
            #expect(pair.saved[0].error == nil && pair.saved[1].error?.code == .conflict && pair.saved[1].error?.message.contains("child-c") == true)
            #expect(try await family.parent.fetch(["child-d"]).missing == ["child-d"])

            // Deleting the holder frees the key.
            _ = try await family.parent.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: "default", deletes: [RecordDelete(recordName: "child-a")]))
            #expect(try await family.parent.save([Make.child("child-b", opaque: "same-opaque")]).allSucceeded)
        }
    }

    @Test("store.schema lists the record types with their fields, indexes and constraints")
    func describesSchema() async throws {
        try await StoreHarness.inProcess { store in
            let schema = try await store.client().call(StoreMethods.schema, Empty())
            #expect(schema.version == 13)
            #expect(schema.recordTypes.first { $0.name == "RegisteredDevice" }?.fields.contains { $0.name == "appVersion" } == true)
            let names = Set(schema.recordTypes.map(\.name))
            for name in ["Family", "ParentProfile", "ChildContext", "MonitoringSession", "RegisteredDevice", "AppRule", "AppConfiguration",
                         "ShieldPolicy", "ConfigurationCommand", "UsageRecord", "DailySummary", "PointsLedgerEntry", "EarnedTimeBalance", "AuditEntry",
                         "PairingInvitation", "WeeklySummary", "TimeRequest"] {
                #expect(names.contains(name), "\(name)")
            }
            let child = try #require(schema.recordTypes.first { $0.name == "ChildContext" })
            #expect(child.unique == [["familyRef", "childOpaqueId"]])
            #expect(child.fields.first { $0.name == "pairedDeviceIds" }?.mergeAsSet == true)
            let ledger = try #require(schema.recordTypes.first { $0.name == "PointsLedgerEntry" })
            #expect(ledger.fields.first { $0.name == "type" }?.allowedValues == ["accrual", "redemption", "adjustment", "reversal", "deduction", "expiry"])
            #expect(ledger.serverOnlyValues == ["type": ["accrual", "deduction", "expiry", "reversal"]])
            let request = try #require(schema.recordTypes.first { $0.name == "TimeRequest" })
            #expect(request.serverOnlyValues == ["status": ["approved", "denied", "expired", "open"]], "a request is the server's alone to write")
            #expect(ledger.childAccess == .none && ledger.appendOnly == true)
            let usage = try #require(schema.recordTypes.first { $0.name == "UsageRecord" })
            #expect(usage.notInFuture == NotInFutureInfo(field: "sessionEnd", offsetField: "clockOffsetSeconds", toleranceSeconds: 120))
            #expect(usage.appendOnly == nil)
        }
    }

    /// One row of a record type's table in docs/data-model.md: `| `name` | type | required | indexed | … |`.
    struct DocumentedField: Hashable, CustomStringConvertible {
        var name: String
        var type: String
        var required: Bool
        var indexed: Bool
        /// Written "yes, from the records" in the document.
        var readFromRecords: Bool
        var description: String {
            "\(self.name) \(self.type)\(self.required ? " required" : "")\(self.indexed ? " indexed" : "")\(self.readFromRecords ? " from the records" : "")"
        }
    }

    /// The field tables of docs/data-model.md, by the record type their section is named for.
    static func documentedFields() throws -> [String: Set<DocumentedField>] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/data-model.md"), encoding: .utf8)
        var tables: [String: Set<DocumentedField>] = [:]
        var section = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") { section = String(line.dropFirst(3)) }
            guard line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4 else { continue }
            tables[section, default: []].insert(DocumentedField(
                name: cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")), type: cells[1], required: cells[2] == "yes",
                indexed: cells[3] == "yes" || cells[3] == "yes, from the records", readFromRecords: cells[3] == "yes, from the records"))
        }
        return tables
    }

    @Test("docs/data-model.md's table of each record type says what store.schema says: every field, its type, whether required, whether indexed and whether read from the records")
    func dataModelDocumentMatchesSchema() async throws {
        let documented = try Self.documentedFields()
        try await StoreHarness.inProcess { store in
            let schema = try await store.client().call(StoreMethods.schema, Empty())
            for type in schema.recordTypes {
                let served = Set(type.fields.map { DocumentedField(name: $0.name, type: $0.type.rawValue, required: $0.required, indexed: $0.indexed,
                                                              readFromRecords: $0.readFromRecords == true) })
                let written = documented[type.name] ?? []
                #expect(written == served, "\(type.name): only in the document \(written.subtracting(served).sorted { $0.name < $1.name }), only in the schema \(served.subtracting(written).sorted { $0.name < $1.name })")
            }
        }
    }

    @Test("an older database migrates on start: new fields get their defaults and new indexes answer queries")
    func migration() async throws {
        let store = try await StoreHarness.start(arguments: ["--schema-version", "1"])
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        try await family.parent.save([
            RecordSave(recordType: "Family", recordName: FamilyFixture.family, fields: ["displayName": "Smiths"]),
            Make.appRule("org.khan"), Make.appRule("com.game", classification: "reward"),
        ])
        let byClass = QueryParams(family: FamilyFixture.family, zone: "default", recordType: "AppRule",
                                  filters: [QueryFilter("classification", .equal, "reward")])
        await expectError(.invalidParams) { _ = try await family.parent.call(StoreMethods.query, byClass) }
        #expect(try await family.admin.call(StoreMethods.schema, Empty()).version == 1)

        try await store.restart()
        let parent = store.client(token: FamilyFixture.parentToken)
        #expect(try await parent.call(StoreMethods.schema, Empty()).version == 13)
        let familyRecord = try #require(try await parent.fetch([FamilyFixture.family]).records.first)
        #expect(familyRecord.fields["timeZone"] == "UTC" && familyRecord.fields["displayName"] == "Smiths")
        let rewards = try await parent.call(StoreMethods.query, byClass)
        #expect(rewards.records.map(\.recordName) == ["rule-com.game"])
        #expect(store.process.log.contains("database migrated"))
        // A record created now gets the default too, in the reply and as stored.
        let created = try await parent.save([RecordSave(recordType: "Family", recordName: "another", fields: ["displayName": "Joneses"])])
        #expect(created.saved.first?.record?.fields["timeZone"] == "UTC")
        #expect(try await parent.fetch(["another"]).records.first?.fields["timeZone"] == "UTC")

        // A newer database refuses an older binary rather than misreading it.
        await store.process.stop()
        let old = try ServiceProcess(
            executable: Binaries.path("screentime-stored"),
            arguments: ["--runtime-dir", store.directory.path, "--state-dir", store.state, "--schema-version", "1", "--log-target", "stderr"],
            socketPath: store.directory.file("store.sock"), logPath: store.directory.file("old.log"), environment: [:])
        #expect(try await old.waitForExit() == 1)
        #expect(old.log.contains("migrated by a newer screentime-stored"), "\(old.log)")
    }
}
