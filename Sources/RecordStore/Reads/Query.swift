import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// `store.query`: filters and sort on indexed fields only (as CloudKit); keyset paging with
/// an opaque cursor. One filter finds the records in the field index (or, when no filter
/// has entries there, the sort field's entries or the records themselves); every filter,
/// and a sort the index does not give, are then read from each record's own fields (the
/// index has no key by record to join them through: docs/architecture.md, "What a save
/// writes").
enum QueryOperation {
    /// One filter as SQL, twice: on an index entry's value (`$v`) and on the record's own
    /// fields.
    struct Condition {
        var field: String
        /// The field's ``FieldDefinition/indexKey``.
        var key: Int64
        /// Whether the field has entries in the index, so the query can start from them.
        var hasEntries: Bool
        var sql: String
        var arguments: [DatabaseValue]
        /// The same test on the record's fields (`r.fields`).
        var recordSQL: String
        var recordArguments: [DatabaseValue]
        /// How few rows it likely matches; lower is more selective: equality, a list of
        /// values, a range, inequality.
        var selectivity: Int
    }

    /// A query holds at most this many filters (each is checked on every record found).
    static let maximumFilters = 16

    /// A query that checks records one by one (filters only on fields read from the
    /// records, no sort) reads at most this many records a page, so that a value few
    /// records hold costs a bounded read: such a page may hold fewer records than its limit,
    /// even none, with a cursor that goes on after the last record read.
    static let recordsReadAtMost = 10_000
    /// The last record a page that checks records one by one may read, after `?` (nil:
    /// fewer records than that are left).
    static let lastRecordReadSQL = "SELECT id FROM records WHERE id > ? ORDER BY id LIMIT 1 OFFSET \(recordsReadAtMost - 1)"

    /// What a cursor remembers: which query, and where the last page ended.
    struct Cursor: Codable {
        var query: String
        var id: Int64
        var value: CursorValue?
    }

    enum CursorValue: Codable {
        case int(Int64)
        case double(Double)
        case string(String)

        init?(_ value: DatabaseValue) {
            switch value.storage {
            case .int64(let number): self = .int(number)
            case .double(let number): self = .double(number)
            case .string(let text): self = .string(text)
            default: return nil
            }
        }

        var databaseValue: DatabaseValue {
            switch self {
            case .int(let number): number.databaseValue
            case .double(let number): number.databaseValue
            case .string(let text): text.databaseValue
            }
        }
    }

