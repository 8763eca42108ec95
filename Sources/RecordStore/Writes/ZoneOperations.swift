import DurableSQLite
import GRDB
import RPCCore
import StoreAPI

/// Families, zones and shares.
enum ZoneOperations {
    static func createFamily(_ family: String, now: Int64, _ db: Database) throws -> FamilyInfo {
        guard try !FamilyRow.exists(db, family) else {
            throw RPCError(.conflict, "family \(family) already exists", data: ["family": .string(family)])
        }
        try db.execute(cached: "INSERT INTO families(id, created_at) VALUES (?, ?)", arguments: [family, now])
        _ = try createZone(family: family, name: Names.defaultZone, now: now, db)
        return FamilyInfo(family: family, createdAt: Millis.date(now), zones: 1)
    }

    static func listFamilies(_ db: Database) throws -> [FamilyInfo] {
        let family = FamiliesTable.Columns.self, zone = ZonesTable.Columns.self
        var zones: [String: Int] = [:]
        for row in try Row.fetchAll(db, ZonesTable.filter(zone.deleted == false).select(zone.family, count(zone.id).forKey("zones")).group(zone.family)) {
            zones[row[zone.family]] = row["zones"]
        }
        return try Row.fetchAll(db, FamiliesTable.select(family.id, family.createdAt).order(family.createdAt, family.id)).map { row in
            FamilyInfo(family: row[family.id], createdAt: Millis.date(row[family.createdAt]), zones: zones[row[family.id]] ?? 0)
        }
    }

    static func createZone(family: String, name: String, now: Int64, _ db: Database) throws -> ZoneRow {
        try FamilyRow.require(db, family)
        if let row = try Row.fetchOne(cached: db, sql: "SELECT id, deleted, incarnation FROM zones WHERE family = ? AND name = ?", arguments: [family, name]) {
            guard row["deleted"] as Bool else {
                throw RPCError(.conflict, "zone \(name) already exists in family \(family)", data: ["zone": .string(name)])
            }
            // A deleted zone created again: a new incarnation, so old change tokens expire.
            try db.execute(cached: """
                UPDATE zones SET deleted = 0, deleted_at = NULL, created_at = ?, incarnation = incarnation + 1, purged_seq = 0 WHERE id = ?
                """, arguments: [now, row["id"] as Int64])
        } else {
            try db.execute(cached: "INSERT INTO zones(family, name, created_at, change_seq) VALUES (?, ?, ?, 0)", arguments: [family, name, now])
        }
        let zone = try ZoneRow.find(db, family: family, name: name)
        try ChangeLog.append(db, zone: zone, kind: .zoneCreated, at: now)
        return zone
    }

    static func deleteZone(_ zone: ZoneRow, schema: SchemaRegistry, principal: Principal, now: Int64, _ db: Database) throws -> Int {
        let records = RecordsTable.filter(RecordsTable.Columns.zoneID == zone.id)
        let count = try records.filter(RecordsTable.Columns.deleted == false).fetchCount(db)
        try DerivedRows.removeIndexEntries(ofZone: zone.id, db)
        try records.deleteAll(db)
        try SharesTable.of(zone.id).deleteAll(db)
        try ZonesTable.filter(key: zone.id).updateAll(db, ZonesTable.Columns.deleted.set(to: true), ZonesTable.Columns.deletedAt.set(to: now))
        try ChangeLog.append(db, zone: zone, kind: .zoneDeleted, at: now)
        // Records elsewhere that referenced this zone's records with deleteSelf go too.
        let ref = RefsTable.Columns.self
        let targets = try RefsTable.filter(ref.family == zone.family && ref.targetZone == zone.name).select(ref.targetName, as: String.self).distinct().fetchAll(db)
        for target in targets {
            _ = try Tombstones.cascade(from: RecordID(zone: zone.name, recordName: target), family: zone.family, schema: schema, by: principal, at: now, db)
        }
        return count
    }

