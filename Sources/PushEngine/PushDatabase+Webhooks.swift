import DurableSQLite
import Foundation
import GRDB
import PushAPI

/// Webhooks and their outbox: what is still to be posted, when, after how many attempts.
extension PushDatabase {
    struct Webhook: Sendable {
        var url: String
        var format: WebhookFormat
        var authorization: String?
    }

    /// A queued notification due to be posted to its device's webhook.
    struct Delivery: Sendable {
        var family: String
        var deviceId: String
        var seq: Int64
        /// Attempts made already.
        var attempts: Int
        /// The notification's JSON without its seq.
        var body: String
        var expiresAt: Date
        var webhook: Webhook
    }

    func setWebhook(family: String, deviceId: String, _ webhook: Webhook, now: Date) async throws -> WebhookInfo {
        try await self.pool.write { db in
            // Set again: active, with no delivery or error yet. (SQL: GRDB's upsert reads the
            // row back by rowid, which a WITHOUT ROWID table has not.)
            try db.execute(sql: """
                INSERT INTO webhooks(family, device_id, url, format, authorization, status, created_at) VALUES (?, ?, ?, ?, ?, 'active', ?)
                ON CONFLICT(family, device_id) DO UPDATE SET url = excluded.url, format = excluded.format, authorization = excluded.authorization,
                    status = 'active', created_at = excluded.created_at, delivered_at = NULL, last_error = NULL
                """, arguments: [family, deviceId, webhook.url, webhook.format.rawValue, webhook.authorization, Millis.of(now)])
            return try Self.webhookInfo(family: family, deviceId: deviceId, db)!
        }
    }

    func webhook(family: String, deviceId: String) async throws -> WebhookInfo? {
        try await self.pool.read { db in try Self.webhookInfo(family: family, deviceId: deviceId, db) }
    }

    /// Removes the webhook and what was waiting for it; false when there was none.
    func removeWebhook(family: String, deviceId: String) async throws -> Bool {
        try await self.pool.write { db in try Self.deleteWebhook(family: family, deviceId: deviceId, db) }
    }

    static func deleteWebhook(family: String, deviceId: String, _ db: Database) throws -> Bool {
        try OutboxEntry.of(family: family, deviceId: deviceId).deleteAll(db)
        return try WebhookRow.of(family: family, deviceId: deviceId).deleteAll(db) > 0
    }

    /// Removes the wake registrations and webhooks of revoked devices, in one transaction
    /// however many (the first snapshot after a start names every device ever revoked);
    /// what each had.
    func removeRegistrations(of devices: [DeviceKey]) async throws -> [(device: DeviceKey, wake: Bool, webhook: Bool)] {
        try await self.pool.write { db in
            try devices.map { device in
                (device, try Self.deleteWake(family: device.family, deviceId: device.deviceId, db),
                 try Self.deleteWebhook(family: device.family, deviceId: device.deviceId, db))
            }
        }
    }

    /// The devices whose webhook takes deliveries.
    func activeWebhooks() async throws -> [(family: String, deviceId: String)] {
        try await self.pool.read { db in
            try WebhookRow.filter(WebhookRow.Columns.status == WebhookStatus.active.rawValue).fetchAll(db).map { ($0.family, $0.deviceId) }
        }
    }

    /// Up to `limit` deliveries due by `now`, oldest first. Outbox rows whose notification
    /// left the queue meanwhile (acknowledged, replaced by a newer one with the same
    /// collapse key, expired) or whose webhook is gone are dropped on the way.
    func dueDeliveries(now: Date, limit: Int) async throws -> [Delivery] {
        try await self.pool.write { db in
            // SQL: a join through whichever queue still points at the notification.
            let rows = try OutboxRow.fetchAll(db, sql: """
                SELECT o.family, o.device_id, o.seq, o.attempts, n.body, n.expires_at, w.url, w.format, w.authorization, w.status
                FROM outbox o
                LEFT JOIN notifications n ON n.id = coalesce(
                    (SELECT notification_id FROM queue q WHERE q.family = o.family AND q.device_id = o.device_id AND q.seq = o.seq),
                    (SELECT notification_id FROM queue_latest l WHERE l.family = o.family AND l.device_id = o.device_id AND l.seq = o.seq))
                LEFT JOIN webhooks w ON w.family = o.family AND w.device_id = o.device_id
                WHERE o.due_at <= ? ORDER BY o.due_at LIMIT ?
                """, arguments: [Millis.of(now), limit])
            var due: [Delivery] = []
            for row in rows {
                guard let body = row.body, let expires = row.expiresAt, expires > Millis.of(now), row.status == WebhookStatus.active.rawValue,
                      let url = row.url, let format = WebhookFormat(rawValue: row.format ?? "")
                else {
                    try Self.dropDelivery(family: row.key.family, deviceId: row.key.deviceId, seq: row.seq, db)
                    continue
                }
                due.append(Delivery(
                    family: row.key.family, deviceId: row.key.deviceId, seq: row.seq, attempts: row.attempts, body: body,
                    expiresAt: Date(timeIntervalSince1970: Double(expires) / 1000),
                    webhook: Webhook(url: url, format: format, authorization: row.authorization)))
            }
            return due
        }
    }

