import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// Change tokens: opaque to clients, `z:<zone id>:<incarnation>:<seq>` or `d:<family>:<seq>`
/// inside, base64url-encoded.
enum ChangeToken {
    static func zone(_ zone: ZoneRow, seq: Int64) -> String {
        Base64URL.encode("z:\(zone.id):\(zone.incarnation):\(seq)".utf8)
    }

    static func database(family: String, seq: Int64) -> String {
        Base64URL.encode("d:\(seq):\(family)".utf8)
    }

    static func parseZone(_ text: String) -> (zoneID: Int64, incarnation: Int64, seq: Int64)? {
        guard let data = Base64URL.decode(text), let plain = String(data: data, encoding: .utf8) else { return nil }
        let parts = plain.split(separator: ":")
        guard parts.count == 4, parts[0] == "z", let id = Int64(parts[1]), let incarnation = Int64(parts[2]), let seq = Int64(parts[3]) else { return nil }
        return (id, incarnation, seq)
    }

    static func parseDatabase(_ text: String) -> (family: String, seq: Int64)? {
        guard let data = Base64URL.decode(text), let plain = String(data: data, encoding: .utf8) else { return nil }
        let parts = plain.split(separator: ":", maxSplits: 2)
        guard parts.count == 3, parts[0] == "d", let seq = Int64(parts[1]) else { return nil }
        return (String(parts[2]), seq)
    }
}

enum ZoneChangesOperation {
    static func run(_ params: ZoneChangesParams, principal: Principal, _ db: Database) throws -> ZoneChangesResult {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        let limit = try Validation.limit(params.limit, default: 200, maximum: 400)
        let zone = try ZoneRow.find(db, family: params.family, name: params.zone)
        try AccessControl.requireRead(principal, zone, in: db)
        var since: Int64 = 0
        if let text = params.since {
            guard let token = ChangeToken.parseZone(text) else {
                throw RPCError.invalidParams("params.since", "is not a change token of a zone; pass the token of an earlier store.zoneChanges")
            }
            guard token.zoneID == zone.id, token.incarnation == zone.incarnation else {
                throw RPCError(.changeTokenExpired, "the token belongs to another zone, or zone \(zone.name) was deleted and created again since; fetch the zone from scratch (no since)")
            }
            guard token.seq >= zone.purgedSeq else {
                throw RPCError(.changeTokenExpired, "the token is older than the tombstone horizon of zone \(zone.name); fetch the zone from scratch (no since)")
            }
            since = token.seq
        }
        let head = try StoreDatabase.head(db)
        let rows = try Row.fetchAll(cached: db, sql: "SELECT \(StoredRecord.columns) FROM records r WHERE r.zone_id = ? AND r.seq > ? ORDER BY r.seq LIMIT ?",
            arguments: [zone.id, since, limit + 1])
        var records: [Record] = []
        var deletions: [RecordID] = []
        var last = since
        for row in rows.prefix(limit) {
            let stored = StoredRecord(row)
            last = stored.seq
            if stored.deleted {
                deletions.append(RecordID(zone: zone.name, recordName: stored.name, recordType: stored.type))
            } else {
                records.append(try stored.record(zone: zone.name))
            }
        }
        let moreComing = rows.count > limit
        return ZoneChangesResult(
            records: records, deletions: deletions, token: ChangeToken.zone(zone, seq: moreComing ? last : max(head, since)),
            moreComing: moreComing)
    }
}

enum DatabaseChangesOperation {
    static func run(_ params: DatabaseChangesParams, principal: Principal, _ db: Database) throws -> DatabaseChangesResult {
        try Validation.family(params.family)
        let limit = try Validation.limit(params.limit, default: 200, maximum: 400)
        guard let purged = try Int64.fetchOne(cached: db, sql: "SELECT purged_seq FROM families WHERE id = ?", arguments: [params.family]) else {
            throw RPCError(.notFound, "family \(params.family) does not exist", data: ["family": .string(params.family)])
        }
        try AccessControl.requireFamily(principal, params.family)
        var since: Int64 = 0
        if let text = params.since {
            guard let token = ChangeToken.parseDatabase(text), token.family == params.family else {
                throw RPCError.invalidParams("params.since", "is not a change token of family \(params.family); pass the token of an earlier store.databaseChanges")
            }
            guard token.seq >= purged else {
                throw RPCError(.changeTokenExpired, "the token is older than the horizon of deleted zones; list the zones from scratch (no since)")
            }
            since = token.seq
        }
        let head = try StoreDatabase.head(db)
        let readable = try AccessControl.readableZoneIDs(principal, family: params.family, in: db)
        // A zone's latest change: its own latest event, or its newest record's (a family has
        // a few zones; each is one step down records_by_zone_seq).
        let rows = try Row.fetchAll(cached: db, sql: """
            SELECT id, name, deleted, change_seq FROM (
                SELECT id, name, deleted, MAX(change_seq, IFNULL((SELECT MAX(r.seq) FROM records r WHERE r.zone_id = zones.id), 0)) AS change_seq
                FROM zones WHERE family = ?)
            WHERE change_seq > ? ORDER BY change_seq LIMIT ?
            """, arguments: [params.family, since, limit + 1])
        var changed: [String] = []
        var deleted: [String] = []
        var last = since
        for row in rows.prefix(limit) {
            let id: Int64 = row["id"]
            let name: String = row["name"]
            last = row["change_seq"]
            let isDeleted: Bool = row["deleted"]
            if let device = principal.device {
                // Devices never see internal zones; children see only what is shared with them now.
                if Names.isInternalZone(name) || (device.role == .child && !(readable?.contains(id) ?? false)) { continue }
            }
            if isDeleted { deleted.append(name) } else { changed.append(name) }
        }
        let moreComing = rows.count > limit
        return DatabaseChangesResult(
            changedZones: changed, deletedZones: deleted,
            token: ChangeToken.database(family: params.family, seq: moreComing ? last : max(head, since)), moreComing: moreComing)
    }
}

