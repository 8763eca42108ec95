import Foundation
import GRDB
import Logging
import PushAPI
import RPCCore

/// The push service's own SQLite database (`<state-dir>/push.sqlite`): subscriptions, the
/// per-device queues and where it is in the store's change log. The queues and the
/// position move in one transaction, so a change is queued once, even across crashes.
final class PushDatabase: Sendable {
    let pool: DatabasePool
    let path: String

    static let fileName = "push.sqlite"

    init(path: String, logger: Logger) throws {
        self.path = path
        var configuration = Configuration()
        configuration.label = "push"
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("push-v1") { db in
            try db.execute(sql: """
                CREATE TABLE subscriptions (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    id TEXT NOT NULL,
                    -- the Subscription as JSON
                    body TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, id)
                ) WITHOUT ROWID;
                CREATE TABLE devices (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    -- the last sequence number given to a notification for this device
                    last_seq INTEGER NOT NULL DEFAULT 0,
                    -- everything up to here is acknowledged (and deleted from the queue)
                    acked INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (family, device_id)
                ) WITHOUT ROWID;
                CREATE TABLE queue (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    collapse_key TEXT,
                    expires_at INTEGER NOT NULL,
                    -- the PushNotification as JSON
                    body TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, seq)
                ) WITHOUT ROWID;
                CREATE INDEX queue_by_collapse_key ON queue(family, device_id, collapse_key) WHERE collapse_key IS NOT NULL;
                CREATE INDEX queue_by_expiry ON queue(expires_at);
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value
                ) WITHOUT ROWID;
                """)
        }
        if try pool.read({ try migrator.hasBeenSuperseded($0) }) {
            throw PushDatabaseError("the database \(path) was written by a newer screentime-pushd; install that version again")
        }
        try migrator.migrate(pool)
        self.pool = pool
    }

    // MARK: Position in the store's change log

    static let positionKey = "watch_position"

