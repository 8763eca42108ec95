import GRDB
import StoreAPI

/// The store's tables. Shipped migrations are never edited; add new ones.
///
/// ```
/// families ──< zones ──< records ──< unique_keys   (one row per uniqueness constraint)
///                  │        └──────< refs          (deleteSelf references, for cascades)
///                  └──< shares (participants)
/// field_index: one row per indexed value (key, value, zone, record), no key by record;
///              field_keys: which type and field each key stands for
/// changes: the log of every committed change, by sequence number (store.watch)
/// credentials, idempotency, meta
/// ```
///
/// What a save writes is what bounds durable saves (every page it touches is a WAL frame
/// written and fsynced), so each index here is one a read needs: docs/architecture.md,
/// "What a save writes".
enum Tables {
    /// Record types that `records_by_type` leaves out: the type a family writes most (every
    /// new record of it would write a page of that index), and most of the records of any
    /// zone that holds it, so that a query of all of them finds them as fast in the records
    /// themselves, read in order. Changing this set takes a migration that makes the index
    /// again.
    static let listedInRecordOrder: Set<String> = [RecordTypes.usageRecord]

    /// `records_by_type`'s condition: a query can use the index only when its own WHERE
    /// holds this very term (SQLite does not infer it from `type = ?`).
    static let byTypeCondition = "type NOT IN (\(listedInRecordOrder.sorted().map { "'\($0)'" }.joined(separator: ", ")))"

