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
        if let zone = try db.firstRow(cached: "SELECT id, created_at, incarnation, purged_seq FROM zones WHERE family = ? AND name = ? AND deleted = 0",
                                      texts: [family, name], { row in
            ZoneRow(id: row.int64(0), family: family, name: name, createdAt: row.int64(1), incarnation: row.int64(2), purgedSeq: row.int64(3))
        }) {
            return zone
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
    /// Its columns, read by position (it is read for every record fetched, queried and
    /// watched): a query that selects more puts them after these, from ``width`` on.
    static let columns = "r.id, r.name, r.type, r.fields, r.change_tag, r.seq, r.created_at, r.created_by, r.modified_at, r.modified_by, r.deleted"
    static let width = 11

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

    /// Reads the columns of ``columns`` starting at `offset` (from a GRDB `Row`, or straight
    /// from SQLite).
    init(_ row: some ColumnReading, offset: Int = 0) {
        self.id = row.int64(offset)
        self.name = row.text(offset + 1)
        self.type = row.text(offset + 2)
        self.fieldsText = row.text(offset + 3)
        self.changeTag = row.text(offset + 4)
        self.seq = row.int64(offset + 5)
        self.createdAt = row.int64(offset + 6)
        self.createdBy = row.text(offset + 7)
        self.modifiedAt = row.int64(offset + 8)
        self.modifiedBy = row.text(offset + 9)
        self.deleted = row.bool(offset + 10)
    }

    static func find(_ db: Database, zoneID: Int64, name: String) throws -> StoredRecord? {
        try db.firstRow(cached: "SELECT \(columns) FROM records r WHERE r.zone_id = ? AND r.name = ?", arguments: [zoneID, name]) { StoredRecord($0) }
    }

    func fields() throws -> [String: JSONValue] { try FieldsCoding.decode(self.fieldsText) }

    func record(zone: String) throws -> Record {
        self.record(zone: zone, fields: try self.fields())
    }

    /// The record with `fields` in place of its own.
    func record(zone: String, fields: [String: JSONValue]) -> Record {
        Record(
            recordType: self.type, recordName: self.name, zone: zone, fields: fields, changeTag: self.changeTag,
            createdAt: Millis.date(self.createdAt), modifiedAt: Millis.date(self.modifiedAt),
            createdBy: self.createdBy, modifiedBy: self.modifiedBy)
    }
}

/// The rows derived from a record's fields: its index entries, uniqueness keys and
/// `deleteSelf` references. A save changes only the rows its new fields change: every row
/// written is a page in the WAL, and most updates (a day's summary, a balance) leave the
/// indexed values as they were.
enum DerivedRows {
    /// One uniqueness key of a record.
    struct UniqueKey: Sendable, Equatable {
        var constraint: String
        var key: String
    }

    /// The record's uniqueness keys; `conflict` when another record of the family holds
    /// one. `recordID`: the record itself, whose own keys are no conflict.
    static func uniqueKeys(
        _ db: Database, type: RecordTypeDefinition, fields: [String: JSONValue], family: String, recordID: Int64?
    ) throws -> [UniqueKey] {
        var keys: [UniqueKey] = []
        for constraint in type.unique {
            let values = constraint.compactMap { fields[$0] }
            guard values.count == constraint.count else { continue }  // a record without the fields is not constrained
            let key = UniqueKey(constraint: RecordTypeDefinition.constraintName(constraint), key: try FieldsCoding.encodeValue(.array(values)))
            if let holder = try Row.fetchOne(cached: db, sql: """
                SELECT r.id, r.name, z.name AS zone FROM unique_keys u JOIN records r ON r.id = u.record_id JOIN zones z ON z.id = r.zone_id
                WHERE u.family = ? AND u.type = ? AND u.constraint_name = ? AND u.key = ?
                """, arguments: [family, type.name, key.constraint, key.key]), holder["id"] as Int64 != recordID
            {
                let holderName: String = holder["name"]
                let holderZone: String = holder["zone"]
                throw ItemError(
                    code: .conflict,
                    message: "another \(type.name) (\(holderName) in zone \(holderZone)) already has the same \(constraint.joined(separator: " and ")); they must be unique in the family",
                    field: constraint.last)
            }
            keys.append(key)
        }
        return keys
    }

    /// One index entry: a value of an indexed field (its ``FieldDefinition/indexKey``).
    private struct IndexEntry: Hashable {
        var key: Int64
        var value: DatabaseValue
    }

