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
        let zone = try ZoneRow.find(db, family: params.family, name: params.zone)
        try AccessControl.requireRead(principal, zone, in: db)
        guard !params.recordNames.isEmpty else { return FetchResult(records: [], missing: []) }
        var found: [String: Record] = [:]
        if params.recordNames.count == 1 {
            if let stored = try StoredRecord.find(db, zoneID: zone.id, name: params.recordNames[0]), !stored.deleted {
                found[stored.name] = try stored.record(zone: zone.name)
            }
        } else {
            let marks = databaseQuestionMarks(count: params.recordNames.count)
            let rows = try Row.fetchAll(
                db, sql: "SELECT \(StoredRecord.columns) FROM records r WHERE r.zone_id = ? AND r.deleted = 0 AND r.name IN (\(marks))",
                arguments: StatementArguments([zone.id] + params.recordNames.map { $0 as any DatabaseValueConvertible }))
            for row in rows {
                let stored = StoredRecord(row)
                found[stored.name] = try stored.record(zone: zone.name)
            }
        }
        var records: [Record] = []
        var missing: [String] = []
        for name in params.recordNames {
            if let record = found[name] { records.append(record) } else { missing.append(name) }
        }
        return FetchResult(records: records, missing: missing)
    }
}
