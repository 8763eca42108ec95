import Foundation
import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// `store.modify` inside a write transaction: the idempotency check, then each save and
/// delete, then (atomic) all-or-nothing.
///
/// Each item is first checked against the database (`check…`: every refusal of the item
/// happens here, before it writes anything), then written (`write…`: only storage errors,
/// which fail the whole call). So an item refused leaves nothing behind without a savepoint
/// of its own: a savepoint per item copied every page it touched into SQLite's statement
/// journal and was most of the cost of a bulk save.
struct ModifyOperation: Sendable {
    let schema: SchemaRegistry
    let principal: Principal
    let params: ModifyParams
    /// One per save, from ``prepare(_:schema:)``.
    let prepared: [PreparedSave]
    let now: Int64

    /// What a save's fields become, worked out before the write is queued: none of it needs
    /// the database, and the writer (one thread for the whole store) is what bounds bulk
    /// saves. Refusals are kept, not thrown, so that each item still reports its first
    /// problem in the order the checks run.
    struct PreparedSave: Sendable {
        var type: RecordTypeDefinition?
        /// The fields sent, in canonical form (nil: the field is removed).
        var incoming: Result<[String: JSONValue?], ItemError>
        /// The record's fields and their stored text when they are just the ones sent (any
        /// policy but changedKeys; a new record that gets a migration's default is encoded
        /// again).
        var plain: (fields: [String: JSONValue], text: String)?
    }

    static func prepare(_ params: ModifyParams, schema: SchemaRegistry) throws -> [PreparedSave] {
        try (params.saves ?? []).map { save in
            guard let type = schema[save.recordType] else { return PreparedSave(type: nil, incoming: .success([:])) }
            var incoming: [String: JSONValue?] = [:]
            do {
                for name in save.fields.keys.sorted() {
                    guard let field = type.field(name) else {
                        throw ItemError(code: .invalidParams,
                            message: "\(type.name) has no field \(name); its fields are \(type.fields.map(\.name).joined(separator: ", "))", field: name)
                    }
                    let value = save.fields[name]!
                    incoming[name] = value == .null ? .some(nil) : try FieldValues.normalize(value, as: field, zone: params.zone)
                }
            } catch let error as ItemError {
                return PreparedSave(type: type, incoming: .failure(error))
            }
            var plain: (fields: [String: JSONValue], text: String)?
            if params.savePolicy != .changedKeys {
                let fields = incoming.compactMapValues { $0 }
                plain = (fields, try FieldsCoding.encode(fields))
            }
            return PreparedSave(type: type, incoming: .success(incoming), plain: plain)
        }
    }

    /// Checks that need no database; run before queueing the write.
    static func validate(_ params: ModifyParams) throws {
        let saves = params.saves ?? []
        let deletes = params.deletes ?? []
        guard saves.count + deletes.count <= ModifyParams.maximumItems else {
            throw RPCError(.limitExceeded, "a batch holds at most \(ModifyParams.maximumItems) saves and deletes; this one has \(saves.count + deletes.count): split it",
                data: ["limit": .int(Int64(ModifyParams.maximumItems))])
        }
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        // Each record at most once per batch, saves and deletes alike. A name that is not a
        // record name at all fails its own item (``checkName(_:)``), as other item errors do.
        let items = saves.enumerated().map { ("params.saves[\($0)]", $1.recordName) }
            + deletes.enumerated().map { ("params.deletes[\($0)]", $1.recordName) }
        var seen: [String: String] = [:]
        for (path, name) in items where Names.isValidIdentifier(name) {
            if let other = seen.updateValue(path, forKey: name) {
                throw RPCError.invalidParams("\(path).recordName", "\"\(name)\" is also in \(other); a batch may touch a record once")
            }
        }
        if let requestId = params.requestId { try Validation.identifier(requestId, "params.requestId") }
    }

