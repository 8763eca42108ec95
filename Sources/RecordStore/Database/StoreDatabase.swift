import Foundation
import DurableSQLite
import GRDB
import Logging
import RPCCore
import StoreAPI

/// The store's SQLite database: WAL mode, `synchronous=FULL` (a commit that returned is on
/// disk), migrated on open to the newest schema this binary knows.
final class StoreDatabase: Sendable {
    let pool: DatabasePool
    let schema: SchemaRegistry
    let path: String

    /// The database file inside the state directory.
    static let fileName = "store.sqlite"
    /// WAL pages before a commit checkpoints. A checkpoint stalls the writer (and every
    /// write queued behind it) while it copies the pages and fsyncs the database; most of a
    /// WAL is the same hot pages written again (the newest leaves, the zone's row), so a
    /// longer WAL copies little more per checkpoint, and checkpoints come less often.
    static let checkpointPages = 4000

    /// Opens (creating if needed) and migrates. `schemaVersion` stops at an older schema
    /// version: for upgrade tests only.
    init(path: String, schemaVersion: Int? = nil, logger: Logger) throws {
        self.path = path
        var migrator = DatabaseMigrator()
        Tables.registerMigrations(in: &migrator)
        let versions = SchemaHistory.versions.filter { $0.number <= (schemaVersion ?? Int.max) }
        var before = SchemaRegistry()
        for version in versions {
            let registryBefore = before
            migrator.registerMigration(version.migrationIdentifier) { db in
                try SchemaBackfill.apply(version, to: db, schemaBefore: registryBefore)
            }
            before.apply(version)
        }

        let pool = try DurableSQLite.open(path: path, label: "store", program: "screentime-stored", migrator: migrator, checkpointPages: Self.checkpointPages, logger: logger)
        let applied = try pool.read { try migrator.appliedIdentifiers($0) }
        self.schema = SchemaRegistry(applying: versions.filter { applied.contains($0.migrationIdentifier) })
        self.pool = pool
    }

    /// The newest committed sequence number: the log's newest entry, or the floor a purge
    /// of the whole log or a restore moved it to (numbers are never given twice).
    static func head(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(cached: db, sql: """
            SELECT MAX(IFNULL((SELECT MAX(seq) FROM changes), 0), IFNULL((SELECT value FROM meta WHERE key = '\(changeFloorKey)'), 0))
            """) ?? 0
    }

    /// meta's key for the change log's floor (``head(_:)``).
    static let changeFloorKey = "change_floor"

    static func meta(_ db: Database, _ key: String) throws -> Int64 {
        try Int64.fetchOne(cached: db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]) ?? 0
    }

    static func setMeta(_ db: Database, _ key: String, _ value: Int64) throws {
        try db.execute(cached: "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [key, value])
    }
}

/// The data side of a schema version: defaults into existing records, index rows for new
/// indexes (and none for dropped ones), a check of new uniqueness constraints.
enum SchemaBackfill {
    static func apply(_ version: SchemaVersion, to db: Database, schemaBefore: SchemaRegistry) throws {
        var schema = schemaBefore
        schema.apply(version)
        try FieldKeys.record(schema, db)
        for step in version.steps {
            switch step {
            case .addRecordType, .allowValues, .makeAppendOnly, .notInFuture, .serverOnlyValues:
                continue
            case .addField(let type, let field):
                guard let value = field.defaultValue else { continue }
                try db.execute(cached: "UPDATE records SET fields = json_set(fields, '$.' || ?, json(?)) WHERE type = ? AND deleted = 0 AND json_type(fields, '$.' || ?) IS NULL",
                    arguments: [field.name, try FieldsCoding.encodeValue(value), type, field.name])
                if field.indexed { try reindex(db, type: type, schema: schema) }
            case .addIndex(let type, _):
                try reindex(db, type: type, schema: schema)
            case .dropIndex(let type, let field), .readFromRecords(let type, let field):
                guard let key = schema[type]?.field(field)?.indexKey else { continue }
                try db.execute(cached: "DELETE FROM field_index WHERE key = ?", arguments: [key])
            case .addUnique(let type, _):
                try reindex(db, type: type, schema: schema)
            }
        }
    }

    /// Rebuilds the derived rows of every live record of a type.
    private static func reindex(_ db: Database, type: String, schema: SchemaRegistry) throws {
        guard let definition = schema[type] else { return }
        let rows = try Row.fetchAll(cached: db, sql: """
            SELECT r.id, r.zone_id, r.fields, z.family, z.name AS zone FROM records r JOIN zones z ON z.id = r.zone_id
            WHERE r.type = ? AND r.deleted = 0
            """, arguments: [type])
        for row in rows {
            let fields = try FieldsCoding.decode(row["fields"] as String)
            let location = RecordLocation(family: row["family"], zone: row["zone"], zoneID: row["zone_id"])
            do {
                try DerivedRows.backfill(db, recordID: row["id"], type: definition, fields: fields, at: location)
            } catch let error as ItemError {
                throw DurableSQLite.OpenError(description: "schema v\(schema.version) cannot be applied: \(error.message)")
            }
        }
    }
}

/// Stored `fields` JSON text.
enum FieldsCoding {
    /// A record's fields as stored: canonical JSON, keys sorted.
    static func encode(_ fields: [String: JSONValue]) throws -> String {
        var writer = JSONWriter()
        try writer.value(.object(fields), sortedKeys: true)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// A uniqueness key: the text earlier versions stored through Foundation's encoder
    /// (keys sorted, slashes not escaped), byte for byte, since stored keys are compared.
    static func encodeValue(_ value: JSONValue) throws -> String {
        var writer = JSONWriter(capacity: 32)
        try writer.value(value, sortedKeys: true)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decode(_ text: String) throws -> [String: JSONValue] {
        guard case .object(let fields) = try JSONParser.parse(text) else { throw JSONParser.Failure(offset: 0) }
        return fields
    }
}