    static func run(_ params: QueryParams, schema: SchemaRegistry, principal: Principal, _ db: Database) throws -> QueryResult {
        try Validation.family(params.family)
        let limit = try Validation.limit(params.limit, default: QueryParams.defaultLimit, maximum: QueryParams.maximumLimit)
        guard let type = schema[params.recordType] else { throw schema.unknownType(params.recordType, parameter: "params.recordType") }
        guard (params.filters?.count ?? 0) <= maximumFilters else {
            throw RPCError.invalidParams("params.filters", "may hold at most \(maximumFilters) filters, not \(params.filters!.count)")
        }

        let (conditions, sortField) = try Self.terms(params, type: type)
        let descending = params.sort?.descending ?? false
        let queryKey = try fingerprint(params)
        var cursor: Cursor?
        if let text = params.cursor {
            guard let data = Base64URL.decode(text), let decoded = try? RPCJSON.decode(Cursor.self, from: data) else {
                throw RPCError.invalidParams("params.cursor", "is not a cursor returned by store.query")
            }
            guard decoded.query == queryKey else {
                throw RPCError.invalidParams("params.cursor", "belongs to a different query; send the same family, zone, type, filters and sort")
            }
            cursor = decoded
        }

        // Which zones: one, or every zone of the family the caller may read.
        var zoneNames: [Int64: String] = [:]
        if let zoneName = params.zone {
            try Validation.zone(zoneName)
            let zone = try ZoneRow.find(db, family: params.family, name: zoneName)
            try AccessControl.requireRead(principal, zone, in: db)
            zoneNames[zone.id] = zone.name
        } else {
            try FamilyRow.require(db, params.family)
            try AccessControl.requireFamily(principal, params.family)
            let readable = try AccessControl.readableZoneIDs(principal, family: params.family, in: db)
            for row in try Row.fetchAll(cached: db, sql: "SELECT id, name FROM zones WHERE family = ? AND deleted = 0", arguments: [params.family]) {
                let id: Int64 = row["id"]
                if readable?.contains(id) ?? true { zoneNames[id] = row["name"] }
            }
        }
        if zoneNames.isEmpty { return QueryResult(records: [], cursor: nil) }
        let statement = Statement(type: type, conditions: conditions, sortField: sortField, descending: descending,
                                  zoneIDs: zoneNames.keys.sorted(), cursor: cursor, limit: limit)
        let sort = statement.sort

        let rows = try Row.fetchAll(db, sql: statement.sql, arguments: StatementArguments(statement.arguments))
        var records: [Record] = []
        for row in rows.prefix(limit) {
            let stored = StoredRecord(row)
            records.append(try stored.record(zone: zoneNames[row[StoredRecord.width]] ?? ""))  // r.zone_id
        }
        var next: String?
        if rows.count > limit, let last = rows.prefix(limit).last {
            let value: DatabaseValue? = sort.map { $0.toIndexValue(last[StoredRecord.width + 1]) }
            let cursor = Cursor(query: queryKey, id: last[0], value: value.flatMap(CursorValue.init))
            next = Base64URL.encode(Data(try RPCJSON.encode(cursor)))
        } else if statement.readsOneByOne,
                  let lastRead = try Int64.fetchOne(cached: db, sql: Self.lastRecordReadSQL, arguments: [cursor?.id ?? 0]) {
            // The page read all it may: the next one goes on after the last record read.
            next = Base64URL.encode(Data(try RPCJSON.encode(Cursor(query: queryKey, id: lastRead, value: nil))))
        }
        return QueryResult(records: records, cursor: next)
    }

    /// A query's SQL, once its zones are known: the records of the page and one more (the
    /// next page's first, to know there is one), each with its zone and, when sorted, its
    /// sort value.
    struct Statement {
        var sql: String
        var arguments: [DatabaseValue]
        var sort: SortKey?
        /// Checks records one by one, at most ``QueryOperation/recordsReadAtMost`` a page.
        var readsOneByOne: Bool