    func run(_ db: Database) throws -> ModifyResult {
        // Only a batch with a request id is remembered, so only then is it hashed.
        let paramsHash = try self.params.requestId.map { _ in try Self.hash(self.params) }
        if let requestId = self.params.requestId, let stored = try Row.fetchOne(cached: db, sql: """
            SELECT params_sha256, result FROM idempotency WHERE family = ? AND principal = ? AND request_id = ?
            """, arguments: [self.params.family, self.principal.name, requestId])
        {
            guard stored["params_sha256"] as String == paramsHash else {
                throw RPCError(.conflict, "requestId \(requestId) was already used for a different batch; use a new request id for new changes",
                    data: ["requestId": .string(requestId)])
            }
            var result = try RPCJSON.decode(ModifyResult.self, from: stored["result"] as String)
            result.replayed = true
            return result
        }

        let zone = try ZoneRow.find(db, family: self.params.family, name: self.params.zone)
        try AccessControl.requireWrite(self.principal, zone, in: db)

        var failures: [ItemFailure] = []
        var cascaded: [RecordID] = []
        var saved: [SaveOutcome] = []
        saved.reserveCapacity(self.params.saves?.count ?? 0)
        for (index, save) in (self.params.saves ?? []).enumerated() {
            do {
                let checked = try self.checkSave(save, self.prepared[index], in: zone, db)
                if let live = checked.live, checked.unchanged {
                    // The same content again is no change: no new change tag, nothing in the
                    // change feed, so no notification.
                    saved.append(SaveOutcome(recordName: save.recordName, record: try live.record(zone: zone.name)))
                    continue
                }
                let record = try self.write(checked, in: zone, db)
                saved.append(SaveOutcome(recordName: save.recordName, record: record))
            } catch let error as ItemError {
                failures.append(ItemFailure(kind: "save", index: index, recordName: save.recordName, error: error))
                saved.append(SaveOutcome(recordName: save.recordName, error: error))
            }
        }
        var deleted: [DeleteOutcome] = []
        for (index, delete) in (self.params.deletes ?? []).enumerated() {
            do {
                guard let existing = try self.checkDelete(delete, in: zone, db) else {
                    deleted.append(DeleteOutcome(recordName: delete.recordName, deleted: false))
                    continue
                }
                try Tombstones.delete(existing, in: zone, schema: self.schema, by: self.principal, at: self.now, db)
                cascaded += try Tombstones.cascade(from: RecordID(zone: zone.name, recordName: existing.name), family: zone.family, schema: self.schema,
                                                   by: self.principal, at: self.now, db)
                deleted.append(DeleteOutcome(recordName: delete.recordName, deleted: true))
            } catch let error as ItemError {
                failures.append(ItemFailure(kind: "delete", index: index, recordName: delete.recordName, error: error))
                deleted.append(DeleteOutcome(recordName: delete.recordName, error: error))
            }
        }

        if self.params.atomic == true, let first = failures.first {
            // Thrown out of the write: the group commit rolls back everything above.
            throw RPCError(
                first.error.code,
                "the atomic batch was not applied: \(failures.count) of \(saved.count + deleted.count) items failed; first, \(first.kind) of \(first.recordName): \(first.error.message)",
                data: ["failures": try JSONValue(encoding: failures)])
        }
        let result = ModifyResult(saved: saved, deleted: deleted, cascaded: cascaded, replayed: false)
        if let requestId = self.params.requestId, let paramsHash {
            try db.execute(cached: """
                INSERT INTO idempotency(family, principal, request_id, params_sha256, result, created_at) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [self.params.family, self.principal.name, requestId, paramsHash,
                                 try RPCJSON.encodeText(result), self.now])
        }
        return result
    }

    // MARK: Saves

    /// A save that passed every check and is ready to write.
    private struct CheckedSave {
        var save: RecordSave
        var type: RecordTypeDefinition
        /// The record's row, live or a tombstone.
        var existing: StoredRecord?
        var live: StoredRecord?
        var fields: [String: JSONValue]
        var fieldsText: String
        var uniqueKeys: [DerivedRows.UniqueKey]
        /// The live record's fields before this save.
        var before: [String: JSONValue]?
        /// A live record's fields are exactly these already.
        var unchanged: Bool
    }

    /// Everything that can refuse a save (`ItemError`), without writing.
    private func checkSave(_ save: RecordSave, _ prepared: PreparedSave, in zone: ZoneRow, _ db: Database) throws -> CheckedSave {
        try Self.checkName(save.recordName)
        guard let type = prepared.type else {
            throw ItemError(code: .invalidParams, message: "\"\(save.recordType)\" is not a known record type; known: \(self.schema.order.joined(separator: ", "))", field: "recordType")
        }
        let existing = try StoredRecord.find(db, zoneID: zone.id, name: save.recordName)
        let live = existing.flatMap { $0.deleted ? nil : $0 }
        if let live, live.type != type.name {
            throw ItemError(code: .conflict, message: "record \(save.recordName) exists with type \(live.type), not \(type.name)",
                field: "recordType", serverRecord: try live.record(zone: zone.name))
        }
        let policy = self.params.savePolicy ?? .ifServerRecordUnchanged
        if policy == .ifServerRecordUnchanged {
            switch (live, save.changeTag) {
            case (nil, .some):
                throw ItemError(code: .conflict, message: "record \(save.recordName) no longer exists on the server; save it again without a changeTag to recreate it")
            case (let live?, let tag) where tag != live.changeTag:
                throw ItemError(
                    code: .conflict,
                    message: tag == nil
                        ? "record \(save.recordName) already exists; fetch it (serverRecord) and save with its changeTag, or use savePolicy changedKeys"
                        : "record \(save.recordName) changed on the server since change tag \(tag!); rebase onto serverRecord and save again",
                    serverRecord: try live.record(zone: zone.name))
            default:
                break
            }
        }

        let incoming = try prepared.incoming.get()
        let before = try live?.fields()
        var merged: [String: JSONValue]
        var text: String?
        if let plain = prepared.plain {
            merged = plain.fields
            text = plain.text
        } else if policy == .changedKeys {
            merged = before ?? [:]
            for (name, value) in incoming {
                guard let value else {
                    merged.removeValue(forKey: name)
                    continue
                }
                if type.field(name)!.mergeAsSet, case .array(let old)? = merged[name], case .array(let new) = value {
                    merged[name] = .array(old + new.filter { !old.contains($0) })
                } else {
                    merged[name] = value
                }
            }
        } else {
            merged = incoming.compactMapValues { $0 }
        }
        if live == nil {
            // Fields added by a migration with a default get it in new records too.
            for field in type.fields where merged[field.name] == nil && field.defaultValue != nil && incoming[field.name] == nil {
                merged[field.name] = field.defaultValue
                text = nil
            }
        }
        for field in type.fields where field.required && merged[field.name] == nil {
            throw ItemError(code: .invalidParams, message: "field \(field.name) is required for \(type.name) records", field: field.name)
        }
        if let check = type.notInFuture {
            let offset = ClockCheck.offsetSeconds(deviceClock: self.params.deviceClock, now: self.now)
            // A clock right to the minute is no offset: the field is absent.
            // (`Optional.none`, not `nil`: JSONValue takes a nil literal as its own `null`.)
            let written: JSONValue? = offset.map { $0 == 0 ? Optional.none : .int($0) } ?? Optional.none
            if merged[check.offsetField] != written {
                merged[check.offsetField] = written
                text = nil
            }
            if before != merged, let refusal = check.refusal(merged, offsetSeconds: offset ?? 0, now: self.now) { throw refusal }
        }
        if case .device = self.principal {
            for (field, values) in type.serverOnlyValues {
                if let value = merged[field]?.stringValue, values.contains(value), merged[field] != before?[field] {
                    throw ItemError(code: .forbidden, message: "\(type.name) records with \(field) \(value) are the server's own; devices may write \(field) \(Set(type.field(field)?.allowedValues ?? []).subtracting(values).sorted().joined(separator: " or "))", field: field)
                }
            }
        }
        if case .device(let device) = self.principal, device.role == .child {
            try AccessControl.checkChildSave(device, type: type, existing: before, merged: merged)
        }

        if type.appendOnly, let before, before != merged {
            throw ItemError(code: .conflict, message: "\(type.name) records are never changed once written; post a new entry instead (an adjustment or a redemption)",
                serverRecord: try live?.record(zone: zone.name))
        }
        if let before, before == merged {
            return CheckedSave(save: save, type: type, existing: existing, live: live, fields: merged, fieldsText: "", uniqueKeys: [], before: before, unchanged: true)
        }
        let uniqueKeys = try DerivedRows.uniqueKeys(db, type: type, fields: merged, family: zone.family, recordID: existing?.id)
        return CheckedSave(save: save, type: type, existing: existing, live: live, fields: merged,
                           fieldsText: try text ?? FieldsCoding.encode(merged), uniqueKeys: uniqueKeys, before: before, unchanged: false)
    }

    /// Writes a checked save, all but moving the zone's latest change; throws only storage
    /// errors.
    private func write(_ checked: CheckedSave, in zone: ZoneRow, _ db: Database) throws -> Record {
        let (save, type, live) = (checked.save, checked.type, checked.live)
        let seq = try ChangeLog.append(db, zone: zone, kind: .recordSaved, recordType: type.name, recordName: save.recordName,
                                       created: live == nil, at: self.now)
        let tag = ChangeLog.changeTag(seq)
        let recordID: Int64
        let createdAt = live?.createdAt ?? self.now
        let createdBy = live?.createdBy ?? self.principal.name
        if let existing = checked.existing, existing.type == type.name {
            // The type is left out when it stays: SQLite rewrites the entry of every index
            // over a column the statement sets, changed or not (records_by_type's page).
            recordID = existing.id
            try db.execute(cached: """
                UPDATE records SET fields = ?, change_tag = ?, seq = ?, created_at = ?, created_by = ?,
                    modified_at = ?, modified_by = ?, deleted = 0 WHERE id = ?
                """, arguments: [checked.fieldsText, tag, seq, createdAt, createdBy, self.now, self.principal.name, recordID])
        } else if let existing = checked.existing {
            recordID = existing.id
            try db.execute(cached: """
                UPDATE records SET type = ?, fields = ?, change_tag = ?, seq = ?, created_at = ?, created_by = ?,
                    modified_at = ?, modified_by = ?, deleted = 0 WHERE id = ?
                """, arguments: [type.name, checked.fieldsText, tag, seq, createdAt, createdBy, self.now, self.principal.name, recordID])
        } else {
            try db.execute(cached: """
                INSERT INTO records(zone_id, name, type, fields, change_tag, seq, created_at, created_by, modified_at, modified_by)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [zone.id, save.recordName, type.name, checked.fieldsText, tag, seq, createdAt, createdBy, self.now, self.principal.name])
            recordID = db.lastInsertedRowID
        }
        // A tombstone has no derived rows: its deletion removed them.
        try DerivedRows.write(db, recordID: recordID, type: type, fields: checked.fields, at: zone.location,
                              uniqueKeys: checked.uniqueKeys, isNew: live == nil, held: checked.before)
        let record = Record(
            recordType: type.name, recordName: save.recordName, zone: zone.name, fields: checked.fields, changeTag: tag,
            createdAt: Millis.date(createdAt), modifiedAt: Millis.date(self.now), createdBy: createdBy, modifiedBy: self.principal.name)
        return record
    }