    /// One `deleteSelf` reference's target.
    private struct Reference: Hashable {
        var zone: String
        var name: String
    }

    /// The index entries of a record of `type` with `fields`: what it holds in
    /// `field_index`. A record's entries are always found this way, from its fields, never
    /// by a lookup by record (there is no index by record to keep up at every save).
    private static func indexEntries(_ type: RecordTypeDefinition, _ fields: [String: JSONValue]) -> [IndexEntry] {
        var entries: [IndexEntry] = []
        for field in type.fields where field.hasIndexEntries {
            guard let value = fields[field.name] else { continue }
            for indexValue in FieldValues.indexValues(value, type: field.type) { entries.append(IndexEntry(key: field.indexKey, value: indexValue)) }
        }
        return entries
    }

    /// Writes the derived rows of a record whose uniqueness keys were checked
    /// (``uniqueKeys(_:type:fields:family:recordID:)``). `isNew`: the record has no derived
    /// rows yet (a new record, or a tombstone saved again). Otherwise `held` are the fields
    /// its index entries were derived from (nil: unknown, so every entry is inserted if
    /// missing and none deleted, as when a new index is backfilled), and its references and
    /// uniqueness keys are read; only the rows that differ are deleted and inserted (reads
    /// write no page).
    static func write(
        _ db: Database, recordID: Int64, type: RecordTypeDefinition, fields: [String: JSONValue], at location: RecordLocation,
        uniqueKeys: [UniqueKey], isNew: Bool, held: [String: JSONValue]?
    ) throws {
        var entries = indexEntries(type, fields)
        var references: [Reference] = []
        for field in type.fields where field.type == .reference && field.referenceAction == .deleteSelf {
            if case .string(let targetName)? = fields[field.name]?["recordName"], case .string(let targetZone)? = fields[field.name]?["zone"] {
                references.append(Reference(zone: targetZone, name: targetName))
            }
        }

        var keys = uniqueKeys
        if !isNew {
            if let held {
                let heldEntries = Set(indexEntries(type, held))
                try deleteIndexEntries(db, heldEntries.subtracting(entries), zoneID: location.zoneID, recordID: recordID)
                entries.removeAll { heldEntries.contains($0) }
            }

            let heldReferences = try Row.fetchAll(cached: db, sql: "SELECT target_zone, target_name FROM refs WHERE record_id = ?", arguments: [recordID])
                .map { Reference(zone: $0[0], name: $0[1]) }
            if heldReferences != references {
                try db.execute(cached: "DELETE FROM refs WHERE record_id = ?", arguments: [recordID])
            } else {
                references = []
            }

            let heldKeys = try Row.fetchAll(cached: db, sql: "SELECT constraint_name, key FROM unique_keys WHERE record_id = ? ORDER BY constraint_name", arguments: [recordID])
                .map { UniqueKey(constraint: $0[0], key: $0[1]) }
            if heldKeys != uniqueKeys.sorted(by: { $0.constraint < $1.constraint }) {
                try db.execute(cached: "DELETE FROM unique_keys WHERE record_id = ?", arguments: [recordID])
            } else {
                keys = []
            }
        }
        try insertIndexEntries(db, entries[...], zoneID: location.zoneID, recordID: recordID)
        for reference in references {
            try db.execute(cached: "INSERT INTO refs(record_id, family, target_zone, target_name) VALUES (?, ?, ?, ?)",
                arguments: [recordID, location.family, reference.zone, reference.name])
        }
        for key in keys {
            try db.execute(cached: "INSERT INTO unique_keys(family, type, constraint_name, key, record_id) VALUES (?, ?, ?, ?, ?)",
                arguments: [location.family, type.name, key.constraint, key.key, recordID])
        }
    }

    /// Each entry by its whole key.
    private static func deleteIndexEntries(_ db: Database, _ entries: some Collection<IndexEntry>, zoneID: Int64, recordID: Int64) throws {
        for entry in entries {
            try db.execute(cached: "DELETE FROM field_index WHERE key = ? AND value = ? AND zone_id = ? AND record_id = ?",
                arguments: [entry.key, entry.value, zoneID, recordID])
        }
    }