    static func registerMigrations(in migrator: inout DatabaseMigrator) {
        migrator.registerMigration("tables-v1") { db in
            try db.execute(sql: """
                CREATE TABLE families (
                    id TEXT PRIMARY KEY NOT NULL,
                    created_at INTEGER NOT NULL,
                    -- databaseChanges tokens below this sequence number are expired
                    purged_seq INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE zones (
                    id INTEGER PRIMARY KEY,
                    family TEXT NOT NULL REFERENCES families(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    -- a deleted zone stays as a tombstone until purged; recreating it starts a new incarnation
                    deleted INTEGER NOT NULL DEFAULT 0,
                    deleted_at INTEGER,
                    incarnation INTEGER NOT NULL DEFAULT 1,
                    -- sequence number of the zone's latest change
                    change_seq INTEGER NOT NULL,
                    -- zoneChanges tokens below this sequence number are expired
                    purged_seq INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (family, name)
                );
                CREATE INDEX zones_by_change ON zones(family, change_seq);
                CREATE TABLE records (
                    id INTEGER PRIMARY KEY,
                    zone_id INTEGER NOT NULL REFERENCES zones(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    type TEXT NOT NULL,
                    fields TEXT NOT NULL,
                    change_tag TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    created_by TEXT NOT NULL,
                    modified_at INTEGER NOT NULL,
                    modified_by TEXT NOT NULL,
                    deleted INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (zone_id, name)
                );
                CREATE INDEX records_by_zone_seq ON records(zone_id, seq);
                CREATE INDEX records_by_type ON records(type, zone_id);
                CREATE INDEX records_tombstones ON records(deleted, modified_at) WHERE deleted = 1;
                CREATE TABLE field_index (
                    type TEXT NOT NULL,
                    field TEXT NOT NULL,
                    value,
                    zone_id INTEGER NOT NULL,
                    record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
                    PRIMARY KEY (type, field, value, zone_id, record_id)
                ) WITHOUT ROWID;
                CREATE INDEX field_index_by_record ON field_index(record_id, field);
                CREATE TABLE unique_keys (
                    family TEXT NOT NULL,
                    type TEXT NOT NULL,
                    constraint_name TEXT NOT NULL,
                    key TEXT NOT NULL,
                    record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
                    PRIMARY KEY (family, type, constraint_name, key)
                ) WITHOUT ROWID;
                CREATE INDEX unique_keys_by_record ON unique_keys(record_id);
                CREATE TABLE refs (
                    record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
                    family TEXT NOT NULL,
                    target_zone TEXT NOT NULL,
                    target_name TEXT NOT NULL
                );
                CREATE INDEX refs_by_target ON refs(family, target_zone, target_name);
                CREATE INDEX refs_by_record ON refs(record_id);
                CREATE TABLE shares (
                    zone_id INTEGER NOT NULL REFERENCES zones(id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    permission TEXT NOT NULL,
                    added_at INTEGER NOT NULL,
                    PRIMARY KEY (zone_id, device_id)
                );
                CREATE INDEX shares_by_device ON shares(device_id);
                CREATE TABLE changes (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    record_type TEXT,
                    record_name TEXT,
                    at INTEGER NOT NULL
                );
                CREATE INDEX changes_by_time ON changes(at);
                CREATE TABLE credentials (
                    token_sha256 TEXT PRIMARY KEY NOT NULL,
                    family TEXT NOT NULL REFERENCES families(id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    role TEXT NOT NULL,
                    status TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    UNIQUE (family, device_id)
                );
                CREATE TABLE idempotency (
                    family TEXT NOT NULL,
                    principal TEXT NOT NULL,
                    request_id TEXT NOT NULL,
                    params_sha256 TEXT NOT NULL,
                    result TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (family, principal, request_id)
                ) WITHOUT ROWID;
                CREATE INDEX idempotency_by_time ON idempotency(created_at);
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value
                ) WITHOUT ROWID;
                """)
        }
        // store.watch tells creations from updates, and what a deleted record held, so that
        // subscriptions with filters can fire on both.
        migrator.registerMigration("tables-v2") { db in
            try db.execute(sql: """
                ALTER TABLE changes ADD COLUMN created INTEGER;
                ALTER TABLE changes ADD COLUMN old_fields TEXT;
                """)
        }
        // Three pages less per save. The change log numbers its entries itself from its head
        // (the newest entry, or meta.change_floor when purges or a restore moved it on)
        // rather than through AUTOINCREMENT, which rewrote sqlite_sequence at every commit;
        // a purge finds old entries in log order, not through an index by time; and a
        // record's change no longer rewrites its zone's row and the index of zones by
        // change: a zone's latest change is the newer of its own events (created, deleted,
        // shared) and its newest record (records_by_zone_seq).
        migrator.registerMigration("tables-v3") { db in
            try db.execute(sql: """
                INSERT INTO meta(key, value) VALUES ('change_floor', IFNULL((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0))
                    ON CONFLICT(key) DO UPDATE SET value = MAX(IFNULL(value, 0), excluded.value);
                CREATE TABLE changes_v3 (
                    seq INTEGER PRIMARY KEY,
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    record_type TEXT,
                    record_name TEXT,
                    at INTEGER NOT NULL,
                    created INTEGER,
                    old_fields TEXT
                );
                INSERT INTO changes_v3(seq, family, zone, kind, record_type, record_name, at, created, old_fields)
                    SELECT seq, family, zone, kind, record_type, record_name, at, created, old_fields FROM changes ORDER BY seq;
                DROP TABLE changes;
                ALTER TABLE changes_v3 RENAME TO changes;
                DROP INDEX zones_by_change;
                """)
        }
        // Two pages less per save. A record's index entries are found from its fields (they
        // are derived from them), so the index of entries by record, which every save wrote
        // one or two pages of, goes; a query checks its second and later filters, and sorts,
        // on the record's own fields. The foreign key to the record goes with it (deleting a
        // record would have to search the index for its entries): a record's entries are
        // deleted with its fields' values as the key, and a zone's deletion deletes its
        // records' entries first.
        migrator.registerMigration("tables-v4") { db in
            try db.execute(sql: """
                CREATE TABLE field_index_v4 (
                    type TEXT NOT NULL,
                    field TEXT NOT NULL,
                    value,
                    zone_id INTEGER NOT NULL,
                    record_id INTEGER NOT NULL,
                    PRIMARY KEY (type, field, value, zone_id, record_id)
                ) WITHOUT ROWID;
                INSERT INTO field_index_v4(type, field, value, zone_id, record_id)
                    SELECT type, field, value, zone_id, record_id FROM field_index;
                DROP TABLE field_index;
                ALTER TABLE field_index_v4 RENAME TO field_index;
                """)
        }
        // One page less per usage record: the index of records by type leaves out the types
        // listed in record order (``listedInRecordOrder``), whose query without filters reads
        // the records themselves from its cursor on, in the order it returns them.
        migrator.registerMigration("tables-v5") { db in
            try db.execute(sql: """
                DROP INDEX records_by_type;
                CREATE INDEX records_by_type ON records(type, zone_id) WHERE \(byTypeCondition);
                """)
        }
        // Half a page less per usage record: an index entry starts with a number for its type
        // and field (``FieldDefinition/indexKey``, `field_keys` says which) rather than their
        // names, so more entries fit a page and the index splits less often.
        migrator.registerMigration("tables-v6") { db in
            try db.execute(sql: """
                CREATE TABLE field_keys (
                    key INTEGER PRIMARY KEY,
                    type TEXT NOT NULL,
                    field TEXT NOT NULL,
                    UNIQUE (type, field)
                );
                """)
            // Every key of the history this program knows (the entries to convert have theirs
            // among them); a later schema version records its own as it is applied.
            try FieldKeys.record(SchemaRegistry(applying: SchemaHistory.versions), db)
            try db.execute(sql: """
                CREATE TABLE field_index_v6 (
                    key INTEGER NOT NULL,
                    value,
                    zone_id INTEGER NOT NULL,
                    record_id INTEGER NOT NULL,
                    PRIMARY KEY (key, value, zone_id, record_id)
                ) WITHOUT ROWID;
                INSERT INTO field_index_v6(key, value, zone_id, record_id)
                    SELECT k.key, f.value, f.zone_id, f.record_id FROM field_index f JOIN field_keys k ON k.type = f.type AND k.field = f.field;
                DROP TABLE field_index;
                ALTER TABLE field_index_v6 RENAME TO field_index;
                """)
        }
    }
}

/// `field_keys`: the type and field each index key stands for (for people reading the
/// database, and the benchmark's floor; the store itself takes them from its schema).
enum FieldKeys {
    static func record(_ schema: SchemaRegistry, _ db: Database) throws {
        for (type, field, key) in schema.indexKeys {
            try db.execute(cached: "INSERT OR IGNORE INTO field_keys(key, type, field) VALUES (?, ?, ?)", arguments: [key, type, field])
        }
    }
}