    // MARK: Deletes

    /// Everything that can refuse a delete (`ItemError`), without writing; nil when the
    /// record is already deleted.
    private func checkDelete(_ delete: RecordDelete, in zone: ZoneRow, _ db: Database) throws -> StoredRecord? {
        try Self.checkName(delete.recordName)
        guard let existing = try StoredRecord.find(db, zoneID: zone.id, name: delete.recordName) else {
            throw ItemError(code: .notFound, message: "no record \(delete.recordName) in zone \(zone.name)")
        }
        if existing.deleted { return nil }
        if let tag = delete.changeTag, tag != existing.changeTag {
            throw ItemError(code: .conflict, message: "record \(delete.recordName) changed on the server since change tag \(tag); not deleted",
                serverRecord: try existing.record(zone: zone.name))
        }
        if case .device(let device) = self.principal {
            if self.schema[existing.type]?.appendOnly == true {
                throw ItemError(code: .forbidden, message: "\(existing.type) records are never deleted from a device; post a new entry instead (an adjustment or a redemption)")
            }
            if device.role == .child {
                try AccessControl.checkChildDelete(device, type: self.schema[existing.type], existing: try existing.fields())
            }
        }
        return existing
    }

    /// A record name is 1 to 255 bytes without control characters; another fails its item.
    private static func checkName(_ name: String) throws(ItemError) {
        guard Names.isValidIdentifier(name) else {
            throw ItemError(code: .invalidParams,
                message: "recordName must be 1 to 255 bytes without control characters; this one has \(name.utf8.count) bytes\(name.unicodeScalars.contains { $0.properties.generalCategory == .control } ? " and a control character" : "")",
                field: "recordName")
        }
    }