        init(type: RecordTypeDefinition, conditions: [Condition], sortField: FieldDefinition?, descending: Bool,
             zoneIDs: [Int64], cursor: Cursor?, limit: Int) {
            let zoneList = zoneIDs.map(String.init).joined(separator: ",")

            // Drive the query from one filter's index entries (CROSS JOIN fixes the order in
            // SQLite; without statistics the planner would scan the records instead): a filter on
            // the sort field when there is one, whose entries come in sort order, so that a page
            // stops at its limit (a record without the field fails that filter anyway);
            // otherwise the most selective. Every filter, that one too, is then checked on the
            // record itself, so an entry never decides alone. A filter on a field read from the
            // records has no entries to start from.
            let withEntries = conditions.indices.filter { conditions[$0].hasEntries }
            let sortDriver = sortField.flatMap { field in withEntries.first { conditions[$0].field == field.name } }
            let driver = sortDriver ?? withEntries.min { conditions[$0].selectivity < conditions[$1].selectivity }
            // With no filter to start from, a required sort field's entries (every record has
            // one) give the records in sort order, so a page stops at its limit.
            let sortEntries = driver == nil ? sortField.flatMap { $0.hasIndexEntries && $0.required ? $0.indexKey : nil } : nil
            let sort: SortKey? = sortField.map { field in
                if sortDriver != nil || sortEntries != nil { return SortKey(sql: "f.value", idSQL: "f.record_id", recordValue: nil) }
                let value = RecordValueSQL.scalar(field)
                return SortKey(sql: value.sql, idSQL: "r.id", recordValue: value)
            }
            // Unsorted, records come in record order: with an equality filter's entries in one
            // zone, the entries' own order (so a page stops at its limit).
            let recordID = driver == nil && sortEntries == nil ? "r.id" : "f.record_id"
            var sql = "SELECT \(StoredRecord.columns), r.zone_id"
            var arguments: [DatabaseValue] = []
            if let sort { sql += ", \(sort.sql)" }
            if let driver {
                let condition = conditions[driver]
                sql += " FROM field_index f CROSS JOIN records r ON f.record_id = r.id"
                sql += " WHERE f.key = ? AND f.zone_id IN (\(zoneList)) AND " + condition.sql.replacingOccurrences(of: "$v", with: "f.value") + " AND"
                arguments += [condition.key.databaseValue] + condition.arguments
            } else if let sortEntries {
                sql += " FROM field_index f CROSS JOIN records r ON f.record_id = r.id WHERE f.key = ? AND f.zone_id IN (\(zoneList)) AND"
                arguments.append(sortEntries.databaseValue)
            } else {
                sql += " FROM records r WHERE"
            }
            // Without filters or sort, a type `records_by_type` leaves out is read in record
            // order (`+` keeps SQLite from finding the zone's records by an index and sorting
            // them again for every page); another type says it is one the index holds.
            let listedInOrder = Tables.listedInRecordOrder.contains(type.name)
            let zoneColumn = driver == nil && sort == nil && listedInOrder ? "+r.zone_id" : "r.zone_id"
            sql += " r.type = ? AND r.deleted = 0 AND \(zoneColumn) IN (\(zoneList))" + (listedInOrder ? "" : " AND r." + Tables.byTypeCondition)
            arguments.append(type.name.databaseValue)
            for condition in conditions {
                sql += " AND " + condition.recordSQL
                arguments += condition.recordArguments
            }
            if let cursor {
                switch (sort, descending, cursor.value) {
                case (nil, _, _):
                    sql += " AND \(recordID) > ?"
                    arguments.append(cursor.id.databaseValue)
                case (let sort?, false, let value?):
                    sql += " AND (\(sort.sql) > ? OR (\(sort.sql) = ? AND \(sort.idSQL) > ?))"
                    let bound = sort.fromIndexValue(value.databaseValue)
                    arguments += [bound, bound, cursor.id.databaseValue]
                case (let sort?, false, nil):
                    sql += " AND (\(sort.sql) IS NOT NULL OR \(sort.idSQL) > ?)"
                    arguments.append(cursor.id.databaseValue)
                case (let sort?, true, let value?):
                    sql += " AND (\(sort.sql) < ? OR (\(sort.sql) = ? AND \(sort.idSQL) < ?) OR \(sort.sql) IS NULL)"
                    let bound = sort.fromIndexValue(value.databaseValue)
                    arguments += [bound, bound, cursor.id.databaseValue]
                case (let sort?, true, nil):
                    sql += " AND \(sort.sql) IS NULL AND \(sort.idSQL) < ?"
                    arguments.append(cursor.id.databaseValue)
                }
            }
            self.readsOneByOne = driver == nil && sortEntries == nil && sort == nil && !conditions.isEmpty
            if self.readsOneByOne {
                sql += " AND r.id <= IFNULL((\(QueryOperation.lastRecordReadSQL)), \(Int64.max))"
                arguments.append((cursor?.id ?? 0).databaseValue)
            }
            if let sort {
                sql += descending ? " ORDER BY \(sort.sql) DESC, \(sort.idSQL) DESC" : " ORDER BY \(sort.sql) ASC, \(sort.idSQL) ASC"
            } else {
                sql += " ORDER BY \(recordID) ASC"
            }
            sql += " LIMIT \(limit + 1)"
            self.sql = sql
            self.arguments = arguments
            self.sort = sort
        }
    }

    /// The query's filters and sort field, checked against its record type.
    private static func terms(_ params: QueryParams, type: RecordTypeDefinition) throws -> (conditions: [Condition], sortField: FieldDefinition?) {
        let conditions = try (params.filters ?? []).enumerated().map { index, filter in
            try condition(filter, type: type, zone: params.zone, path: "params.filters[\(index)]")
        }
        return (conditions, try params.sort.map { try sortable($0.field, type: type) })
    }

