import DurableSQLite
import GRDB
import StoreAPI

/// Removes what change feeds no longer need: tombstones, deleted zones, change-log entries
/// and idempotency records older than the grace period. Tokens that pointed before them
/// then get `change_token_expired`.
enum Purge {
    static func run(olderThan cutoff: Int64, _ db: Database) throws -> PurgeResult {
        // A zone's latest change is its newest record's when that is newer than its own
        // events (databaseChanges): a tombstone purged takes its number into the zone's row,
        // so that the zone still reads as changed to a token from before the deletion.
        try db.execute(cached: """
            UPDATE zones SET (purged_seq, change_seq) = (SELECT MAX(zones.purged_seq, IFNULL(t.seq, 0)), MAX(zones.change_seq, IFNULL(t.seq, 0))
                FROM (SELECT MAX(r.seq) AS seq FROM records r WHERE r.zone_id = zones.id AND r.deleted = 1 AND r.modified_at < ?) t)
            """, arguments: [cutoff])
        try db.execute(cached: "DELETE FROM records WHERE deleted = 1 AND modified_at < ?", arguments: [cutoff])
        let tombstones = db.changesCount

        try db.execute(cached: """
            UPDATE families SET purged_seq = MAX(purged_seq, IFNULL((
                SELECT MAX(z.change_seq) FROM zones z WHERE z.family = families.id AND z.deleted = 1 AND z.deleted_at < ?), 0))
            """, arguments: [cutoff])
        try db.execute(cached: "DELETE FROM zones WHERE deleted = 1 AND deleted_at < ?", arguments: [cutoff])
        let zones = db.changesCount

        var horizon = try StoreDatabase.meta(db, WatchReader.horizonKey)
        var changes = 0
        // The log is purged from its start up to the first entry that is still young: read
        // in log order, so it reads what it deletes and no more (no index by time to keep up
        // at every save). A clock that went back leaves an old entry behind a young one for
        // the next purge.
        let firstKept = try Int64.fetchOne(cached: db, sql: "SELECT seq FROM changes WHERE at >= ? ORDER BY seq LIMIT 1", arguments: [cutoff])
        if let purgeThrough = try Int64.fetchOne(cached: db, sql: "SELECT MAX(seq) FROM changes WHERE seq < ?", arguments: [firstKept ?? Int64.max]),
           purgeThrough > horizon
        {
            // The numbers go on from the head even when the whole log goes.
            try StoreDatabase.setMeta(db, StoreDatabase.changeFloorKey, try StoreDatabase.head(db))
            try db.execute(cached: "DELETE FROM changes WHERE seq <= ?", arguments: [purgeThrough])
            changes = db.changesCount
            horizon = purgeThrough
            try StoreDatabase.setMeta(db, WatchReader.horizonKey, horizon)
        }
        try db.execute(cached: "DELETE FROM idempotency WHERE created_at < ?", arguments: [cutoff])
        return PurgeResult(tombstones: tombstones, zones: zones, changes: changes, watchHorizon: horizon)
    }
}
