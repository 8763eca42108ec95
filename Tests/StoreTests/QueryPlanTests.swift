import Foundation
import GRDB
@testable import RecordStore
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

/// What SQLite does with the statements `store.query` makes, read with `EXPLAIN QUERY PLAN`
/// on a store's own database: each page reads what it returns, never the whole zone sorted.
@Suite("Query plans: one filter's index entries, the index by type, or the records in order")
struct QueryPlanTests {
    @Test("a query reads the entries of one filter (in order when it filters the sort field), another type's index, or usage records in record order")
    func plans() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.admin.save((0..<20).map { Make.usage("u\($0)", start: QueryTests.base.addingTimeInterval(Double($0) * 60), seconds: 30) },
                                        zone: FamilyFixture.zone1)
            let schema = SchemaRegistry(applying: SchemaHistory.versions)
            let database = try DatabaseQueue(path: store.state + "/store.sqlite")
            let zone = try #require(try await database.read { db in
                try Int64.fetchOne(db, sql: "SELECT id FROM zones WHERE name = ?", arguments: [FamilyFixture.zone1])
            })
            func plan(_ type: String, _ filters: [QueryFilter] = [], sort: QuerySort? = nil) async throws -> String {
                let params = QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: type, filters: filters, sort: sort)
                let statement = try QueryOperation.statement(params, type: try #require(schema[type]), zoneIDs: [zone])
                return try await database.read { db in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + statement.sql, arguments: StatementArguments(statement.arguments))
                        .map { $0["detail"] as String }.joined(separator: "; ")
                }
            }

            let listed = try await plan("UsageRecord")
            #expect(listed.contains("SEARCH r USING INTEGER PRIMARY KEY") || listed.contains("SCAN r"), "\(listed)")
            #expect(!listed.contains("TEMP B-TREE") && !listed.contains("INDEX"), "usage records in record order, no index, no sort: \(listed)")

            let summaries = try await plan("DailySummary")
            #expect(summaries.contains("USING INDEX records_by_type") && !summaries.contains("TEMP B-TREE"), "\(summaries)")

            let since = JSONValue.date(QueryTests.base.addingTimeInterval(600))
            let recent = try await plan("UsageRecord", [QueryFilter("deviceID", .equal, "c1"), QueryFilter("sessionStart", .greaterOrEqual, since)],
                                        sort: QuerySort("sessionStart", descending: true))
            #expect(recent.contains("SEARCH f USING PRIMARY KEY (key=? AND value>?)"), "driven from sessionStart's entries: \(recent)")
            #expect(!recent.contains("USE TEMP B-TREE FOR ORDER BY"), "in sort order (only ties sorted): \(recent)")

            let newest = try await plan("UsageRecord", [QueryFilter("deviceID", .equal, "c1")], sort: QuerySort("sessionStart", descending: true))
            #expect(newest.contains("SEARCH f USING PRIMARY KEY (key=?"), "driven from sessionStart's entries, which every usage record has: \(newest)")
            #expect(!newest.contains("USE TEMP B-TREE FOR ORDER BY"), "in sort order (only ties sorted): \(newest)")

            let oneApp = try await plan("UsageRecord", [QueryFilter("logicalID", .equal, "org.khanacademy")])
            #expect((oneApp.contains("SEARCH r USING INTEGER PRIMARY KEY") || oneApp.contains("SCAN r")) && !oneApp.contains(" f ")
                        && !oneApp.contains("TEMP B-TREE") && !oneApp.contains("INDEX"),
                    "logicalID is read from the records: usage records in record order, each checked: \(oneApp)")

            let bundles = try await plan("AppRule", [QueryFilter("bundleId", .equal, "org.khan")])
            #expect(bundles.contains("SEARCH f USING PRIMARY KEY (key=? AND value=? AND zone_id=?)")
                        && bundles.contains("SEARCH r USING INTEGER PRIMARY KEY (rowid=?)") && !bundles.contains("TEMP B-TREE"),
                    "one app's rule from its entries, in record order: \(bundles)")
        }
    }

    @Test("index keys follow the schema's history: the same numbers after any part of it, none given twice, a dropped index's kept; field_keys holds them")
    func indexKeys() async throws {
        let full = SchemaRegistry(applying: SchemaHistory.versions).indexKeys
        #expect(full.map(\.key) == Array(1...Int64(full.count)), "numbered from 1 without gaps")
        #expect(Set(full.map { "\($0.type).\($0.field)" }).count == full.count)
        for count in 1...SchemaHistory.versions.count {
            let part = SchemaRegistry(applying: Array(SchemaHistory.versions.prefix(count))).indexKeys
            #expect(part.map { "\($0.type).\($0.field)=\($0.key)" } == full.prefix(part.count).map { "\($0.type).\($0.field)=\($0.key)" },
                    "a database at version \(count) has the same keys")
        }
        let usage = SchemaRegistry(applying: SchemaHistory.versions)["UsageRecord"]
        #expect(usage?.field("bundleId")?.indexed == false && usage?.field("bundleId")?.indexKey != 0, "a dropped index keeps its key")

        try await StoreHarness.inProcess { store in
            let stored = try await DatabaseQueue(path: store.state + "/store.sqlite").read { db in
                try Row.fetchAll(db, sql: "SELECT key, type, field FROM field_keys ORDER BY key").map { "\($0["type"] as String).\($0["field"] as String)=\($0["key"] as Int64)" }
            }
            #expect(stored == full.map { "\($0.type).\($0.field)=\($0.key)" })
        }
    }
}