    /// The same request is the same whatever clock it was sent at (a retry stamps its own).
    static func hash(_ params: ModifyParams) throws -> String {
        var request = params
        request.deviceClock = nil
        // The same text as earlier versions hashed (keys sorted, slashes as they are): a
        // retry over an upgrade is still the same request.
        return SHA256Hex.of(Data(try RPCJSON.encodeSorted(request)))
    }
}

/// Deletion: a tombstone that change feeds report until it is purged.
enum Tombstones {
    static func delete(_ record: StoredRecord, in zone: ZoneRow, schema: SchemaRegistry, by principal: Principal, at now: Int64, _ db: Database) throws {
        let seq = try ChangeLog.append(db, zone: zone, kind: .recordDeleted, recordType: record.type, recordName: record.name,
                                       oldFields: record.fieldsText, at: now)
        try db.execute(cached: """
            UPDATE records SET deleted = 1, fields = '{}', change_tag = ?, seq = ?, modified_at = ?, modified_by = ? WHERE id = ?
            """, arguments: [ChangeLog.changeTag(seq), seq, now, principal.name, record.id])
        try DerivedRows.remove(db, recordID: record.id, type: schema[record.type], fields: try record.fields(), zoneID: zone.id)
    }

    /// Deletes every live record that references `target` with `deleteSelf`, and what
    /// references those in turn.
    static func cascade(
        from target: RecordID, family: String, schema: SchemaRegistry, by principal: Principal, at now: Int64, _ db: Database
    ) throws -> [RecordID] {
        var deleted: [RecordID] = []
        var work = [target]
        while let next = work.popLast() {
            let rows = try Row.fetchAll(cached: db, sql: """
                SELECT \(StoredRecord.columns), z.id AS zone_id, z.name AS zone_name, z.created_at AS zone_created_at,
                    z.incarnation AS zone_incarnation, z.purged_seq AS zone_purged_seq
                FROM refs f JOIN records r ON r.id = f.record_id JOIN zones z ON z.id = r.zone_id
                WHERE f.family = ? AND f.target_zone = ? AND f.target_name = ? AND r.deleted = 0
                """, arguments: [family, next.zone, next.recordName])
            for row in rows {
                let record = StoredRecord(row)
                let zone = ZoneRow(id: row["zone_id"], family: family, name: row["zone_name"], createdAt: row["zone_created_at"],
                                   incarnation: row["zone_incarnation"], purgedSeq: row["zone_purged_seq"])
                try delete(record, in: zone, schema: schema, by: principal, at: now, db)
                let id = RecordID(zone: zone.name, recordName: record.name, recordType: record.type)
                deleted.append(id)
                work.append(id)
            }
        }
        return deleted
    }
}