    /// The statement of `params`' first page over the zones `zoneIDs` (for tests of its plan).
    static func statement(_ params: QueryParams, type: RecordTypeDefinition, zoneIDs: [Int64]) throws -> Statement {
        let (conditions, sortField) = try Self.terms(params, type: type)
        return Statement(type: type, conditions: conditions, sortField: sortField, descending: params.sort?.descending ?? false,
                         zoneIDs: zoneIDs, cursor: nil, limit: params.limit ?? QueryParams.defaultLimit)
    }

    /// A filter as SQL over `$v` (the index value), after checking the field is indexed
    /// and the operator fits its type.
    private static func condition(_ filter: QueryFilter, type: RecordTypeDefinition, zone: String?, path: String) throws -> Condition {
        guard let field = type.field(filter.field) else {
            throw RPCError.invalidParams("\(path).field", "\(type.name) has no field \(filter.field); its fields are \(type.fields.map(\.name).joined(separator: ", "))")
        }
        guard field.indexed else {
            throw RPCError.invalidParams("\(path).field",
                "\(filter.field) is not indexed, so it cannot be filtered on; queryable fields of \(type.name): \(type.indexedFieldNames.joined(separator: ", "))")
        }
        let isList = field.type == .stringList || field.type == .intList
        let elementField = FieldDefinition(name: field.name, type: field.type == .stringList ? .string : field.type == .intList ? .int64 : field.type)
        func scalar(_ value: JSONValue, _ where_: String) throws -> DatabaseValue {
            var definition = elementField
            definition.allowedValues = nil
            definition.minimum = nil
            let normalized: JSONValue
            do {
                normalized = try FieldValues.normalize(value, as: definition, zone: zone ?? Names.defaultZone)
            } catch {
                throw RPCError.invalidParams(where_, error.message.replacingOccurrences(of: "field \(field.name) must be", with: "must be"))
            }
            guard let indexValue = FieldValues.scalarIndexValue(normalized, type: definition.type) else {
                throw RPCError.invalidParams(where_, "is not a value of field \(field.name)")
            }
            return indexValue
        }
        if isList != (filter.op == .contains) {
            throw RPCError.invalidParams("\(path).op", isList
                ? "\(field.name) is a list: filter it with contains"
                : "contains applies to list fields; \(field.name) is a \(field.type.rawValue)")
        }
        func condition(_ sql: String, _ arguments: [DatabaseValue], selectivity: Int) -> Condition {
            let recordSQL: String
            var recordArguments = arguments
            if isList {
                recordSQL = "EXISTS (SELECT 1 FROM json_each(r.fields, \(RecordValueSQL.path(field.name))) WHERE \(sql.replacingOccurrences(of: "$v", with: "value")))"
            } else {
                let value = RecordValueSQL.scalar(field)
                recordSQL = sql.replacingOccurrences(of: "$v", with: value.sql)
                recordArguments = arguments.map(value.fromIndexValue)
            }
            return Condition(field: field.name, key: field.indexKey, hasEntries: field.hasIndexEntries, sql: sql, arguments: arguments,
                             recordSQL: recordSQL, recordArguments: recordArguments, selectivity: selectivity)
        }
        switch filter.op {
        case .contains, .equal:
            return condition("$v = ?", [try scalar(filter.value, "\(path).value")], selectivity: 0)
        case .notEqual:
            return condition("$v != ?", [try scalar(filter.value, "\(path).value")], selectivity: 3)
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            return condition("$v \(filter.op.rawValue) ?", [try scalar(filter.value, "\(path).value")], selectivity: 2)
        case .in:
            guard case .array(let values) = filter.value, !values.isEmpty, values.count <= 100 else {
                throw RPCError.invalidParams("\(path).value", "must be a list of 1 to 100 values for in")
            }
            let arguments = try values.enumerated().map { try scalar($1, "\(path).value[\($0)]") }
            return condition("$v IN (\(databaseQuestionMarks(count: arguments.count)))", arguments, selectivity: 1)
        case .beginsWith:
            guard field.type == .string else {
                throw RPCError.invalidParams("\(path).op", "beginsWith applies to string fields; \(field.name) is a \(field.type.rawValue)")
            }
            guard case .string(let prefix) = filter.value, !prefix.isEmpty else {
                throw RPCError.invalidParams("\(path).value", "must be a non-empty string for beginsWith")
            }
            // Text compares bytewise: everything starting with the prefix sorts below prefix + U+10FFFF.
            return condition("$v >= ? AND $v < ?", [prefix.databaseValue, (prefix + "\u{10FFFF}").databaseValue], selectivity: 2)
        }
    }

