import DurableSQLite
import Foundation
import GRDB
import Logging
import Testing
import TestSupport

/// A reply is sent after its commit is on disk: SQLite must fsync the log at every commit
/// (`synchronous = FULL`), not only at checkpoints (NORMAL), or an acknowledged save is
/// lost in a power cut even though it survives `kill -9`.
@Suite("Durability: every commit is fsynced")
struct CommitSyncTests {
    /// A canary on GRDB's behaviour: should a GRDB release stop overriding the setting,
    /// this fails while the services stay right, and the extra PRAGMA can go.
    @Test("GRDB's pool alone leaves its WAL writer at NORMAL, whatever prepareDatabase said: the reason DurableSQLite sets it again")
    func grdbLeavesNormal() throws {
        let directory = TemporaryDirectory()
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let pool = try DatabasePool(path: directory.file("plain.sqlite"), configuration: configuration)
        #expect(try DurableSQLite.synchronous(of: pool) == 1)
    }

    @Test("the services' databases fsync every commit: their writer is at FULL, after migrations too")
    func servicesDatabasesAreFull() throws {
        let directory = TemporaryDirectory()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE t (x)") }
        let pool = try DurableSQLite.open(path: directory.file("service.sqlite"), label: "test", program: "test",
                                          migrator: migrator, checkpointPages: 4000, logger: Logger(label: "test"))
        #expect(try DurableSQLite.synchronous(of: pool) == 2)
        try pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
        #expect(try DurableSQLite.synchronous(of: pool) == 2)
    }
}
