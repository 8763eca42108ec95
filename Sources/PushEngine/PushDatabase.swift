import Foundation
import DurableSQLite
import GRDB
import Logging
import PushAPI
import RPCCore
import Synchronization

/// The push service's own SQLite database (`<state-dir>/push.sqlite`): subscriptions, the
/// per-device queues and where it is in the store's change log. The queues and the
/// position move in one transaction, so a change is queued once, even across crashes.
final class PushDatabase: StoreLogFollowerDatabase {
    let pool: DatabasePool
    let path: String
    /// The numbers handed out and reserved (see ``enqueue(_:removing:position:deferring:due:releasing:route:deliver:)``).
    private let numbering = Mutex(Numbering())
    /// Each device's last number in a committed queue row: an acknowledgement stops there.
    private let committed = Mutex<[DeviceKey: Int64]>([:])
    /// Numbers reserved on disk at a time for a device: after a crash its numbers jump
    /// ahead by at most this many.
    static let reservationBlock: Int64 = 1024

    static let fileName = "push.sqlite"

    init(path: String, logger: Logger) throws {
        self.path = path
        self.pool = try DurableSQLite.open(path: path, label: "push", program: "screentime-pushd", migrator: Self.migrations, logger: logger)
    }

    // Its position in the store's change log: StoreLogFollowerDatabase.position(), moved
    // with StoreLogPosition.save in the transaction that applies a batch.

    // MARK: Subscriptions

    func allSubscriptions() async throws -> [Subscription] {
        try await self.pool.read { db in
            try SubscriptionEntry.select(SubscriptionEntry.Columns.body, as: String.self).fetchAll(db).map { body in
                var subscription = try Coding.decode(Subscription.self, body)
                // Saved before zone and family subscriptions said what they fire on.
                if subscription.kind != .query { subscription.firesOn = Subscription.firesOnEverything }
                return subscription
            }
        }
    }

    /// Saves (or replaces) a subscription, unless the device has `limit` others.
    func save(_ subscription: Subscription, limit: Int) async throws {
        try await self.pool.write { db in
            let others = try SubscriptionEntry.of(family: subscription.family, deviceId: subscription.deviceId)
                .filter(SubscriptionEntry.Columns.id != subscription.subscriptionId).fetchCount(db)
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
            try SubscriptionEntry.of(family: family, deviceId: deviceId).filter(SubscriptionEntry.Columns.id == id).deleteAll(db) > 0
        }
    }

    // MARK: Queues

    /// Numbers notifications and hands them to `deliver` (live listeners) at once, then
    /// queues them and, in the same transaction, removes fired-once subscriptions and
    /// moves the change-log position. Returns the notifications as queued, in the order of
    /// `drafts`, once committed.
    ///
    /// Live delivery does not wait for the commit (for a thousand devices the write takes
    /// as long as the delivery): a device may see a notification that a crash then loses
    /// from its queue, and gets it again, with a new number, when the change is replayed.
    /// So that a number is never given twice, numbers come from blocks reserved on disk
    /// (`devices.last_seq`) before they are handed out. Batches are numbered, delivered
    /// and their writes queued in one critical section, so each device's notifications
    /// are delivered and committed in the order of their numbers (``Hub`` relies on it).
    ///
    /// One change may go to thousands of devices: its notification is stored once, each
    /// device's queue gets a small row pointing at it, written a few hundred per statement.
    /// `route` says which devices also get the notification posted to their webhook (an
    /// outbox row, in the same transaction) and which are to be woken (their wake
    /// registration's pending wake, in the same transaction).
    ///
    /// The critical section runs on ``DatabaseThreads``: numbering may read the database and
    /// wait for the writer, which must not hold an event loop (push.notify runs on one).
    ///
    /// `deferring` drafts are held for the collapse window instead (see ``Deferred``), due
    /// at `due`; `releasing` are held drafts that `drafts` now queue, deleted in the same
    /// transaction.
    func enqueue(_ drafts: [Draft], removing fired: [SubscriptionKey] = [], position: Int64? = nil,
                 deferring: [Draft] = [], due: Date = Date(), releasing: [Deferred.Key] = [], request: NotifyRequest? = nil,
                 route: @escaping @Sendable (_ family: String, _ deviceId: String) -> Route = { _, _ in Route() },
                 deliver: @escaping @Sendable ([Queued]) -> Void = { _ in }) async throws -> [Queued] {
        let held = try deferring.map { draft in (draft, try Coding.encode(draft.notification)) }
        return try await withCheckedThrowingContinuation { continuation in
            DatabaseThreads.execute { self.numbering.withLock { numbering in
                do {
                    let seqs = try self.number(drafts, &numbering)
                    let (queued, bodies) = try Self.prepare(drafts, seqs: seqs, route: route)
                    deliver(queued)
                    let stored = Self.survivors(queued)
                    var last: [DeviceKey: Int64] = [:]
                    for item in queued { last[DeviceKey(family: item.family, deviceId: item.deviceId)] = item.seq }
                    let moved = last
                    self.pool.asyncWrite({ db in
                        try Self.insert(stored, bodies: bodies, db)
                        try Self.addToOutbox(stored.filter(\.posted), db)
                        try Self.scheduleWakes(stored, db)
                        try Deferred.hold(held, due: due, db)
                        try Deferred.delete(releasing, db)
                        for key in fired {
                            try SubscriptionEntry.of(family: key.family, deviceId: key.deviceId).filter(SubscriptionEntry.Columns.id == key.id).deleteAll(db)
                        }
                        if let position { try StoreLogPosition.save(db, position) }
                        if let request { try Self.keep(request, answer: queued, db) }
                        db.afterNextTransaction(onCommit: { _ in
                            self.committed.withLock { committed in committed.merge(moved) { max($0, $1) } }
                        })
                        return queued
                    }, completion: { _, result in continuation.resume(with: result) })
                } catch {
                    continuation.resume(throwing: error)
                }
            } }
        }
    }

