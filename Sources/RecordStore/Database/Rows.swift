import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// A live zone.
struct ZoneRow: Sendable, Hashable {
    var id: Int64
    var family: String
    var name: String
    var createdAt: Int64
    var incarnation: Int64
    var purgedSeq: Int64

    var location: RecordLocation { RecordLocation(family: self.family, zone: self.name, zoneID: self.id) }

    /// The live zone, or `not_found` naming what is missing (the family or the zone).
    static func find(_ db: Database, family: String, name: String) throws -> ZoneRow {
        if let row = try Row.fetchOne(cached: db, sql: "SELECT id, created_at, incarnation, purged_seq FROM zones WHERE family = ? AND name = ? AND deleted = 0",
            arguments: [family, name])
        {
            return ZoneRow(id: row[0], family: family, name: name, createdAt: row[1], incarnation: row[2], purgedSeq: row[3])
        }
        try FamilyRow.require(db, family)
        throw RPCError(.notFound, "zone \(name) does not exist in family \(family)", data: ["zone": .string(name)])
    }
}

enum FamilyRow {
    static func exists(_ db: Database, _ family: String) throws -> Bool {
        try Bool.fetchOne(cached: db, sql: "SELECT 1 FROM families WHERE id = ?", arguments: [family]) ?? false
    }

    static func require(_ db: Database, _ family: String) throws {
        guard try exists(db, family) else {
            throw RPCError(.notFound, "family \(family) does not exist", data: ["family": .string(family)])
        }
    }
}

/// Where a record lives.
struct RecordLocation: Sendable, Hashable {
    var family: String
    var zone: String
    var zoneID: Int64
}

/// A record as stored.
struct StoredRecord: Sendable {
    static let columns = "r.id, r.name, r.type, r.fields, r.change_tag, r.seq, r.created_at, r.created_by, r.modified_at, r.modified_by, r.deleted"

    var id: Int64
    var name: String
    var type: String
    var fieldsText: String
    var changeTag: String
    var seq: Int64
    var createdAt: Int64
    var createdBy: String
    var modifiedAt: Int64
    var modifiedBy: String
    var deleted: Bool

    /// Reads the columns of ``columns`` starting at `offset`.
    init(_ row: Row, offset: Int = 0) {
        self.id = row[offset]
        self.name = row[offset + 1]
        self.type = row[offset + 2]
        self.fieldsText = row[offset + 3]
        self.changeTag = row[offset + 4]
        self.seq = row[offset + 5]
        self.createdAt = row[offset + 6]
        self.createdBy = row[offset + 7]
        self.modifiedAt = row[offset + 8]
        self.modifiedBy = row[offset + 9]
        self.deleted = row[offset + 10]
    }

    static func find(_ db: Database, zoneID: Int64, name: String) throws -> StoredRecord? {
        try Row.fetchOne(cached: db, sql: "SELECT \(columns) FROM records r WHERE r.zone_id = ? AND r.name = ?", arguments: [zoneID, name])
            .map { StoredRecord($0) }
    }

    func fields() throws -> [String: JSONValue] { try FieldsCoding.decode(self.fieldsText) }

    func record(zone: String) throws -> Record {
        Record(
            recordType: self.type, recordName: self.name, zone: zone, fields: try self.fields(), changeTag: self.changeTag,
            createdAt: Millis.date(self.createdAt), modifiedAt: Millis.date(self.modifiedAt),
            createdBy: self.createdBy, modifiedBy: self.modifiedBy)
    }
}

/// Times are stored as milliseconds since 1970.
enum Millis {
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
}

/// The rows derived from a record's fields: its index entries, uniqueness keys and
/// `deleteSelf` references. Rebuilt on every save.
enum DerivedRows {
    /// `isNew`: the record row was just inserted, so it has no derived rows to remove.
    static func replace(
        _ db: Database, recordID: Int64, type: RecordTypeDefinition, fields: [String: JSONValue], at location: RecordLocation, isNew: Bool = false
    ) throws {
        if !isNew { try remove(db, recordID: recordID) }
        for field in type.fields {
            guard let value = fields[field.name] else { continue }
            if field.indexed {
                for indexValue in FieldValues.indexValues(value, type: field.type) {
                    try db.execute(cached: "INSERT OR IGNORE INTO field_index(type, field, value, zone_id, record_id) VALUES (?, ?, ?, ?, ?)",
                        arguments: [type.name, field.name, indexValue, location.zoneID, recordID])
                }
            }
            if field.type == .reference, field.referenceAction == .deleteSelf,
                case .string(let targetName)? = value["recordName"], case .string(let targetZone)? = value["zone"]
            {
                try db.execute(cached: "INSERT INTO refs(record_id, family, target_zone, target_name) VALUES (?, ?, ?, ?)",
                    arguments: [recordID, location.family, targetZone, targetName])
            }
        }
        for constraint in type.unique {
            let values = constraint.compactMap { fields[$0] }
            guard values.count == constraint.count else { continue }  // a record without the fields is not constrained
            let key = try FieldsCoding.encodeValue(.array(values))
            let name = RecordTypeDefinition.constraintName(constraint)
            if let holder = try Row.fetchOne(cached: db, sql: """
                SELECT r.name, z.name FROM unique_keys u JOIN records r ON r.id = u.record_id JOIN zones z ON z.id = r.zone_id
                WHERE u.family = ? AND u.type = ? AND u.constraint_name = ? AND u.key = ?
                """, arguments: [location.family, type.name, name, key])
            {
                let holderName: String = holder[0]
                let holderZone: String = holder[1]
                throw ItemError(
                    code: .conflict,
                    message: "another \(type.name) (\(holderName) in zone \(holderZone)) already has the same \(constraint.joined(separator: " and ")); they must be unique in the family",
                    field: constraint.last)
            }
            try db.execute(cached: "INSERT INTO unique_keys(family, type, constraint_name, key, record_id) VALUES (?, ?, ?, ?, ?)",
                arguments: [location.family, type.name, name, key, recordID])
        }
    }

    static func remove(_ db: Database, recordID: Int64) throws {
        try db.execute(cached: "DELETE FROM field_index WHERE record_id = ?", arguments: [recordID])
        try db.execute(cached: "DELETE FROM unique_keys WHERE record_id = ?", arguments: [recordID])
        try db.execute(cached: "DELETE FROM refs WHERE record_id = ?", arguments: [recordID])
    }
}

/// The change log: every change gets the next sequence number; a record change's tag is
/// that number in base 36.
enum ChangeLog {
    @discardableResult
    static func append(
        _ db: Database, zone: ZoneRow, kind: ChangeKind, recordType: String? = nil, recordName: String? = nil,
        created: Bool? = nil, oldFields: String? = nil, at now: Int64
    ) throws -> Int64 {
        try db.execute(cached: "INSERT INTO changes(family, zone, kind, record_type, record_name, created, old_fields, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [zone.family, zone.name, kind.rawValue, recordType, recordName, created, oldFields, now])
        let seq = db.lastInsertedRowID
        try db.execute(cached: "UPDATE zones SET change_seq = ? WHERE id = ?", arguments: [seq, zone.id])
        return seq
    }

    static func changeTag(_ seq: Int64) -> String { String(seq, radix: 36) }
}