    /// Index entries go in a few rows per statement: one statement per entry cost more in
    /// binding and stepping than SQLite spent inserting.
    private static let entriesPerStatement = 8
    /// By count: `?1` the zone, `?2` the record, then key and value per row.
    private static let insertIndexSQL = (0...entriesPerStatement).map { count in
        "INSERT OR IGNORE INTO field_index(key, value, zone_id, record_id) VALUES "
            + (0..<count).map { "(?\(3 + 2 * $0), ?\(4 + 2 * $0), ?1, ?2)" }.joined(separator: ", ")
    }

    private static func insertIndexEntries(_ db: Database, _ entries: ArraySlice<IndexEntry>, zoneID: Int64, recordID: Int64) throws {
        var rest = entries
        while !rest.isEmpty {
            let chunk = rest.prefix(entriesPerStatement)
            rest = rest.dropFirst(chunk.count)
            // As optionals of the protocol: GRDB's initializer for those maps with a closure;
            // the one for [DatabaseValue] maps with a key path, which unspecialised (it is
            // not inlinable) cost a tenth of the writer thread.
            var values: [(any DatabaseValueConvertible)?] = [zoneID, recordID]
            values.reserveCapacity(2 + 2 * chunk.count)
            for entry in chunk {
                values.append(entry.key)
                values.append(entry.value)
            }
            try db.execute(cached: insertIndexSQL[chunk.count], arguments: StatementArguments(values))
        }
    }

    /// Checks and writes what is missing (a migration adding an index or a uniqueness
    /// constraint to existing records).
    static func backfill(_ db: Database, recordID: Int64, type: RecordTypeDefinition, fields: [String: JSONValue], at location: RecordLocation) throws {
        let keys = try uniqueKeys(db, type: type, fields: fields, family: location.family, recordID: recordID)
        try write(db, recordID: recordID, type: type, fields: fields, at: location, uniqueKeys: keys, isNew: false, held: nil)
    }

    /// Removes the derived rows of a live record of `type` whose fields are `fields`.
    static func remove(_ db: Database, recordID: Int64, type: RecordTypeDefinition?, fields: [String: JSONValue], zoneID: Int64) throws {
        if let type {
            try deleteIndexEntries(db, indexEntries(type, fields), zoneID: zoneID, recordID: recordID)
        }
        try db.execute(cached: "DELETE FROM unique_keys WHERE record_id = ?", arguments: [recordID])
        try db.execute(cached: "DELETE FROM refs WHERE record_id = ?", arguments: [recordID])
    }

    /// Removes the index entries of every record of a zone (its records are being deleted:
    /// the index has no key by zone or record, so this reads the whole index once).
    static func removeIndexEntries(ofZone zoneID: Int64, _ db: Database) throws {
        try db.execute(cached: "DELETE FROM field_index WHERE zone_id = ?", arguments: [zoneID])
    }
}

/// The change log: every change gets the next sequence number; a record change's tag is
/// that number in base 36.
enum ChangeLog {
    /// Logs a change. A zone's own event (created, deleted, shared) also becomes the zone's
    /// latest change in its row; a record's change is found through the record (its `seq`),
    /// so saving one does not rewrite the zone's row.
    @discardableResult
    static func append(
        _ db: Database, zone: ZoneRow, kind: ChangeKind, recordType: String? = nil, recordName: String? = nil,
        created: Bool? = nil, oldFields: String? = nil, at now: Int64
    ) throws -> Int64 {
        let seq = try StoreDatabase.head(db) + 1
        try db.execute(cached: "INSERT INTO changes(seq, family, zone, kind, record_type, record_name, created, old_fields, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [seq, zone.family, zone.name, kind.rawValue, recordType, recordName, created, oldFields, now])
        switch kind {
        case .zoneCreated, .zoneDeleted, .shareChanged:
            try db.execute(cached: "UPDATE zones SET change_seq = ? WHERE id = ?", arguments: [seq, zone.id])
        case .recordSaved, .recordDeleted, .credentialChanged:
            break
        }
        return seq
    }

    /// Logs a change of a device's credential: in no zone, so no zone's change token moves.
    static func appendCredential(_ db: Database, family: String, deviceId: String, at now: Int64) throws -> Int64 {
        let seq = try StoreDatabase.head(db) + 1
        try db.execute(cached: "INSERT INTO changes(seq, family, zone, kind, record_name, at) VALUES (?, ?, '', ?, ?, ?)",
            arguments: [seq, family, ChangeKind.credentialChanged.rawValue, deviceId, now])
        return seq
    }

    static func changeTag(_ seq: Int64) -> String { String(seq, radix: 36) }
}
