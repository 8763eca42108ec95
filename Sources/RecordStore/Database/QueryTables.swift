import GRDB

// The store's tables as GRDB's query interface names them, for the statements that run a
// few times in a family's life: listing families and zones, deleting a zone, unsharing,
// listing a family's credentials. What every request runs (a zone's lookup, a record's
// read and write, the change log) and what each pairing runs stay SQL in the statement
// cache (docs/architecture.md, "SQL and the query interface").

enum FamiliesTable: TableRecord {
    static let databaseTableName = "families"
    enum Columns {
        static let id = Column("id"), createdAt = Column("created_at")
    }
}

enum ZonesTable: TableRecord {
    static let databaseTableName = "zones"
    enum Columns {
        static let id = Column("id"), family = Column("family"), name = Column("name"), createdAt = Column("created_at")
        static let deleted = Column("deleted"), deletedAt = Column("deleted_at")
    }

    /// The family's live zones.
    static func live(_ family: String) -> QueryInterfaceRequest<ZonesTable> {
        Self.filter(Columns.family == family && Columns.deleted == false)
    }
}

enum SharesTable: TableRecord {
    static let databaseTableName = "shares"
    enum Columns {
        static let zoneID = Column("zone_id"), deviceId = Column("device_id"), permission = Column("permission"), addedAt = Column("added_at")
    }

    static func of(_ zoneID: Int64) -> QueryInterfaceRequest<SharesTable> {
        Self.filter(Columns.zoneID == zoneID)
    }
}

enum RecordsTable: TableRecord {
    static let databaseTableName = "records"
    enum Columns {
        static let zoneID = Column("zone_id"), deleted = Column("deleted")
    }
}

/// Records' `deleteSelf` references, for cascades.
enum RefsTable: TableRecord {
    static let databaseTableName = "refs"
    enum Columns {
        static let family = Column("family"), targetZone = Column("target_zone"), targetName = Column("target_name")
    }
}

enum CredentialsTable: TableRecord {
    static let databaseTableName = "credentials"
    enum Columns {
        static let family = Column("family"), deviceId = Column("device_id"), role = Column("role"), status = Column("status")
        static let tokenSHA256 = Column("token_sha256"), createdAt = Column("created_at"), updatedAt = Column("updated_at")
    }

    static func device(family: String, deviceId: String) -> QueryInterfaceRequest<CredentialsTable> {
        Self.filter(Columns.family == family && Columns.deviceId == deviceId)
    }
}