/// Reads one page of the change log for `store.watch`.
enum WatchReader {
    static let horizonKey = "watch_horizon"

    struct Page: Sendable {
        var events: [ChangeEvent]
        /// Every change up to here was considered (the filters may have skipped some).
        var scannedThrough: Int64
    }

    static func checkHorizon(after: Int64, _ db: Database) throws {
        let horizon = try StoreDatabase.meta(db, horizonKey)
        guard after >= horizon else {
            throw RPCError(.changeTokenExpired,
                "changes up to \(horizon) were purged from the change log; rebuild from the records and watch from \(horizon)",
                data: ["horizon": .int(horizon)])
        }
    }

    /// The change log's columns as `page` selects them, by position (read for every change
    /// watched), then the record saved with the change (``StoredRecord``).
    private enum Column: Int {
        case seq, family, zone, kind, recordType, recordName, at, created, oldFields, deletedBy, record
    }

    static func page(after: Int64, params: WatchParams, limit: Int, _ db: Database) throws -> Page {
        let includeRecords = params.includeRecords ?? true
        var sql = "SELECT c.seq, c.family, c.zone, c.kind, c.record_type, c.record_name, c.at, c.created, c.old_fields"
        // Who deleted a record: its tombstone says, while the deletion is its last change
        // (looked up for deletions only).
        sql += includeRecords ? """
            , CASE WHEN c.kind = '\(ChangeKind.recordDeleted.rawValue)' THEN (SELECT d.modified_by FROM records d WHERE d.zone_id = z.id
                AND d.name = c.record_name AND d.seq = c.seq AND d.deleted = 1) END
            """ : ", NULL"
        if includeRecords { sql += ", \(StoredRecord.columns)" }
        sql += " FROM changes c"
        if includeRecords {
            sql += """
                 LEFT JOIN zones z ON z.family = c.family AND z.name = c.zone AND z.deleted = 0
                 LEFT JOIN records r ON r.zone_id = z.id AND r.name = c.record_name AND r.seq = c.seq AND r.deleted = 0
                """
        }
        sql += " WHERE c.seq > ?"
        var arguments: [any DatabaseValueConvertible] = [after]
        if let types = params.recordTypes {
            sql += " AND c.record_type IN (\(databaseQuestionMarks(count: types.count)))"
            arguments += types
        }
        if let kinds = params.kinds {
            sql += " AND c.kind IN (\(databaseQuestionMarks(count: kinds.count)))"
            arguments += kinds.map(\.rawValue)
        } else {
            sql += " AND c.kind <> '\(ChangeKind.credentialChanged.rawValue)'"
        }
        if let families = params.families {
            sql += " AND c.family IN (\(databaseQuestionMarks(count: families.count)))"
            arguments += families
        }
        sql += " ORDER BY c.seq LIMIT \(limit)"
        let head = try StoreDatabase.head(db)
        let rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments))
        var events: [ChangeEvent] = []
        for row in rows {
            let seq: Int64 = row[Column.seq.rawValue]
            let zone: String = row[Column.zone.rawValue]
            let kind = ChangeKind(rawValue: row[Column.kind.rawValue]) ?? .recordSaved
            let recordName: String? = row[Column.recordName.rawValue]
            var record: Record?
            if includeRecords, kind == .recordSaved, (row[Column.record.rawValue] as Int64?) != nil {
                record = try StoredRecord(row, offset: Column.record.rawValue).record(zone: zone)
            }
            let oldFields: String? = includeRecords ? row[Column.oldFields.rawValue] : nil
            events.append(ChangeEvent(
                seq: seq, family: row[Column.family.rawValue], zone: zone, kind: kind, recordType: row[Column.recordType.rawValue], recordName: recordName,
                changeTag: recordName != nil && kind != .credentialChanged ? ChangeLog.changeTag(seq) : nil, record: record, at: Millis.date(row[Column.at.rawValue]),
                created: kind == .recordSaved ? (row[Column.created.rawValue] as Bool?) : nil,
                deletedFields: try oldFields.map(FieldsCoding.decode), deletedBy: kind == .recordDeleted ? row[Column.deletedBy.rawValue] : nil,
                credential: kind == .credentialChanged ? try recordName.flatMap { try CredentialOperations.entry(family: row[Column.family.rawValue], deviceId: $0, db) } : nil))
        }
        let scanned = rows.count == limit ? (events.last?.seq ?? after) : max(head, after)
        return Page(events: events, scannedThrough: scanned)
    }
}
