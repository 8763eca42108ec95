import GRDB

// Push's tables as GRDB's query interface names them, for what runs beside the
// notification path: subscriptions and expiry. Filling the queues, the outbox and the
// wakes for a batch of changes, and each device's acknowledgements, stay SQL in the
// statement cache (docs/architecture.md, "SQL and the query interface").

/// `subscriptions`: each device's subscriptions, as JSON.
enum SubscriptionEntry: TableRecord {
    static let databaseTableName = "subscriptions"
    enum Columns {
        static let family = Column("family"), deviceId = Column("device_id"), id = Column("id"), body = Column("body")
    }

    static func of(family: String, deviceId: String) -> QueryInterfaceRequest<SubscriptionEntry> {
        Self.filter(Columns.family == family && Columns.deviceId == deviceId)
    }
}

/// `queue` (every notification) and `queue_latest` (the pending one of each collapse key):
/// a device's notifications by number, pointing at their stored bodies.
struct DeviceQueue {
    static let all = [DeviceQueue(table: "queue"), DeviceQueue(table: "queue_latest")]

    enum Columns {
        static let notificationID = Column("notification_id")
    }

    let table: String
}

/// `notifications`: each notification's body, stored once for all its devices.
enum StoredNotification: TableRecord {
    static let databaseTableName = "notifications"
    enum Columns {
        static let id = Column("id"), expiresAt = Column("expires_at")
    }
}
