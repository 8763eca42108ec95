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

    /// The store: the change log's next number, and every family's and zone's horizon for
    /// change tokens (`purged_seq`, below which a token is expired), moved to the new head.
    static func advanceStore(at path: String) throws -> Int64 {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.write { db in
            let head = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'") ?? 0
            let next = head + Self.gap
            if try Int64.fetchOne(db, sql: "SELECT count(*) FROM sqlite_sequence WHERE name = 'changes'") == 0 {
                try db.execute(sql: "INSERT INTO sqlite_sequence(name, seq) VALUES ('changes', ?)", arguments: [next])
            } else {
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
    static func advancePush(at path: String) throws {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        try queue.write { db in
            try db.execute(sql: "UPDATE devices SET last_seq = max(last_seq, acked) + ?", arguments: [Self.gap])
            try db.execute(sql: """
                INSERT INTO meta(key, value) VALUES ('seq_floor', ?)
                ON CONFLICT(key) DO UPDATE SET value = value + excluded.value
                """, arguments: [Self.gap])
        }
    }
}