    /// The drafts as numbered notifications, ready to send; drafts of one group carry the
    /// same notification, encoded once without a seq (each device's number goes in front
    /// when it is sent). `bodies` holds each distinct notification's JSON once.
    private static func prepare(_ drafts: [Draft], seqs: [Int64], route: (_ family: String, _ deviceId: String) -> Route) throws -> (queued: [Queued], bodies: [String]) {
        var bodies: [String] = []
        var bodyOfGroup: [Int: Int] = [:]
        var queued: [Queued] = []
        queued.reserveCapacity(drafts.count)
        for (draft, seq) in zip(drafts, seqs) {
            let body: Int
            if let group = draft.group, let known = bodyOfGroup[group] {
                body = known
            } else {
                bodies.append(try Coding.encode(draft.notification))
                body = bodies.count - 1
                if let group = draft.group { bodyOfGroup[group] = body }
            }
            let expiresAt = draft.notification.expiresAt
            let outgoing = Outgoing(seq: seq, expiresAt: expiresAt, json: PushNotification.numbered(seq, unnumbered: EncodedJSON(bodies[body])))
            let route = route(draft.family, draft.deviceId)
            queued.append(Queued(family: draft.family, deviceId: draft.deviceId, seq: seq, collapseKey: draft.notification.collapseKey,
                                 expiresAt: expiresAt, outgoing: outgoing, body: body, posted: route.post,
                                 wake: route.wakeAfter.flatMap { after in WakeKind.of(draft.notification).map { Wake(kind: $0, after: after) } }))
        }
        return (queued, bodies)
    }

    struct DeviceKey: Hashable {
        var family: String
        var deviceId: String
    }

    /// Numbers handed out, and how far each device's numbers are reserved on disk.
    private struct Numbering {
        var last: [DeviceKey: Int64] = [:]
        var reserved: [DeviceKey: Int64] = [:]
    }

