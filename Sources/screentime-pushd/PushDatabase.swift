import Foundation
import DurableSQLite
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
                    -- the PushNotification as JSON without its seq, which is this row's
                    body TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, seq)
                ) WITHOUT ROWID;
                CREATE INDEX queue_by_collapse_key ON queue(family, device_id, collapse_key) WHERE collapse_key IS NOT NULL;
                CREATE INDEX queue_by_expiry ON queue(expires_at);
                """)
            try db.execute(sql: MetaTable.createSQL)
        }
        migrator.registerMigration("push-v2-webhooks") { db in
            try db.execute(sql: """
                CREATE TABLE webhooks (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    url TEXT NOT NULL,
                    format TEXT NOT NULL,
                    -- sent as the Authorization header; never shown
                    authorization TEXT,
                    status TEXT NOT NULL DEFAULT 'active',
                    created_at INTEGER NOT NULL,
                    delivered_at INTEGER,
                    last_error TEXT,
                    PRIMARY KEY (family, device_id)
                ) WITHOUT ROWID;
                -- queued notifications still to be posted to their device's webhook
                CREATE TABLE outbox (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    due_at INTEGER NOT NULL,
                    PRIMARY KEY (family, device_id, seq)
                ) WITHOUT ROWID;
                CREATE INDEX outbox_by_due ON outbox(due_at);
                """)
        }
        self.pool = try DurableSQLite.open(path: path, label: "push", program: "screentime-pushd", migrator: migrator, logger: logger)
    }

    // MARK: Position in the store's change log

    static let positionKey = "watch_position"

    func position() throws -> Int64 {
        try self.pool.read { db in try MetaTable.get(db, Self.positionKey) }
    }

    static func setPosition(_ db: Database, _ value: Int64) throws {
        try MetaTable.set(db, Self.positionKey, value)
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
    /// notifications as queued, in the order of `drafts`.
    ///
    /// One change may go to thousands of devices: the rows are written with a few
    /// statements of many rows each, not a few statements per device.
    /// `post` says which devices also get the notification posted to their webhook (an
    /// outbox row, in the same transaction).
    func enqueue(_ drafts: [Draft], removing fired: [SubscriptionKey] = [], position: Int64? = nil,
                 post: @escaping @Sendable (_ family: String, _ deviceId: String) -> Bool = { _, _ in false }) async throws -> [Queued] {
        try await self.pool.write { db in
            let seqs = try Self.number(drafts, db)
            // One change fires the same notification for many devices: encoded once, without
            // a seq (the row's seq is the device's number).
            var bodies: [Int: String] = [:]
            var queued: [Queued] = []
            queued.reserveCapacity(drafts.count)
            for (draft, seq) in zip(drafts, seqs) {
                let body = try draft.group.flatMap { bodies[$0] } ?? Coding.encode(draft.notification)
                if let group = draft.group { bodies[group] = body }
                var notification = draft.notification
                notification.seq = seq
                let outgoing = Outgoing(seq: seq, expiresAt: notification.expiresAt, json: PushNotification.numbered(seq, unnumbered: EncodedJSON(body)))
                queued.append(Queued(deviceId: draft.deviceId, notification: notification, outgoing: outgoing, body: body,
                                     posted: post(draft.family, draft.deviceId)))
            }
            try Self.collapse(queued, db)
            let stored = Self.survivors(queued)
            try Self.insert(stored, db)
            try Self.addToOutbox(stored.filter(\.posted), db)
            for key in fired {
                try db.execute(sql: "DELETE FROM subscriptions WHERE family = ? AND device_id = ? AND id = ?", arguments: [key.family, key.deviceId, key.id])
            }
            if let position { try Self.setPosition(db, position) }
            return queued
        }
    }

    private struct DeviceKey: Hashable {
        var family: String
        var deviceId: String
    }

    /// Each draft's sequence number: every device's counter moves by its number of drafts.
    private static func number(_ drafts: [Draft], _ db: Database) throws -> [Int64] {
        var counts: [DeviceKey: Int64] = [:]
        for draft in drafts { counts[DeviceKey(family: draft.family, deviceId: draft.deviceId), default: 0] += 1 }
        var next: [DeviceKey: Int64] = [:]
        for chunk in Array(counts).chunked(250) {
            let sql = "INSERT INTO devices(family, device_id, last_seq) VALUES " + Self.placeholders(3, rows: chunk.count)
                + " ON CONFLICT(family, device_id) DO UPDATE SET last_seq = last_seq + excluded.last_seq RETURNING family, device_id, last_seq"
            let arguments = StatementArguments(chunk.flatMap { [$0.key.family, $0.key.deviceId, $0.value] as [(any DatabaseValueConvertible)?] })
            for row in try Row.fetchAll(try Self.statement(sql, full: chunk.count == 250, db), arguments: arguments) {
                // By position (family, device_id, last_seq, as RETURNING lists them): a thousand
                // devices a change, and a lookup by name costs more than the value.
                let key = DeviceKey(family: row[0], deviceId: row[1])
                next[key] = (row[2] as Int64) - counts[key, default: 1] + 1
            }
        }
        return drafts.map { draft in
            let key = DeviceKey(family: draft.family, deviceId: draft.deviceId)
            defer { next[key, default: 0] += 1 }
            return next[key, default: 1]
        }
    }

    /// Removes what the new notifications replace: pending ones with the same collapse key.
    private static func collapse(_ queued: [Queued], _ db: Database) throws {
        var byKey: [String: (family: String, key: String, devices: Set<String>)] = [:]
        for item in queued {
            guard let key = item.notification.collapseKey else { continue }
            byKey[item.notification.family + "\u{0}" + key, default: (item.notification.family, key, [])].devices.insert(item.deviceId)
        }
        for (family, key, devices) in byKey.values {
            for chunk in Array(devices).chunked(500) {
                let sql = "DELETE FROM queue WHERE family = ? AND collapse_key = ? AND device_id IN (" + Array(repeating: "?", count: chunk.count).joined(separator: ", ") + ")"
                let values: [(any DatabaseValueConvertible)?] = [family, key] + chunk.map { $0 }
                try Self.statement(sql, full: chunk.count == 500, db).execute(arguments: StatementArguments(values))
            }
        }
    }

    /// The notifications to store: of several with the same device and collapse key in one
    /// batch, only the last (all were delivered live).
    private static func survivors(_ queued: [Queued]) -> [Queued] {
        struct Pending: Hashable {
            var family: String
            var deviceId: String
            var collapseKey: String
        }
        var seen = Set<Pending>()
        var kept: [Queued] = []
        for item in queued.reversed() {
            if let key = item.notification.collapseKey,
                !seen.insert(Pending(family: item.notification.family, deviceId: item.deviceId, collapseKey: key)).inserted { continue }
            kept.append(item)
        }
        return kept.reversed()
    }

    private static func insert(_ queued: [Queued], _ db: Database) throws {
        for chunk in queued.chunked(150) {
            let sql = "INSERT INTO queue(family, device_id, seq, collapse_key, expires_at, body) VALUES " + Self.placeholders(6, rows: chunk.count)
            let arguments = StatementArguments(chunk.flatMap { item -> [(any DatabaseValueConvertible)?] in
                [item.notification.family, item.deviceId, item.notification.seq, item.notification.collapseKey, Millis.of(item.notification.expiresAt), item.body]
            })
            try Self.statement(sql, full: chunk.count == 150, db).execute(arguments: arguments)
        }
    }

    /// `(?, ?, ?), (?, ?, ?)` for `rows` rows of `columns` values.
    static func placeholders(_ columns: Int, rows: Int) -> String {
        let row = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
        return Array(repeating: row, count: rows).joined(separator: ", ")
    }

    /// Statements of full chunks are kept compiled; a remainder's size varies, so it is not.
    private static func statement(_ sql: String, full: Bool, _ db: Database) throws -> Statement {
        full ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
    }

    /// A page of a device's queue after `after`, unexpired, in order, ready to send.
    func pending(family: String, deviceId: String, after: Int64, limit: Int, now: Date) throws -> [Outgoing] {
        try self.pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT seq, expires_at, body FROM queue WHERE family = ? AND device_id = ? AND seq > ? AND expires_at > ? ORDER BY seq LIMIT ?
                """, arguments: [family, deviceId, after, Millis.of(now), limit]).map { row in
                let seq: Int64 = row["seq"]
                let expires: Int64 = row["expires_at"]
                return Outgoing(seq: seq, expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000),
                                json: PushNotification.numbered(seq, unnumbered: EncodedJSON(row["body"] as String)))
            }
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
            try db.execute(sql: "DELETE FROM outbox WHERE family = ? AND device_id = ? AND seq <= ?", arguments: [family, deviceId, acked])
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

    /// A notification to queue for a device; its `seq` is set when queued. Drafts with the
    /// same `group` carry the same notification (one change, one subscription spec, many
    /// devices), which is then encoded once.
    struct Draft: Sendable {
        var family: String
        var deviceId: String
        var notification: PushNotification
        var group: Int?
    }

    struct Queued: Sendable {
        var deviceId: String
        var notification: PushNotification
        var outgoing: Outgoing
        /// The notification's JSON without its seq, as stored.
        var body: String
        /// Also to be posted to the device's webhook.
        var posted: Bool
    }

    struct SubscriptionKey: Sendable, Hashable {
        var family: String
        var deviceId: String
        var id: String
    }
}

extension Array {
    /// The elements in consecutive slices of at most `size`.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: self.count, by: size).map { self[$0..<Swift.min($0 + size, self.count)] }
    }
}

enum Millis {
    static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}

/// JSON for the rows' bodies, in the wire's encoding (dates and all).
enum Coding {
    static func encode<T: Encodable>(_ value: T) throws -> String {
        var writer = JSONWriter()
        try writer.encodable(value)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONValueDecoding.decode(type, from: try JSONParser.parse(text))
    }
}
