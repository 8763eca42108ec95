import GRDB
import RPCCore
import StoreAPI

enum FetchOperation {
    /// Fetches of at most this many records run on the request's event loop
    /// (`RecordStore.shortRead`): a few primary-key lookups, tens of microseconds.
    static let shortReadLimit = 16

    static func validate(_ params: FetchParams) throws {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        guard params.recordNames.count <= ModifyParams.maximumItems else {
            throw RPCError(.limitExceeded, "fetch at most \(ModifyParams.maximumItems) records at once, not \(params.recordNames.count)")
        }
    }

    static func run(_ params: FetchParams, principal: Principal, _ db: Database) throws -> FetchResult {
        let found = try self.stored(params, principal: principal, db)
        return FetchResult(records: try found.records.map { try $0.record(zone: found.zone) }, missing: found.missing)
    }

    /// The same result, its records' fields written as stored (``FetchReply``).
    static func reply(_ params: FetchParams, principal: Principal, _ db: Database) throws -> FetchReply {
        let found = try self.stored(params, principal: principal, db)
        return FetchReply(zone: found.zone, records: found.records, missing: found.missing)
    }

    /// The records found, in the order asked for, and the names not found.
    private static func stored(_ params: FetchParams, principal: Principal, _ db: Database) throws -> (zone: String, records: [StoredRecord], missing: [String]) {
        if params.recordNames.count == 1 { return try self.one(params.recordNames[0], params, principal: principal, db) }
        let zone = try ZoneRow.find(db, family: params.family, name: params.zone)
        try AccessControl.requireRead(principal, zone, in: db)
        guard !params.recordNames.isEmpty else { return (zone.name, [], []) }
        var found: [String: StoredRecord] = [:]
        let marks = databaseQuestionMarks(count: params.recordNames.count)
        let rows = try Row.fetchAll(
            db, sql: "SELECT \(StoredRecord.columns) FROM records r WHERE r.zone_id = ? AND r.deleted = 0 AND r.name IN (\(marks))",
            arguments: StatementArguments([zone.id] + params.recordNames.map { $0 as any DatabaseValueConvertible }))
        for row in rows {
            let stored = StoredRecord(row)
            found[stored.name] = stored
        }
        var records: [StoredRecord] = []
        var missing: [String] = []
        for name in params.recordNames {
            if let record = found[name] { records.append(record) } else { missing.append(name) }
        }
        return (zone.name, records, missing)
    }

    /// The zone, the child device's share in it and the record found in one statement
    /// (the busiest read of all: a device fetching one record by name). A parent and the
    /// server's own callers have no share to look up.
    private static func one(_ name: String, _ params: FetchParams, principal: Principal, _ db: Database) throws -> (zone: String, records: [StoredRecord], missing: [String]) {
        let child = principal.device.flatMap { $0.role.isParent ? nil : $0.deviceId }
        let recordColumns = 5
        let sql = child == nil ? Self.oneWithoutShare : Self.oneWithShare
        let texts = child.map { [$0, name, params.family, params.zone] } ?? [name, params.family, params.zone]
        guard let (zone, permission, stored) = try db.firstRow(cached: sql, texts: texts, { row in
            (ZoneRow(id: row.int64(0), family: params.family, name: params.zone, createdAt: row.int64(1), incarnation: row.int64(2), purgedSeq: row.int64(3)),
             row.optionalText(4),
             row.isNull(recordColumns) ? nil : StoredRecord(row, offset: recordColumns))
        })
        else {
            _ = try ZoneRow.find(db, family: params.family, name: params.zone)  // says which is missing: the family or the zone
            throw RPCError(.notFound, "zone \(params.zone) does not exist in family \(params.family)", data: ["zone": .string(params.zone)])
        }
        try AccessControl.requireRead(principal, zone, access: AccessControl.access(principal, to: zone) { _ in permission })
        guard let stored, !stored.deleted else { return (zone.name, [], [name]) }
        return (zone.name, [stored], [])
    }

    private static let oneWithShare = """
        SELECT z.id, z.created_at, z.incarnation, z.purged_seq, s.permission, \(StoredRecord.columns)
        FROM zones z
        LEFT JOIN shares s ON s.zone_id = z.id AND s.device_id = ?
        LEFT JOIN records r ON r.zone_id = z.id AND r.name = ?
        WHERE z.family = ? AND z.name = ? AND z.deleted = 0
        """

    private static let oneWithoutShare = """
        SELECT z.id, z.created_at, z.incarnation, z.purged_seq, NULL, \(StoredRecord.columns)
        FROM zones z
        LEFT JOIN records r ON r.zone_id = z.id AND r.name = ?
        WHERE z.family = ? AND z.name = ? AND z.deleted = 0
        """
}

/// A `store.fetch` result whose records' fields are written as the store keeps them (their
/// canonical JSON text), not parsed into values and written again: the same JSON as
/// ``FetchResult``'s but for the fields' key order (sorted here).
struct FetchReply: JSONWritable {
    var zone: String
    var records: [StoredRecord]
    var missing: [String]

    func write(to writer: inout JSONWriter) throws {
        writer.beginObject()
        writer.member("records")
        writer.beginArray()
        for stored in self.records {
            writer.element()
            try stored.record(zone: self.zone, fields: [:]).write(to: &writer, fieldsText: stored.fieldsText)
        }
        writer.endArray()
        writer.member("missing", self.missing)
        writer.endObject()
    }
}