    static func listZones(family: String, principal: Principal, _ db: Database) throws -> [ZoneInfo] {
        try FamilyRow.require(db, family)
        try AccessControl.requireFamily(principal, family)
        let readable = try AccessControl.readableZoneIDs(principal, family: family, in: db)
        let zone = ZonesTable.Columns.self, share = SharesTable.Columns.self
        var participants: [Int64: Int] = [:]
        let sharedZones = ZonesTable.live(family).select(zone.id)
        for row in try Row.fetchAll(db, SharesTable.filter(sharedZones.contains(share.zoneID)).select(share.zoneID, count(share.deviceId).forKey("participants")).group(share.zoneID)) {
            participants[row[share.zoneID]] = row["participants"]
        }
        return try Row.fetchAll(db, ZonesTable.live(family).select(zone.id, zone.name, zone.createdAt).order(zone.name))
            .filter { readable?.contains($0[zone.id]) ?? true }
            .map { ZoneInfo(name: $0[zone.name], createdAt: Millis.date($0[zone.createdAt]), participants: participants[$0[zone.id]] ?? 0) }
    }

    static func shareInfo(_ zone: ZoneRow, _ db: Database) throws -> ShareInfo {
        // Every share and unshare answers with it (a pairing shares the child's zone): cached.
        let share = SharesTable.Columns.self
        let participants = try Row.fetchAll(cached: db, sql: "SELECT device_id, permission, added_at FROM shares WHERE zone_id = ? ORDER BY added_at, device_id",
                                            arguments: [zone.id])
            .map { row in
                ShareParticipant(deviceId: row[share.deviceId], permission: SharePermission(rawValue: row[share.permission]) ?? .readOnly,
                                 addedAt: Millis.date(row[share.addedAt]))
            }
        return ShareInfo(family: zone.family, zone: zone.name, participants: participants)
    }

    static func share(_ zone: ZoneRow, participants: [ShareParticipant], now: Int64, _ db: Database) throws -> ShareInfo {
        guard !Names.isInternalZone(zone.name) else {
            throw RPCError.invalidParams("params.zone", "\(zone.name) is an internal zone of the services and cannot be shared")
        }
        for (index, participant) in participants.enumerated() {
            let parameter = "params.participants[\(index)].deviceId"
            try Validation.identifier(participant.deviceId, parameter)
            // Only the family's own devices (those with a credential in it, whatever its
            // status): a device of another family could never use the share anyway.
            guard try Row.fetchOne(cached: db, sql: "SELECT 1 FROM credentials WHERE family = ? AND device_id = ?",
                                   arguments: [zone.family, participant.deviceId]) != nil else {
                throw RPCError.invalidParams(parameter, "names \(participant.deviceId), which is not a device of family \(zone.family); a zone is shared only with the family's own paired devices")
            }
            try db.execute(cached: """
                INSERT INTO shares(zone_id, device_id, permission, added_at) VALUES (?, ?, ?, ?)
                ON CONFLICT(zone_id, device_id) DO UPDATE SET permission = excluded.permission
                """, arguments: [zone.id, participant.deviceId, participant.permission.rawValue, now])
        }
        try ChangeLog.append(db, zone: zone, kind: .shareChanged, at: now)
        return try shareInfo(zone, db)
    }

    static func unshare(_ zone: ZoneRow, deviceIds: [String]?, now: Int64, _ db: Database) throws -> ShareInfo {
        if let deviceIds {
            for device in deviceIds {
                try SharesTable.of(zone.id).filter(SharesTable.Columns.deviceId == device).deleteAll(db)
            }
        } else {
            try SharesTable.of(zone.id).deleteAll(db)
        }
        try ChangeLog.append(db, zone: zone, kind: .shareChanged, at: now)
        return try shareInfo(zone, db)
    }
}

/// Device credentials, as the pairing service records them.
enum CredentialOperations {
    private typealias Columns = CredentialsTable.Columns

    private static func info(_ row: Row) -> CredentialInfo {
        CredentialInfo(
            family: row[Columns.family], deviceId: row[Columns.deviceId], role: DeviceRole(rawValue: row[Columns.role]) ?? .child,
            status: CredentialStatus(rawValue: row[Columns.status]) ?? .revoked, createdAt: Millis.date(row[Columns.createdAt]),
            updatedAt: Millis.date(row[Columns.updatedAt]))
    }

    private static let infoColumns = [Columns.family, Columns.deviceId, Columns.role, Columns.status, Columns.createdAt, Columns.updatedAt]
    /// One device's credential is read on each pairing, confirmation and revocation, and by
    /// the pairing service's checks: a cached statement, of the same columns.
    private static let selectOneInfo = select(infoColumns)

    /// `SELECT <columns> FROM credentials WHERE family = ? AND device_id = ?`.
    private static func select(_ columns: [Column]) -> String {
        "SELECT \(columns.map(\.name).joined(separator: ", ")) FROM credentials WHERE family = ? AND device_id = ?"
    }

