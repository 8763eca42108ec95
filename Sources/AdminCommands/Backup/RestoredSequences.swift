import Foundation
import GRDB

/// What a restore changes in the databases it puts back, before any service opens them.
///
/// The restored server is older than the devices: a phone may hold a change token, or have
/// acknowledged a notification, numbered after the backup by the server that was lost. Were
/// the numbers to go on from the backup's, the new server would hand the same numbers to
/// other changes, and a device would skip them. So the store's change log and push's
/// numbering per device jump ahead by ``gap``, beyond anything the lost server can have
/// reached, and every change token from before the restore is expired: a device asking with
/// one gets `change_token_expired` and fetches again from scratch (ScreenTimeKit does so by
/// itself). The followers' own positions (the aggregator's, push's) are untouched: they were
/// copied before the store's, so they resume from the store's log as it was.
enum RestoredSequences {
    /// 2^32 changes, or notifications to one device: years of a family's life many times over.
    static let gap: Int64 = 1 << 32

    /// At least the time in seconds times 2^20: an archive older than one restored before
    /// (last month's, after last week's) still lands beyond every number since, whatever
    /// its own numbers were. Below 2^53 (what a JSON client reads exactly) until 2242.
    static func floor(at now: Date) -> Int64 {
        Int64(now.timeIntervalSince1970) << 20
    }

    /// The store: the change log's next number, and every family's and zone's horizon for
    /// change tokens (`purged_seq`, below which a token is expired), moved to the new head.
    static func advanceStore(at path: String, now: Date = Date()) throws -> Int64 {
        try Self.change(path) { db in
            // The head: the log's newest entry or its floor (meta.change_floor), or, in an
            // archive of an earlier version, SQLite's AUTOINCREMENT counter (the store
            // takes it into the floor when it migrates the archive's database).
            let counter = try db.tableExists("sqlite_sequence")
                ? try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'") ?? 0 : 0
            let newest = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM changes") ?? 0
            let floor = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'change_floor'") ?? 0
            let next = max(max(counter, newest, floor) + Self.gap, Self.floor(at: now))
            try db.execute(sql: "INSERT INTO meta(key, value) VALUES ('change_floor', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [next])
            if counter > 0 {
                try db.execute(sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'changes'", arguments: [next])
            }
            try db.execute(sql: "UPDATE families SET purged_seq = ?", arguments: [next])
            try db.execute(sql: "UPDATE zones SET purged_seq = ?", arguments: [next])
            return next
        }
    }

    /// Push: each device's next notification number, beyond what it can have seen or
    /// acknowledged; a device push had not numbered for yet starts at the floor
    /// (`meta.seq_floor`, which push's numbering reads). The notifications still queued keep
    /// theirs and are delivered again.
    static func advancePush(at path: String, now: Date = Date()) throws {
        try Self.change(path) { db in
            let floor = max((try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'seq_floor'") ?? 0) + Self.gap, Self.floor(at: now))
            try db.execute(sql: "UPDATE devices SET last_seq = max(max(last_seq, acked) + ?, ?)", arguments: [Self.gap, floor])
            try db.execute(sql: "INSERT INTO meta(key, value) VALUES ('seq_floor', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [floor])
        }
    }

    /// One transaction on a staged database, left as one file (no WAL beside it: only the
    /// database file is put in place).
    private static func change<T>(_ path: String, _ body: (Database) throws -> T) throws -> T {
        let queue = try DatabaseQueue(path: path)
        let result = try queue.write(body)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode=DELETE") }
        try queue.close()
        for suffix in ["-wal", "-shm", "-journal"] where FileManager.default.fileExists(atPath: path + suffix) {
            throw ServerArchive.Failure.mismatch("\((path as NSString).lastPathComponent) kept a \(suffix) file after its numbers were moved")
        }
        return result
    }
}