    /// When the next delivery is due, if any.
    func nextDue() async throws -> Date? {
        try await self.pool.read { db in
            try OutboxEntry.select(min(OutboxEntry.Columns.dueAt), as: Int64.self).fetchOne(db).map { Date(timeIntervalSince1970: Double($0) / 1000) }
        }
    }

    /// The endpoint took it (or it was not for this format): done.
    func delivered(_ delivery: Delivery, at now: Date?) async throws {
        try await self.pool.write { db in
            try Self.dropDelivery(family: delivery.family, deviceId: delivery.deviceId, seq: delivery.seq, db)
            if let now {
                try WebhookRow.of(family: delivery.family, deviceId: delivery.deviceId)
                    .updateAll(db, WebhookRow.Columns.deliveredAt.set(to: Millis.of(now)), WebhookRow.Columns.lastError.set(to: nil))
            }
        }
    }

    /// Tries again at `due`.
    func retry(_ delivery: Delivery, at due: Date, error: String) async throws {
        try await self.pool.write { db in
            try OutboxEntry.of(family: delivery.family, deviceId: delivery.deviceId).filter(OutboxEntry.Columns.seq == delivery.seq)
                .updateAll(db, OutboxEntry.Columns.attempts += 1, OutboxEntry.Columns.dueAt.set(to: Millis.of(due)))
            try Self.noteError(error, delivery, db)
        }
    }

    /// Gives up on this one (it stays in the device's queue for its next listen).
    func abandon(_ delivery: Delivery, error: String) async throws {
        try await self.pool.write { db in
            try Self.dropDelivery(family: delivery.family, deviceId: delivery.deviceId, seq: delivery.seq, db)
            try Self.noteError(error, delivery, db)
        }
    }

    /// The endpoint no longer exists: the webhook is marked gone and its outbox emptied.
    func webhookGone(_ delivery: Delivery, error: String) async throws {
        try await self.pool.write { db in
            try OutboxEntry.of(family: delivery.family, deviceId: delivery.deviceId).deleteAll(db)
            try WebhookRow.of(family: delivery.family, deviceId: delivery.deviceId).updateAll(db, WebhookRow.Columns.status.set(to: WebhookStatus.gone.rawValue))
            try Self.noteError(error, delivery, db)
        }
    }

    /// On the notification path (every batch of changes): one statement for up to 300 rows.
    static func addToOutbox(_ queued: [Queued], _ db: Database) throws {
        let now = Millis.of(Date())
        for chunk in queued.chunked(300) {
            let sql = "INSERT OR IGNORE INTO outbox(family, device_id, seq, due_at) VALUES " + Self.placeholders(4, rows: chunk.count)
            let arguments = StatementArguments(chunk.flatMap { item -> [(any DatabaseValueConvertible)?] in
                [item.family, item.deviceId, item.seq, now]
            })
            try db.execute(sql: sql, arguments: arguments)
        }
    }

    private static func dropDelivery(family: String, deviceId: String, seq: Int64, _ db: Database) throws {
        try OutboxEntry.of(family: family, deviceId: deviceId).filter(OutboxEntry.Columns.seq == seq).deleteAll(db)
    }

    private static func noteError(_ error: String, _ delivery: Delivery, _ db: Database) throws {
        try WebhookRow.of(family: delivery.family, deviceId: delivery.deviceId).updateAll(db, WebhookRow.Columns.lastError.set(to: error))
    }