    /// The credential as recorded, and the change that logged it.
    static func put(_ params: PutCredentialParams, now: Int64, _ db: Database) throws -> (CredentialInfo, seq: Int64) {
        try FamilyRow.require(db, params.family)
        if let holder = try Row.fetchOne(cached: db, sql: "SELECT family, device_id FROM credentials WHERE token_sha256 = ?", arguments: [params.tokenSHA256]),
            holder[Columns.family] as String != params.family || holder[Columns.deviceId] as String != params.deviceId
        {
            throw RPCError(.conflict, "this token is already the credential of another device; issue a new random token")
        }
        try db.execute(cached: """
            INSERT INTO credentials(token_sha256, family, device_id, role, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(family, device_id) DO UPDATE SET token_sha256 = excluded.token_sha256, role = excluded.role,
                status = excluded.status, updated_at = excluded.updated_at
            """, arguments: [params.tokenSHA256, params.family, params.deviceId, params.role.rawValue,
                             (params.status ?? .active).rawValue, now, now])
        let seq = try ChangeLog.appendCredential(db, family: params.family, deviceId: params.deviceId, at: now)
        return (try find(family: params.family, deviceId: params.deviceId, db), seq)
    }

    static func update(_ params: UpdateCredentialParams, now: Int64, _ db: Database) throws -> (CredentialInfo, seq: Int64?) {
        if let expected = params.ifStatus {
            let current = try find(family: params.family, deviceId: params.deviceId, db)
            guard current.status == expected else {
                throw RPCError(.conflict, "device \(params.deviceId)'s credential is \(current.status.rawValue), not \(expected.rawValue)",
                               data: ["deviceId": .string(params.deviceId), "status": .string(current.status.rawValue)])
            }
        }
        try db.execute(cached: "UPDATE credentials SET status = ?, updated_at = ? WHERE family = ? AND device_id = ?",
                       arguments: [params.status.rawValue, now, params.family, params.deviceId])
        let seq = db.changesCount > 0 ? try ChangeLog.appendCredential(db, family: params.family, deviceId: params.deviceId, at: now) : nil
        return (try find(family: params.family, deviceId: params.deviceId, db), seq)
    }

    static func find(family: String, deviceId: String, _ db: Database) throws -> CredentialInfo {
        guard let row = try Row.fetchOne(cached: db, sql: selectOneInfo, arguments: [family, deviceId]) else {
            try FamilyRow.require(db, family)
            throw RPCError(.notFound, "device \(deviceId) has no credential in family \(family)", data: ["deviceId": .string(deviceId)])
        }
        return info(row)
    }

    private static let entryColumns = [Columns.family, Columns.deviceId, Columns.role, Columns.status, Columns.tokenSHA256, Columns.updatedAt]
    private static let selectOneEntry = select(entryColumns)

    private static func entry(_ row: Row) -> CredentialEntry {
        CredentialEntry(family: row[Columns.family], deviceId: row[Columns.deviceId], role: DeviceRole(rawValue: row[Columns.role]) ?? .child,
                        status: CredentialStatus(rawValue: row[Columns.status]) ?? .revoked, tokenSHA256: row[Columns.tokenSHA256],
                        updatedAt: Millis.date(row[Columns.updatedAt]))
    }

    /// Every family's credentials with their token hashes (`store.credentialSnapshot`).
    static func entries(_ db: Database) throws -> [CredentialEntry] {
        try Row.fetchAll(db, CredentialsTable.select(entryColumns)).map(entry)
    }

    /// One device's credential with its token hash (a `credentialChanged` event), if it has one.
    static func entry(family: String, deviceId: String, _ db: Database) throws -> CredentialEntry? {
        // For every credentialChanged event of every watch (push, the aggregator, the gateway): cached.
        try Row.fetchOne(cached: db, sql: selectOneEntry, arguments: [family, deviceId]).map(entry)
    }

    static func list(family: String, deviceId: String?, _ db: Database) throws -> [CredentialInfo] {
        try FamilyRow.require(db, family)
        if let deviceId {
            return try Row.fetchAll(cached: db, sql: selectOneInfo, arguments: [family, deviceId]).map(info)
        }
        return try Row.fetchAll(db, CredentialsTable.filter(Columns.family == family).select(infoColumns).order(Columns.createdAt, Columns.deviceId)).map(info)
    }
}