    func position() throws -> Int64 {
        try self.pool.read { db in try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [Self.positionKey]) ?? 0 }
    }

    static func setPosition(_ db: Database, _ value: Int64) throws {
        try db.execute(sql: "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                       arguments: [Self.positionKey, value])
    }

    // MARK: Subscriptions

    func allSubscriptions() throws -> [Subscription] {
        try self.pool.read { db in
            try String.fetchAll(db, sql: "SELECT body FROM subscriptions").map { try Coding.decode(Subscription.self, $0) }
        }
    }

    /// Saves (or replaces) a subscription, unless the device has `limit` others.
    func save(_ subscription: Subscription, limit: Int) async throws {
        try await self.pool.write { db in
            let others = try Int.fetchOne(db, sql: "SELECT count(*) FROM subscriptions WHERE family = ? AND device_id = ? AND id != ?",
                                          arguments: [subscription.family, subscription.deviceId, subscription.subscriptionId]) ?? 0
            guard others < limit else {
                throw RPCError(.limitExceeded, "this device has \(others) subscriptions, the most allowed (--max-subscriptions); remove some first")
            }
            try db.execute(sql: """
                INSERT INTO subscriptions(family, device_id, id, body) VALUES (?, ?, ?, ?)
                ON CONFLICT(family, device_id, id) DO UPDATE SET body = excluded.body
                """, arguments: [subscription.family, subscription.deviceId, subscription.subscriptionId, try Coding.encode(subscription)])
        }
    }

    /// Removes a subscription; false when there was none.
    func removeSubscription(family: String, deviceId: String, id: String) async throws -> Bool {
        try await self.pool.write { db in
            try db.execute(sql: "DELETE FROM subscriptions WHERE family = ? AND device_id = ? AND id = ?", arguments: [family, deviceId, id])
            return db.changesCount > 0
        }
    }

    // MARK: Queues

    /// Queues notifications (their `seq` is assigned here) and, in the same transaction,
    /// removes fired-once subscriptions and moves the change-log position. Returns the
    /// notifications as queued.
    func enqueue(_ drafts: [Draft], removing fired: [SubscriptionKey] = [], position: Int64? = nil) async throws -> [Queued] {
        try await self.pool.write { db in
            var queued: [Queued] = []
            for draft in drafts {
                let seq = try Int64.fetchOne(db, sql: """
                    INSERT INTO devices(family, device_id, last_seq) VALUES (?, ?, 1)
                    ON CONFLICT(family, device_id) DO UPDATE SET last_seq = last_seq + 1 RETURNING last_seq
                    """, arguments: [draft.family, draft.deviceId]) ?? 1
                var notification = draft.notification
                notification.seq = seq
                if let key = notification.collapseKey {
                    // The newer replaces what is still pending under the same key.
                    try db.execute(sql: "DELETE FROM queue WHERE family = ? AND device_id = ? AND collapse_key = ?",
                                   arguments: [draft.family, draft.deviceId, key])
                }
                try db.execute(sql: "INSERT INTO queue(family, device_id, seq, collapse_key, expires_at, body) VALUES (?, ?, ?, ?, ?, ?)",
                               arguments: [draft.family, draft.deviceId, seq, notification.collapseKey, Millis.of(notification.expiresAt), try Coding.encode(notification)])
                queued.append(Queued(deviceId: draft.deviceId, notification: notification))
            }
            for key in fired {
                try db.execute(sql: "DELETE FROM subscriptions WHERE family = ? AND device_id = ? AND id = ?", arguments: [key.family, key.deviceId, key.id])
            }
            if let position { try Self.setPosition(db, position) }
            return queued
        }
    }

    /// A page of a device's queue after `after`, unexpired, in order.
    func pending(family: String, deviceId: String, after: Int64, limit: Int, now: Date) throws -> [PushNotification] {
        try self.pool.read { db in
            try String.fetchAll(db, sql: """
                SELECT body FROM queue WHERE family = ? AND device_id = ? AND seq > ? AND expires_at > ? ORDER BY seq LIMIT ?
                """, arguments: [family, deviceId, after, Millis.of(now), limit]).map { try Coding.decode(PushNotification.self, $0) }
        }
    }

    func acked(family: String, deviceId: String) throws -> Int64 {
        try self.pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT acked FROM devices WHERE family = ? AND device_id = ?", arguments: [family, deviceId]) ?? 0
        }
    }

    /// Moves the device's acknowledgement forward (never past its last notification, never
    /// back) and drops what it covers.
    func ack(family: String, deviceId: String, upTo: Int64) async throws -> AckResult {
        try await self.pool.write { db in
            try db.execute(sql: "INSERT INTO devices(family, device_id) VALUES (?, ?) ON CONFLICT DO NOTHING", arguments: [family, deviceId])
            try db.execute(sql: "UPDATE devices SET acked = max(acked, min(?, last_seq)) WHERE family = ? AND device_id = ?",
                           arguments: [upTo, family, deviceId])
            let acked = try Int64.fetchOne(db, sql: "SELECT acked FROM devices WHERE family = ? AND device_id = ?", arguments: [family, deviceId]) ?? 0
            try db.execute(sql: "DELETE FROM queue WHERE family = ? AND device_id = ? AND seq <= ?", arguments: [family, deviceId, acked])
            let pending = try Int.fetchOne(db, sql: "SELECT count(*) FROM queue WHERE family = ? AND device_id = ?", arguments: [family, deviceId]) ?? 0
            return AckResult(acked: acked, pending: pending)
        }
    }

    /// Drops expired notifications; returns how many.
    func purgeExpired(now: Date) async throws -> Int {
        try await self.pool.write { db in
            try db.execute(sql: "DELETE FROM queue WHERE expires_at <= ?", arguments: [Millis.of(now)])
            return db.changesCount
        }
    }

    /// A notification to queue for a device; its `seq` is set when queued.
    struct Draft: Sendable {
        var family: String
        var deviceId: String
        var notification: PushNotification
    }

    struct Queued: Sendable {
        var deviceId: String
        var notification: PushNotification
    }

    struct SubscriptionKey: Sendable, Hashable {
        var family: String
        var deviceId: String
        var id: String
    }
}

struct PushDatabaseError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum Millis {
    static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}

/// JSON for the rows' bodies, in the wire's encoding (dates and all).
enum Coding {
    static func encode<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try RPCJSON.makeEncoder().encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try RPCJSON.makeDecoder().decode(type, from: Data(text.utf8))
    }
}