    /// Each draft's sequence number: every device's number moves by its number of drafts.
    /// A device first seen by this process continues after the highest of its reservation,
    /// its rows and its acknowledgement; a device whose reservation would run out gets a
    /// new block first, written and synced before any of its numbers is handed out.
    private func number(_ drafts: [Draft], _ numbering: inout Numbering) throws -> [Int64] {
        var counts: [DeviceKey: Int64] = [:]
        for draft in drafts { counts[DeviceKey(family: draft.family, deviceId: draft.deviceId), default: 0] += 1 }
        let unknown = counts.keys.filter { numbering.last[$0] == nil }
        if !unknown.isEmpty {
            let stored = try self.pool.read { db in try unknown.map { try Self.storedLastSeq($0, includingReserved: true, db) } }
            for (key, last) in zip(unknown, stored) {
                numbering.last[key] = last
                numbering.reserved[key] = last
            }
        }
        var reserve: [(DeviceKey, Int64)] = []
        for (key, count) in counts {
            let last = numbering.last[key, default: 0]
            if last + count > numbering.reserved[key, default: 0] { reserve.append((key, last + count + Self.reservationBlock)) }
        }
        if !reserve.isEmpty {
            try self.pool.write { db in
                for chunk in reserve.chunked(250) {
                    let sql = "INSERT INTO devices(family, device_id, last_seq) VALUES " + Self.placeholders(3, rows: chunk.count)
                        + " ON CONFLICT(family, device_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)"
                    let arguments = StatementArguments(chunk.flatMap { [$0.0.family, $0.0.deviceId, $0.1] as [(any DatabaseValueConvertible)?] })
                    try Self.statement(sql, full: chunk.count == 250, db).execute(arguments: arguments)
                }
            }
            for (key, upTo) in reserve { numbering.reserved[key] = upTo }
        }
        return drafts.map { draft in
            let key = DeviceKey(family: draft.family, deviceId: draft.deviceId)
            numbering.last[key, default: 0] += 1
            return numbering.last[key, default: 0]
        }
    }

    /// Gives back the numbers reserved and not handed out (on a clean shutdown), so that
    /// after a restart each device's numbers go on by one.
    func releaseReservations() throws {
        try self.numbering.withLock { numbering in
            let unused = numbering.reserved.filter { $0.value > numbering.last[$0.key, default: 0] }
            guard !unused.isEmpty else { return }
            try self.pool.write { db in
                for key in unused.keys {
                    try db.execute(sql: "UPDATE devices SET last_seq = ? WHERE family = ? AND device_id = ?",
                                   arguments: [numbering.last[key, default: 0], key.family, key.deviceId])
                }
            }
            for key in unused.keys { numbering.reserved[key] = numbering.last[key] }
        }
    }

    /// A device's last number in a committed row (or its acknowledgement): from memory,
    /// or read once from the database.
    private func committedLastSeq(_ key: DeviceKey, _ db: Database) throws -> Int64 {
        if let last = self.committed.withLock({ $0[key] }) { return last }
        let stored = try Self.storedLastSeq(key, includingReserved: false, db)
        return self.committed.withLock { committed in
            let last = max(committed[key] ?? 0, stored)
            committed[key] = last
            return last
        }
    }