    /// The webhook with its outbox's count (one statement: the count is a subquery).
    private static func webhookInfo(family: String, deviceId: String, _ db: Database) throws -> WebhookInfo? {
        try WebhookInfoRow.fetchOne(db, sql: """
            SELECT url, format, authorization IS NOT NULL AS has_authorization, status, created_at, delivered_at, last_error,
                (SELECT count(*) FROM outbox o WHERE o.family = w.family AND o.device_id = w.device_id) AS pending
            FROM webhooks w WHERE family = ? AND device_id = ?
            """, arguments: [family, deviceId])?.info
    }
}

/// A device's webhook (the `webhooks` table).
private struct WebhookRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "webhooks"

    enum Columns {
        static let family = Column(CodingKeys.family), deviceId = Column(CodingKeys.deviceId), status = Column(CodingKeys.status)
        static let deliveredAt = Column(CodingKeys.deliveredAt), lastError = Column(CodingKeys.lastError)
    }

    enum CodingKeys: String, CodingKey {
        case family, deviceId = "device_id", url, format, authorization, status, createdAt = "created_at", deliveredAt = "delivered_at"
        case lastError = "last_error"
    }

    var family: String
    var deviceId: String
    var url: String
    var format: String
    var authorization: String?
    var status: String
    var createdAt: Int64
    var deliveredAt: Int64?
    var lastError: String?

    static func of(family: String, deviceId: String) -> QueryInterfaceRequest<WebhookRow> {
        self.filter(Columns.family == family && Columns.deviceId == deviceId)
    }
}

/// A notification still to be posted to its device's webhook (the `outbox` table).
private enum OutboxEntry: TableRecord {
    static let databaseTableName = "outbox"

    enum Columns {
        static let family = Column("family"), deviceId = Column("device_id"), seq = Column("seq"), attempts = Column("attempts")
        static let dueAt = Column("due_at")
    }

    static func of(family: String, deviceId: String) -> QueryInterfaceRequest<OutboxEntry> {
        self.filter(Columns.family == family && Columns.deviceId == deviceId)
    }
}

/// An outbox row with its notification and its webhook, as `dueDeliveries` selects them:
/// a notification that left the queue, or a webhook removed, reads as nil.
private struct OutboxRow: FetchableRecord {
    /// The device the row is for.
    struct Key: FetchableRecord {
        var family: String
        var deviceId: String

        init(row: Row) {
            self.family = row[Columns.family]
            self.deviceId = row[Columns.deviceId]
        }
    }

    enum Columns {
        static let family = Column("family"), deviceId = Column("device_id"), seq = Column("seq"), attempts = Column("attempts")
        static let body = Column("body"), expiresAt = Column("expires_at")
        static let url = Column("url"), format = Column("format"), authorization = Column("authorization"), status = Column("status")
    }

    var key: Key
    var seq: Int64
    var attempts: Int
    var body: String?
    var expiresAt: Int64?
    var url: String?
    var format: String?
    var authorization: String?
    var status: String?

    init(row: Row) {
        self.key = Key(row: row)
        self.seq = row[Columns.seq]
        self.attempts = row[Columns.attempts]
        self.body = row[Columns.body]
        self.expiresAt = row[Columns.expiresAt]
        self.url = row[Columns.url]
        self.format = row[Columns.format]
        self.authorization = row[Columns.authorization]
        self.status = row[Columns.status]
    }
}

/// A webhook as `push.getWebhook` reports it, from its row and its outbox count.
private struct WebhookInfoRow: FetchableRecord {
    enum Columns {
        static let url = Column("url"), format = Column("format"), hasAuthorization = Column("has_authorization"), status = Column("status")
        static let createdAt = Column("created_at"), deliveredAt = Column("delivered_at"), lastError = Column("last_error"), pending = Column("pending")
    }

    var info: WebhookInfo

    init(row: Row) {
        let delivered: Int64? = row[Columns.deliveredAt]
        let created: Int64 = row[Columns.createdAt]
        self.info = WebhookInfo(
            url: row[Columns.url], format: WebhookFormat(rawValue: row[Columns.format]) ?? .unifiedpush, hasAuthorization: row[Columns.hasAuthorization],
            status: WebhookStatus(rawValue: row[Columns.status]) ?? .gone, createdAt: Date(timeIntervalSince1970: Double(created) / 1000),
            deliveredAt: delivered.map { Date(timeIntervalSince1970: Double($0) / 1000) }, lastError: row[Columns.lastError], pending: row[Columns.pending])
    }
}