    private static func sortable(_ name: String, type: RecordTypeDefinition) throws -> FieldDefinition {
        guard let field = type.field(name) else {
            throw RPCError.invalidParams("params.sort.field", "\(type.name) has no field \(name); its fields are \(type.fields.map(\.name).joined(separator: ", "))")
        }
        guard field.indexed else {
            throw RPCError.invalidParams("params.sort.field",
                "\(name) is not indexed, so it cannot be sorted on; sortable fields of \(type.name): \(type.indexedFieldNames.filter { type.field($0)!.type != .stringList && type.field($0)!.type != .intList }.joined(separator: ", "))")
        }
        guard field.type != .stringList, field.type != .intList else {
            throw RPCError.invalidParams("params.sort.field", "\(name) is a list and cannot be sorted on")
        }
        return field
    }

    static func fingerprint(_ params: QueryParams) throws -> String {
        var key = params
        key.cursor = nil
        key.limit = nil
        // Slashes escaped as earlier versions wrote them: a cursor stays valid over an upgrade.
        return String(SHA256Hex.of(Data(try RPCJSON.encodeSorted(key, escapingSlashes: true))).prefix(24))
    }
}

/// What a query sorts on: the driving index entry's value (`f.value`, in the index's own
/// terms), or the record's own value of the field (``RecordValueSQL``); ties in record order.
struct SortKey {
    var sql: String
    var idSQL: String
    var recordValue: RecordValueSQL?

    func fromIndexValue(_ value: DatabaseValue) -> DatabaseValue { self.recordValue?.fromIndexValue(value) ?? value }
    func toIndexValue(_ value: DatabaseValue) -> DatabaseValue { self.recordValue?.toIndexValue(value) ?? value }
}

/// A scalar field's value read from a record's stored fields (`r.fields`, canonical JSON),
/// in SQL, comparable with the field's index entries: the same value for strings, numbers
/// and booleans (JSON's true and false read as 1 and 0, as the index holds them), `zone/name`
/// for a reference. A date is stored as its canonical text, which sorts as the date does
/// (fixed width, UTC, milliseconds), where the index holds milliseconds: values are carried
/// across with ``fromIndexValue(_:)`` and ``toIndexValue(_:)``.
struct RecordValueSQL {
    var sql: String
    var type: FieldType

    static func scalar(_ field: FieldDefinition) -> RecordValueSQL {
        switch field.type {
        case .reference:
            RecordValueSQL(
                sql: "(json_extract(r.fields, \(path(field.name, "zone"))) || '/' || json_extract(r.fields, \(path(field.name, "recordName"))))",
                type: field.type)
        default:
            RecordValueSQL(sql: "json_extract(r.fields, \(path(field.name)))", type: field.type)
        }
    }

    /// A JSON path to a field (and a member of it) as an SQL literal. Field names are the
    /// schema's identifiers (letters, digits, `_`); the path quotes them all the same.
    static func path(_ components: String...) -> String {
        "'$" + components.map { ".\"" + $0.replacingOccurrences(of: "'", with: "''").replacingOccurrences(of: "\"", with: "") + "\"" }.joined() + "'"
    }

    /// An index value (a filter's or a cursor's) as the record's fields hold it.
    func fromIndexValue(_ value: DatabaseValue) -> DatabaseValue {
        guard self.type == .date, case .int64(let millis) = value.storage else { return value }
        return StoreDates.format(Millis.date(millis)).databaseValue
    }

    /// A value read with ``sql`` as the index holds it.
    func toIndexValue(_ value: DatabaseValue) -> DatabaseValue {
        guard self.type == .date, case .string(let text) = value.storage else { return value }
        return FieldValues.scalarIndexValue(.string(text), type: .date) ?? value
    }
}
