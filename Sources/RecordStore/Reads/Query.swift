import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// `store.query`: filters and sort on indexed fields only (as CloudKit), answered from the
/// field index; keyset paging with an opaque cursor.
enum QueryOperation {
    /// One filter turned into SQL on a `field_index` join.
    private struct Condition {
        var field: String
        var sql: String
        var arguments: [DatabaseValue]
        /// How few rows it likely matches; lower is more selective: equality, a list of
        /// values, a range, inequality.
        var selectivity: Int
    }

    /// Each filter is a join; SQLite allows 64 tables in one.
    static let maximumFilters = 16

    /// What a cursor remembers: which query, and where the last page ended.
    private struct Cursor: Codable {
        var query: String
        var id: Int64
        var value: CursorValue?
    }

    private enum CursorValue: Codable {
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

        let conditions = try (params.filters ?? []).enumerated().map { index, filter in
            try condition(filter, type: type, zone: params.zone, path: "params.filters[\(index)]")
        }
        let sortField = try params.sort.map { sort in try sortable(sort.field, type: type) }
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
        let zoneList = zoneNames.keys.sorted().map(String.init).joined(separator: ",")

        var sql = "SELECT \(StoredRecord.columns), r.zone_id"
        var arguments: [DatabaseValue] = []
        if sortField != nil { sql += ", s.value" }
        // Drive the join from the most selective filter's index rows (CROSS JOIN fixes the
        // order in SQLite); without statistics the planner would scan the records instead.
        let driver = conditions.indices.min { conditions[$0].selectivity < conditions[$1].selectivity }
        var filterSQL = ""
        var filterArguments: [DatabaseValue] = []
        for (index, condition) in conditions.enumerated() {
            let f = "f\(index)"
            filterSQL += " AND \(f).record_id = r.id AND \(f).type = ? AND \(f).field = ? AND \(f).zone_id IN (\(zoneList)) AND "
                + condition.sql.replacingOccurrences(of: "$v", with: "\(f).value")
            filterArguments += [type.name.databaseValue, condition.field.databaseValue] + condition.arguments
        }
        if let driver {
            sql += " FROM field_index f\(driver) CROSS JOIN records r"
        } else {
            sql += " FROM records r"
        }
        for index in conditions.indices where index != driver {
            sql += " JOIN field_index f\(index) ON f\(index).record_id = r.id"
        }
        if let sortField {
            sql += " LEFT JOIN field_index s ON s.record_id = r.id AND s.type = ? AND s.field = ?"
            arguments += [type.name.databaseValue, sortField.databaseValue]
        }
        sql += " WHERE r.type = ? AND r.deleted = 0 AND r.zone_id IN (\(zoneList))" + filterSQL
        arguments.append(type.name.databaseValue)
        arguments += filterArguments
        if let cursor {
            switch (sortField != nil, descending, cursor.value) {
            case (false, _, _):
                sql += " AND r.id > ?"
                arguments.append(cursor.id.databaseValue)
            case (true, false, let value?):
                sql += " AND (s.value > ? OR (s.value = ? AND r.id > ?))"
                arguments += [value.databaseValue, value.databaseValue, cursor.id.databaseValue]
            case (true, false, nil):
                sql += " AND (s.value IS NOT NULL OR r.id > ?)"
                arguments.append(cursor.id.databaseValue)
            case (true, true, let value?):
                sql += " AND (s.value < ? OR (s.value = ? AND r.id < ?) OR s.value IS NULL)"
                arguments += [value.databaseValue, value.databaseValue, cursor.id.databaseValue]
            case (true, true, nil):
                sql += " AND s.value IS NULL AND r.id < ?"
                arguments.append(cursor.id.databaseValue)
            }
        }
        if sortField != nil {
            sql += descending ? " ORDER BY s.value DESC, r.id DESC" : " ORDER BY s.value ASC, r.id ASC"
        } else {
            sql += " ORDER BY r.id ASC"
        }
        sql += " LIMIT \(limit + 1)"

        let rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments))
        var records: [Record] = []
        for row in rows.prefix(limit) {
            let stored = StoredRecord(row)
            records.append(try stored.record(zone: zoneNames[row[StoredRecord.width]] ?? ""))  // r.zone_id
        }
        var next: String?
        if rows.count > limit, let last = rows.prefix(limit).last {
            let value: DatabaseValue? = sortField != nil ? last[12] : nil
            let cursor = Cursor(query: queryKey, id: last[0], value: value.flatMap(CursorValue.init))
            next = Base64URL.encode(Data(try RPCJSON.encode(cursor)))
        }
        return QueryResult(records: records, cursor: next)
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
        switch filter.op {
        case .contains, .equal:
            return Condition(field: field.name, sql: "$v = ?", arguments: [try scalar(filter.value, "\(path).value")], selectivity: 0)
        case .notEqual:
            return Condition(field: field.name, sql: "$v != ?", arguments: [try scalar(filter.value, "\(path).value")], selectivity: 3)
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            return Condition(field: field.name, sql: "$v \(filter.op.rawValue) ?", arguments: [try scalar(filter.value, "\(path).value")], selectivity: 2)
        case .in:
            guard case .array(let values) = filter.value, !values.isEmpty, values.count <= 100 else {
                throw RPCError.invalidParams("\(path).value", "must be a list of 1 to 100 values for in")
            }
            let arguments = try values.enumerated().map { try scalar($1, "\(path).value[\($0)]") }
            return Condition(field: field.name, sql: "$v IN (\(databaseQuestionMarks(count: arguments.count)))", arguments: arguments, selectivity: 1)
        case .beginsWith:
            guard field.type == .string else {
                throw RPCError.invalidParams("\(path).op", "beginsWith applies to string fields; \(field.name) is a \(field.type.rawValue)")
            }
            guard case .string(let prefix) = filter.value, !prefix.isEmpty else {
                throw RPCError.invalidParams("\(path).value", "must be a non-empty string for beginsWith")
            }
            // Text compares bytewise: everything starting with the prefix sorts below prefix + U+10FFFF.
            return Condition(field: field.name, sql: "$v >= ? AND $v < ?", arguments: [prefix.databaseValue, (prefix + "\u{10FFFF}").databaseValue], selectivity: 2)
        }
    }

    private static func sortable(_ name: String, type: RecordTypeDefinition) throws -> String {
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
        return name
    }

    static func fingerprint(_ params: QueryParams) throws -> String {
        var key = params
        key.cursor = nil
        key.limit = nil
        // Slashes escaped as earlier versions wrote them: a cursor stays valid over an upgrade.
        return String(SHA256Hex.of(Data(try RPCJSON.encodeSorted(key, escapingSlashes: true))).prefix(24))
    }
}