    private static func storedLastSeq(_ key: DeviceKey, includingReserved: Bool, _ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: """
            SELECT max(
                coalesce((SELECT max(CASE WHEN ?3 THEN last_seq ELSE 0 END, acked) FROM devices WHERE family = ?1 AND device_id = ?2), 0),
                coalesce((SELECT max(seq) FROM queue WHERE family = ?1 AND device_id = ?2), 0),
                coalesce((SELECT max(seq) FROM queue_latest WHERE family = ?1 AND device_id = ?2), 0),
                coalesce((SELECT value FROM meta WHERE key = '\(Self.seqFloorKey)'), 0))
            """), arguments: [key.family, key.deviceId, includingReserved]) ?? 0
    }

    /// Where every device's numbers start at least: a restore from a backup raises it past
    /// anything the lost server can have numbered (a device it had not seen at the backup's
    /// time included), so that no device skips a new notification as one it has handled.
    static let seqFloorKey = "seq_floor"

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
            if let key = item.collapseKey,
                !seen.insert(Pending(family: item.family, deviceId: item.deviceId, collapseKey: key)).inserted { continue }
            kept.append(item)
        }
        return kept.reversed()
    }

    /// Stores each notification once and puts it in its devices' queues: a notification
    /// with a collapse key replaces the device's pending one with that key.
    private static func insert(_ queued: [Queued], bodies: [String], _ db: Database) throws {
        var ids: [Int: Int64] = [:]
        for item in queued where ids[item.body] == nil {
            try db.cachedStatement(sql: "INSERT INTO notifications(expires_at, body) VALUES (?, ?)")
                .execute(arguments: [Millis.of(item.expiresAt), bodies[item.body]])
            ids[item.body] = db.lastInsertedRowID
        }
        for chunk in queued.filter({ $0.collapseKey == nil }).chunked(200) {
            let sql = "INSERT INTO queue(family, device_id, seq, notification_id) VALUES " + Self.placeholders(4, rows: chunk.count)
            let arguments = StatementArguments(chunk.flatMap { item -> [(any DatabaseValueConvertible)?] in
                [item.family, item.deviceId, item.seq, ids[item.body]]
            })
            try Self.statement(sql, full: chunk.count == 200, db).execute(arguments: arguments)
        }
        for chunk in queued.filter({ $0.collapseKey != nil }).chunked(160) {
            let sql = "INSERT INTO queue_latest(family, device_id, collapse_key, seq, notification_id) VALUES " + Self.placeholders(5, rows: chunk.count)
                + " ON CONFLICT(family, device_id, collapse_key) DO UPDATE SET seq = excluded.seq, notification_id = excluded.notification_id"
            let arguments = StatementArguments(chunk.flatMap { item -> [(any DatabaseValueConvertible)?] in
                [item.family, item.deviceId, item.collapseKey, item.seq, ids[item.body]]
            })
            try Self.statement(sql, full: chunk.count == 160, db).execute(arguments: arguments)
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
    func pending(family: String, deviceId: String, after: Int64, limit: Int, now: Date) async throws -> [Outgoing] {
        try await self.pool.read { db in
            // Cached: every listen reads its backlog, and preparing the statement (a view
            // of two joins) costs more than running it on an empty queue.
            try PendingRow.fetchAll(db.cachedStatement(sql: """
                SELECT seq, expires_at, body FROM pending WHERE family = ? AND device_id = ? AND seq > ? AND expires_at > ? ORDER BY seq LIMIT ?
                """), arguments: [family, deviceId, after, Millis.of(now), limit]).map(\.outgoing)
        }
    }

    func acked(family: String, deviceId: String) async throws -> Int64 {
        try await self.pool.read { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT acked FROM devices WHERE family = ? AND device_id = ?"), arguments: [family, deviceId]) ?? 0
        }
    }

    /// Moves the device's acknowledgement forward (never past its last notification, never
    /// back) and drops what it covers.
    func ack(family: String, deviceId: String, upTo: Int64) async throws -> AckResult {
        try await self.pool.write { db in
            let last = try self.committedLastSeq(DeviceKey(family: family, deviceId: deviceId), db)
            try db.execute(cached: """
                INSERT INTO devices(family, device_id, acked) VALUES (?, ?, ?)
                ON CONFLICT(family, device_id) DO UPDATE SET acked = max(acked, excluded.acked)
                """, arguments: [family, deviceId, min(upTo, last)])
            // Every listening device acknowledges what it is sent: cached statements.
            let acked = try Int64.fetchOne(cached: db, sql: "SELECT acked FROM devices WHERE family = ? AND device_id = ?", arguments: [family, deviceId]) ?? 0
            try db.execute(cached: "DELETE FROM queue WHERE family = ? AND device_id = ? AND seq <= ?", arguments: [family, deviceId, acked])
            try db.execute(cached: "DELETE FROM queue_latest WHERE family = ? AND device_id = ? AND seq <= ?", arguments: [family, deviceId, acked])
            try db.execute(cached: "DELETE FROM outbox WHERE family = ? AND device_id = ? AND seq <= ?", arguments: [family, deviceId, acked])
            // Acknowledged in time: the device needs no wake for it.
            try Self.cancelWake(family: family, deviceId: deviceId, upTo: acked, db)
            let pending = try Int.fetchOne(cached: db, sql: """
                SELECT (SELECT count(*) FROM queue WHERE family = ?1 AND device_id = ?2) + (SELECT count(*) FROM queue_latest WHERE family = ?1 AND device_id = ?2)
                """, arguments: [family, deviceId]) ?? 0
            return AckResult(acked: acked, pending: pending)
        }
    }

    // MARK: push.notify's request ids

    /// A `push.notify` named by its caller: its answer is kept with what it queued, in one
    /// transaction, so a retry finds either both or neither.
    struct NotifyRequest: Sendable {
        var family: String
        var id: String
        var at: Date
    }

    /// How long an answer is kept for a retry: past a caller's restart, or its days away.
    static let notifyRequestLifetime: TimeInterval = 7 * 86_400

    /// The answer to the named request, if it was queued (and not forgotten yet).
    func notifyAnswer(family: String, requestId: String) async throws -> NotifyResult? {
        try await self.pool.read { db in
            try String.fetchOne(db, sql: "SELECT result FROM notify_requests WHERE family = ? AND request_id = ?", arguments: [family, requestId])
        }.map { try RPCJSON.decode(NotifyResult.self, from: Data($0.utf8)) }
    }

    private static func keep(_ request: NotifyRequest, answer queued: [Queued], _ db: Database) throws {
        let answer = NotifyResult(queued: queued.map { QueuedNotification(deviceId: $0.deviceId, seq: $0.seq) })
        try db.execute(sql: "INSERT OR REPLACE INTO notify_requests(family, request_id, result, at_ms) VALUES (?, ?, ?, ?)",
                       arguments: [request.family, request.id, try RPCJSON.encodeText(answer), Millis.of(request.at)])
    }

    /// Drops expired notifications, and stored notifications no queue points at any more
    /// (acknowledged or replaced everywhere), and request ids past their week; returns how
    /// many queued ones expired.
    func purgeExpired(now: Date) async throws -> Int {
        try await self.pool.write { db in
            let cut = Millis.of(now)
            try db.execute(sql: "DELETE FROM notify_requests WHERE at_ms < ?", arguments: [Millis.of(now.addingTimeInterval(-Self.notifyRequestLifetime))])
            var dropped = 0
            // A device's numbers need nothing kept when its rows go: `devices.last_seq`
            // is at or past every number handed out (reserved before they were).
            let notification = StoredNotification.Columns.self
            let expired = StoredNotification.filter(notification.expiresAt <= cut)
            if try !expired.isEmpty(db) {
                for queue in DeviceQueue.all {
                    dropped += try Table(queue.table).filter(expired.select(notification.id).contains(DeviceQueue.Columns.notificationID)).deleteAll(db)
                }
                try expired.deleteAll(db)
            }
            var unreferenced = StoredNotification.all()
            for queue in DeviceQueue.all {
                unreferenced = unreferenced.filter(!Table(queue.table).select(DeviceQueue.Columns.notificationID).contains(notification.id))
            }
            try unreferenced.deleteAll(db)
            return dropped
        }
    }

    /// A notification to queue for a device; its `seq` is set when queued. Drafts with the
    /// same `group` carry the same notification (one change, one subscription spec, many
    /// devices), which is then encoded once.
    /// A stored body that is not a notification.
    struct Unreadable: Error {}

    /// Notifications waiting in the devices' queues (for the metrics).
    func pendingCount() async throws -> Int {
        try await self.pool.read { db in try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM queue) + (SELECT count(*) FROM queue_latest)") ?? 0 }
    }

    struct Draft: Sendable {
        var family: String
        var deviceId: String
        var notification: PushNotification
        var group: Int?
    }

    /// A notification as queued for one device: what the queue row and the live stream
    /// need (not a copy of the whole notification per device).
    struct Queued: Sendable {
        var family: String
        var deviceId: String
        var seq: Int64
        var collapseKey: String?
        var expiresAt: Date
        var outgoing: Outgoing
        /// Which of the batch's stored notifications this is (drafts of one group share one).
        var body: Int
        /// Also to be posted to the device's webhook.
        var posted: Bool
        /// The device is to be woken for it (unless it acknowledges first).
        var wake: Wake?
    }

    /// Where a device's notification goes besides its listeners.
    struct Route: Sendable {
        /// To its webhook.
        var post = false
        /// A wake, due after this long (zero: the device is not listening); nil: none.
        var wakeAfter: Duration?
    }

    struct Wake: Sendable {
        var kind: WakeKind
        var after: Duration
    }

    struct SubscriptionKey: Sendable, Hashable {
        var family: String
        var deviceId: String
        var id: String
    }
}

/// A row of the `pending` view (a device's queued notification), ready to send.
private struct PendingRow: FetchableRecord {
    enum Columns {
        static let seq = Column("seq"), expiresAt = Column("expires_at"), body = Column("body")
    }

    var outgoing: Outgoing

    init(row: Row) {
        let seq: Int64 = row[Columns.seq]
        let expires: Int64 = row[Columns.expiresAt]
        self.outgoing = Outgoing(seq: seq, expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000),
                                 json: PushNotification.numbered(seq, unnumbered: EncodedJSON(row[Columns.body] as String)))
    }
}
