import Foundation
import class GRDB.DatabaseQueue
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("Queries: operators, the indexed-field rule, sorting and paging")
struct QueryTests {
    static let base = Date(timeIntervalSince1970: 1_790_000_000)
    static let apps = ["org.khanacademy", "org.duolingo", "com.game"]

    /// u00…u19: app cycles through `apps` (com.game is reward), one every 10 minutes, 60 s × (i + 1) long.
    static func seed(_ family: FamilyFixture) async throws {
        var saves: [RecordSave] = []
        for i in 0..<20 {
            var save = Make.usage(
                String(format: "u%02d", i), app: apps[i % 3], start: base.addingTimeInterval(Double(i) * 600),
                seconds: Int64(60 * (i + 1)), category: i % 3 == 2 ? "reward" : "learning")
            save.fields["bundleId"] = nil
            saves.append(save)
        }
        try await family.admin.save(saves, zone: FamilyFixture.zone1)
    }

    static func names(_ family: FamilyFixture, _ filters: [QueryFilter], sort: QuerySort? = nil) async throws -> [String] {
        try await family.parent.call(StoreMethods.query, QueryParams(
            family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord", filters: filters, sort: sort, limit: 400)
        ).records.map(\.recordName)
    }

    static func indices(_ list: [Int]) -> [String] { list.map { String(format: "u%02d", $0) } }

    /// Every page of a query, following its cursor (at most `atMost` pages); `between` runs
    /// after each page with the number of pages so far.
    static func pages(_ family: FamilyFixture, _ params: QueryParams, atMost: Int = 30,
                      between: (Int) async throws -> Void = { _ in }) async throws -> [[Record]] {
        var params = params
        var pages: [[Record]] = []
        repeat {
            let page = try await family.parent.call(StoreMethods.query, params)
            pages.append(page.records)
            params.cursor = page.cursor
            try await between(pages.count)
        } while params.cursor != nil && pages.count < atMost
        return pages
    }

    @Test("every operator selects exactly the matching records")
    func operators() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await Self.seed(family)
            let at = { (i: Int) in JSONValue.date(Self.base.addingTimeInterval(Double(i) * 600)) }

            #expect(try await Self.names(family, [QueryFilter("logicalID", .equal, "org.khanacademy")]) == Self.indices([0, 3, 6, 9, 12, 15, 18]))
            #expect(try await Self.names(family, [QueryFilter("logicalID", .notEqual, "org.khanacademy")]) == Self.indices((0..<20).filter { $0 % 3 != 0 }))
            #expect(try await Self.names(family, [QueryFilter("sessionStart", .less, at(5))]) == Self.indices(Array(0..<5)))
            #expect(try await Self.names(family, [QueryFilter("sessionStart", .lessOrEqual, at(5))]) == Self.indices(Array(0...5)))
            #expect(try await Self.names(family, [QueryFilter("sessionStart", .greater, at(14))]) == Self.indices(Array(15..<20)))
            #expect(try await Self.names(family, [QueryFilter("sessionStart", .greaterOrEqual, at(14))]) == Self.indices(Array(14..<20)))
            #expect(try await Self.names(family, [QueryFilter("logicalID", .in, ["org.khanacademy", "com.game"])])
                == Self.indices((0..<20).filter { $0 % 3 != 1 }))
            #expect(try await Self.names(family, [QueryFilter("logicalID", .beginsWith, "org.")]) == Self.indices((0..<20).filter { $0 % 3 != 2 }))
            #expect(try await Self.names(family, [
                QueryFilter("logicalID", .notEqual, "com.game"), QueryFilter("sessionStart", .greaterOrEqual, at(10)),
            ]) == Self.indices([10, 12, 13, 15, 16, 18, 19]))

            // contains on a list field; equality on a reference.
            try await family.parent.save([Make.child("child-1", opaque: "o1", devices: ["c1", "c2"]), Make.child("child-2", opaque: "o2", devices: ["c3"])])
            let withC2 = try await family.parent.call(StoreMethods.query, QueryParams(
                family: FamilyFixture.family, zone: "default", recordType: "ChildContext", filters: [QueryFilter("pairedDeviceIds", .contains, "c2")]))
            #expect(withC2.records.map(\.recordName) == ["child-1"])
            try await family.parent.save([Make.appRule("org.khan")])
            let rules = try await family.parent.call(StoreMethods.query, QueryParams(
                family: FamilyFixture.family, zone: "default", recordType: "AppRule",
                filters: [QueryFilter("familyRef", .equal, .reference(FamilyFixture.family))]))
            #expect(rules.records.map(\.recordName) == ["rule-org.khan"])
        }
    }

    struct Refusal: Sendable, CustomTestStringConvertible {
        var label: String
        var filters: [QueryFilter] = []
        var sort: QuerySort?
        var recordType = "UsageRecord"
        var parameter: String
        var testDescription: String { self.label }
    }

    static let refusals: [Refusal] = [
        Refusal(label: "filter on an unindexed field", filters: [QueryFilter("totalSeconds", .greater, 60)], parameter: "params.filters[0].field"),
        Refusal(label: "sort on an unindexed field", sort: QuerySort("totalSeconds"), parameter: "params.sort.field"),
        Refusal(label: "filter on a field no longer indexed", filters: [QueryFilter("category", .equal, "learning")], parameter: "params.filters[0].field"),
        Refusal(label: "sort on a field no longer indexed", sort: QuerySort("sessionEnd"), parameter: "params.sort.field"),
        Refusal(label: "a field the type does not have", filters: [QueryFilter("colour", .equal, "red")], parameter: "params.filters[0].field"),
        Refusal(label: "contains on a scalar", filters: [QueryFilter("logicalID", .contains, "x")], parameter: "params.filters[0].op"),
        Refusal(label: "beginsWith on a date", filters: [QueryFilter("sessionStart", .beginsWith, "2026")], parameter: "params.filters[0].op"),
        Refusal(label: "a number compared with a string field", filters: [QueryFilter("logicalID", .equal, 3)], parameter: "params.filters[0].value"),
        Refusal(label: "in without a list", filters: [QueryFilter("logicalID", .in, "a")], parameter: "params.filters[0].value"),
        Refusal(label: "a date that is not a date", filters: [QueryFilter("sessionStart", .less, "soon")], parameter: "params.filters[0].value"),
        Refusal(label: "a date past the year 9999 once in UTC", filters: [QueryFilter("sessionStart", .less, "9999-12-31T23:00:00-05:00")],
                parameter: "params.filters[0].value"),
        Refusal(label: "an unknown record type", recordType: "Homework", parameter: "params.recordType"),
    ]

    @Test("an update moves exactly the index entries, uniqueness keys and references its fields change, whatever stays as it was")
    func updatesMoveTheirEntries() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let start = Self.base
            try await family.admin.save([Make.usage("u1", app: "org.khanacademy", start: start, seconds: 60)], zone: FamilyFixture.zone1)
            // One indexed value changes (logicalID), the rest stay; then only an unindexed one.
            try await family.admin.save([RecordSave(recordType: "UsageRecord", recordName: "u1", fields: ["logicalID": "org.duolingo"])],
                                        zone: FamilyFixture.zone1, policy: .changedKeys)
            try await family.admin.save([RecordSave(recordType: "UsageRecord", recordName: "u1", fields: ["totalSeconds": 61])],
                                        zone: FamilyFixture.zone1, policy: .changedKeys)
            #expect(try await Self.names(family, [QueryFilter("logicalID", .equal, "org.khanacademy")]).isEmpty, "the old value is no longer found")
            #expect(try await Self.names(family, [QueryFilter("logicalID", .equal, "org.duolingo")]) == ["u1"])
            #expect(try await Self.names(family, [QueryFilter("deviceID", .equal, "c1"), QueryFilter("sessionStart", .equal, .date(start))]) == ["u1"],
                    "the values that stayed are still found")

            // A list loses one value and gains another.
            try await family.parent.save([Make.child("child-1", opaque: "o1", devices: ["c1", "c2"])])
            let tag = try #require(try await family.parent.fetch(["child-1"]).records.first?.changeTag)
            var moved = Make.child("child-1", opaque: "o1", devices: ["c2", "c3"])
            moved.changeTag = tag
            try await family.parent.save([moved])
            for (device, holders) in [("c1", [String]()), ("c2", ["child-1"]), ("c3", ["child-1"])] {
                let found = try await family.parent.call(StoreMethods.query, QueryParams(
                    family: FamilyFixture.family, zone: "default", recordType: "ChildContext", filters: [QueryFilter("pairedDeviceIds", .contains, .string(device))]))
                #expect(found.records.map(\.recordName) == holders, "\(device)")
            }

            // A uniqueness key that changes frees the old one for another record.
            try await family.parent.save([Make.child("child-2", opaque: "o2")])
            let second = try #require(try await family.parent.fetch(["child-2"]).records.first?.changeTag)
            var renamed = Make.child("child-2", opaque: "o3")
            renamed.changeTag = second
            try await family.parent.save([renamed])
            let taken = try await family.parent.save([Make.child("child-3", opaque: "o3")])
            #expect(taken.saved.first?.error?.code == .conflict, "o3 is child-2's now")
            let freed = try await family.parent.save([Make.child("child-4", opaque: "o2")])
            #expect(freed.allSucceeded, "o2 is free again: \(freed.saved)")
        }
    }

    @Test("a query the index cannot answer is refused with invalid_params naming the parameter", arguments: refusals)
    func refused(_ refusal: Refusal) async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let error = await expectError(.invalidParams) {
                _ = try await family.parent.call(StoreMethods.query, QueryParams(
                    family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: refusal.recordType, filters: refusal.filters, sort: refusal.sort))
            }
            #expect(error?.data?["parameter"]?.stringValue == refusal.parameter, "\(String(describing: error))")
            if refusal.label.contains("unindexed") {
                #expect(error?.message.contains("not indexed") == true && error?.message.contains("sessionStart") == true)
            }
            // The service is still there.
            #expect(try await family.parent.call(StoreMethods.whoami, Empty()).deviceId == "p1")
        }
    }

    @Test("pages follow each other through the cursor, in sort order, each record once")
    func paging() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            // 250 sessions, some sharing a start time, so the order needs its tie-break.
            for chunk in stride(from: 0, to: 250, by: 125) {
                try await family.admin.save((chunk..<chunk + 125).map { i in
                    Make.usage("s\(i)", start: Self.base.addingTimeInterval(Double(i / 2) * 60), seconds: 30)
                }, zone: FamilyFixture.zone1)
            }
            for descending in [false, true] {
                let pages = try await Self.pages(family, QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord",
                                                                     sort: QuerySort("sessionStart", descending: descending), limit: 40))
                let seen = pages.flatMap { $0 }
                #expect(pages.count == 7)
                #expect(seen.count == 250 && Set(seen.map(\.recordName)).count == 250)
                let starts = seen.map { $0.fields["sessionStart"]!.stringValue! }
                #expect(starts == (descending ? starts.sorted(by: >) : starts.sorted()))
            }

            let first = try await family.parent.call(StoreMethods.query, QueryParams(
                family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord", limit: 100))
            #expect(first.records.count == 100 && first.cursor != nil)
            let other = QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord",
                                    filters: [QueryFilter("deviceID", .equal, "c1")], cursor: first.cursor)
            await expectError(.invalidParams) { _ = try await family.parent.call(StoreMethods.query, other) }
            var garbage = other
            garbage.cursor = "not-a-cursor"
            await expectError(.invalidParams) { _ = try await family.parent.call(StoreMethods.query, garbage) }
            var tooMany = other
            tooMany.cursor = nil
            tooMany.limit = 401
            await expectError(.invalidParams) { _ = try await family.parent.call(StoreMethods.query, tooMany) }
        }
    }

    @Test("a filter on a field read from the records pages in record order, each matching record once, also one saved between pages")
    func filtersReadFromRecordsPage() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let schema = try await family.parent.call(StoreMethods.schema, Empty())
            let usage = try #require(schema.recordTypes.first { $0.name == "UsageRecord" })
            #expect(usage.fields.filter { $0.readFromRecords == true }.map(\.name).sorted() == ["deviceID", "logicalID"], "store.schema says which")
            // 90 sessions, every third on the tablet.
            try await family.admin.save((0..<90).map { i in
                Make.usage(String(format: "s%02d", i), device: i % 3 == 0 ? "tablet" : "c1", start: Self.base.addingTimeInterval(Double(i) * 60), seconds: 30)
            }, zone: FamilyFixture.zone1)
            let params = QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord",
                                     filters: [QueryFilter("deviceID", .equal, "tablet")], limit: 7)
            let pages = try await Self.pages(family, params) { count in
                guard count == 2 else { return }
                try await family.admin.save([Make.usage("s90", device: "tablet", start: Self.base.addingTimeInterval(90 * 60), seconds: 30)], zone: FamilyFixture.zone1)
            }
            #expect(pages.joined().allSatisfy { $0.fields["deviceID"] == "tablet" })
            #expect(pages.joined().map(\.recordName) == (0...90).filter { $0 % 3 == 0 }.map { String(format: "s%02d", $0) }, "in the order they were made, s90 last")
            #expect(pages.count == 5)
        }
    }

    @Test("a filter read from the records reads at most 10,000 records a page: a value only late records hold gets an empty page with a cursor, then its records")
    func filtersReadFromRecordsReadABoundedPage() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            // 10,500 sessions of the phone; the tablet's are the 10,201st and the 10,401st.
            for chunk in stride(from: 0, to: 10_500, by: 350) {
                try await family.admin.save((chunk..<chunk + 350).map { i in
                    Make.usage("s\(i)", device: i == 10_200 || i == 10_400 ? "tablet" : "c1", start: Self.base.addingTimeInterval(Double(i) * 60), seconds: 30)
                }, zone: FamilyFixture.zone1)
            }
            var params = QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord",
                                     filters: [QueryFilter("deviceID", .equal, "tablet")], limit: 10)
            let first = try await family.parent.call(StoreMethods.query, params)
            #expect(first.records.isEmpty && first.cursor != nil, "the first 10,000 records hold none of the tablet's: \(first.records.map(\.recordName))")
            params.cursor = first.cursor
            let second = try await family.parent.call(StoreMethods.query, params)
            #expect(second.records.map(\.recordName) == ["s10200", "s10400"] && second.cursor == nil)

            // A value no record holds: a page per 10,000 records, then the end.
            params.filters = [QueryFilter("deviceID", .equal, "lost-phone")]
            params.cursor = nil
            let pages = try await Self.pages(family, params)
            #expect(pages.map(\.count) == [0, 0])
        }
    }

    @Test("a query's other filters and its sort are checked on each record's own fields (dates, references, lists), page after page")
    func filtersBeyondTheFirst() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            // 60 sessions a minute apart, every third on another device, some sharing a start.
            let sessions: [RecordSave] = (0..<60).map { (i: Int) -> RecordSave in
                let device = i % 3 == 2 ? "c9" : "c1"
                let app = i % 2 == 0 ? "org.khanacademy" : "com.game"
                return Make.usage(String(format: "s%02d", i), device: device, app: app, start: Self.base.addingTimeInterval(Double(i / 2) * 60), seconds: 30)
            }
            try await family.admin.save(sessions, zone: FamilyFixture.zone1)
            // Sorted on a filtered field (its index entries come in order) and on another.
            let from = JSONValue.date(Self.base.addingTimeInterval(10 * 60))
            let device = QueryFilter("deviceID", .equal, "c1"), app = QueryFilter("logicalID", .in, ["org.khanacademy"])
            for (filters, since) in [([device, QueryFilter("sessionStart", .greaterOrEqual, from), app], 10), ([device, app], 0)] {
                let matching: [Int] = (0..<60).filter { i in i % 3 != 2 && i / 2 >= since && i % 2 == 0 }
                let expected: [String] = matching.map { String(format: "s%02d", $0) }
                for descending in [false, true] {
                    let seen = try await Self.pages(family, QueryParams(
                        family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord", filters: filters,
                        sort: QuerySort("sessionStart", descending: descending), limit: 3)).joined().map(\.recordName)
                    #expect(seen == (descending ? expected.reversed() : expected), "since \(since), descending: \(descending)")
                }
            }

            // A reference and a list as the second filter, after a string's index entries.
            try await family.parent.save([Make.appRule("org.khan"), Make.appRule("org.khan.kids")])
            let ownFamily = QueryFilter("familyRef", .equal, .reference(FamilyFixture.family))
            let rules = { (filters: [QueryFilter]) in
                try await family.parent.call(StoreMethods.query, QueryParams(
                    family: FamilyFixture.family, zone: "default", recordType: "AppRule", filters: filters, sort: QuerySort("bundleId", descending: true)))
                    .records.map(\.recordName)
            }
            #expect(try await rules([QueryFilter("bundleId", .beginsWith, "org.khan"), ownFamily]) == ["rule-org.khan.kids", "rule-org.khan"])
            #expect(try await rules([QueryFilter("bundleId", .equal, "org.khan"), QueryFilter("familyRef", .equal, .reference("another"))]).isEmpty)
            try await family.parent.save([Make.child("child-1", opaque: "o1", devices: ["c1", "c2"]), Make.child("child-2", opaque: "o2", devices: ["c3"])])
            let children = try await family.parent.call(StoreMethods.query, QueryParams(
                family: FamilyFixture.family, zone: "default", recordType: "ChildContext",
                filters: [QueryFilter("childOpaqueId", .in, ["o1", "o2"]), QueryFilter("pairedDeviceIds", .contains, "c3")]))
            #expect(children.records.map(\.recordName) == ["child-2"])
        }
    }

    @Test("a record's index entries go with it: after an update, a deletion and its zone's deletion the index holds exactly what live records' fields give")
    func entriesLeaveWithTheirRecord() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.admin.save((0..<5).map { Make.usage("u\($0)", start: Self.base.addingTimeInterval(Double($0) * 60), seconds: 30) },
                                        zone: FamilyFixture.zone1)
            try await family.admin.save([Make.usage("w0", device: "c2", start: Self.base, seconds: 30)], zone: FamilyFixture.zone2)
            let database = try DatabaseQueue(path: store.state + "/store.sqlite")
            let entries = { (zone: String) in
                try await database.read { db in
                    try String.fetchAll(db, sql: """
                        SELECT IFNULL(r.name, '(no record)') || ' ' || k.field || '=' || f.value FROM field_index f JOIN field_keys k ON k.key = f.key
                        JOIN zones z ON z.id = f.zone_id LEFT JOIN records r ON r.id = f.record_id WHERE k.type = 'UsageRecord' AND z.name = ? ORDER BY 1
                        """, arguments: [zone])
                }
            }
            #expect(try await entries(FamilyFixture.zone1).count == 5, "sessionStart's each (logicalID and deviceID are read from the records)")

            let later = Self.base.addingTimeInterval(3600)
            try await family.admin.save([RecordSave(recordType: "UsageRecord", recordName: "u0", fields: ["logicalID": "org.duolingo", "sessionStart": .date(later)])],
                                        zone: FamilyFixture.zone1, policy: .changedKeys)
            try await family.admin.call(StoreMethods.modify, ModifyParams(
                family: FamilyFixture.family, zone: FamilyFixture.zone1, deletes: [RecordDelete(recordName: "u1")]))
            let left = try await entries(FamilyFixture.zone1)
            #expect(left.count == 4 && left.filter { $0.hasPrefix("u1 ") }.isEmpty, "\(left)")
            #expect(left.filter { $0.hasPrefix("u0 ") } == ["u0 sessionStart=\(Int64(later.timeIntervalSince1970 * 1000))"], "\(left)")
            #expect(try await Self.names(family, [QueryFilter("logicalID", .equal, "org.duolingo")]) == ["u0"], "a field read from the records is found as it is now")

            try await family.parent.call(StoreMethods.deleteZone, ZoneParams(family: FamilyFixture.family, zone: FamilyFixture.zone1))
            #expect(try await entries(FamilyFixture.zone1).isEmpty)
            #expect(try await entries(FamilyFixture.zone2).count == 1, "another zone's entries stay")
        }
    }

    @Test("without a zone, a query spans the zones the caller may read")
    func acrossZones() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            try await family.child1.save([Make.usage("mine", device: "c1", start: Self.base, seconds: 60)], zone: FamilyFixture.zone1)
            try await family.child2.save([Make.usage("theirs", device: "c2", start: Self.base, seconds: 60)], zone: FamilyFixture.zone2)
            let everywhere = QueryParams(family: FamilyFixture.family, recordType: "UsageRecord", sort: QuerySort("deviceID"))
            #expect(try await family.parent.call(StoreMethods.query, everywhere).records.map(\.zone) == [FamilyFixture.zone1, FamilyFixture.zone2])
            #expect(try await family.child1.call(StoreMethods.query, everywhere).records.map(\.recordName) == ["mine"])
            #expect(try await family.child2.call(StoreMethods.query, everywhere).records.map(\.recordName) == ["theirs"])
        }
    }
}
