import Foundation
import GRDB
import RPCCore

/// The kit's own SQLite file on the device (through GRDB): the offline queue, the change
/// tokens it keeps, and the last notification handled. Commits are synchronous (WAL,
/// `synchronous=FULL`): a write the kit accepted survives the app being killed.
final class LocalStore: Sendable {
    let database: DatabaseQueue
    let path: String

    init(path: String) throws(RPCError) {
        self.path = path
        do {
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            configuration.busyMode = .timeout(10)
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            self.database = try DatabaseQueue(path: path, configuration: configuration)
            try self.database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            try Self.migrator.migrate(self.database)
        } catch {
            throw RPCError(.internal, "cannot open the kit's database \(path): \(error)")
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // One row per store.modify batch, replayed in `seq` order with its own requestId.
            try db.execute(sql: """
                CREATE TABLE outbox (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    requestId TEXT NOT NULL UNIQUE,
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    params TEXT NOT NULL,
                    label TEXT,
                    createdAt REAL NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    lastAttemptAt REAL,
                    lastErrorCode TEXT,
                    lastErrorMessage TEXT,
                    status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'failed'))
                );
                CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                """)
        }
        return migrator
    }

    func value(_ key: String) throws(RPCError) -> String? {
        // Read and written for every notification handled: cached statements.
        do { return try self.database.read { db in try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM kv WHERE key = ?"), arguments: [key]) } } catch {
            throw RPCError(.internal, "the kit's database could not be read: \(error)")
        }
    }

    func setValue(_ value: String?, for key: String) throws(RPCError) {
        do {
            try self.database.write { db in
                if let value {
                    try db.cachedStatement(sql: "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").execute(arguments: [key, value])
                } else {
                    try db.cachedStatement(sql: "DELETE FROM kv WHERE key = ?").execute(arguments: [key])
                }
            }
        } catch {
            throw RPCError(.internal, "the kit's database could not be written: \(error)")
        }
    }
}
