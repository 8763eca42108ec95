import DurableSQLite
import Foundation
import GRDB

extension PushDatabase {
    /// The database's history, oldest first: each migration is named and never edited once
    /// shipped; a change is a new migration.
    static var migrations: DatabaseMigrator {
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
        migrator.registerMigration("push-v3-shared-notifications") { db in
            // A notification that goes to a thousand devices is stored once, and a device's
            // queue rows only point at it; a notification with a collapse key has one row
            // per device and key, replaced in place by the next one.
            try db.execute(sql: """
                CREATE TABLE notifications (
                    id INTEGER PRIMARY KEY,
                    expires_at INTEGER NOT NULL,
                    -- the PushNotification as JSON without its seq (each device has its own)
                    body TEXT NOT NULL
                );
                CREATE INDEX notifications_by_expiry ON notifications(expires_at);
                ALTER TABLE queue RENAME TO queue_v2;
                DROP INDEX queue_by_collapse_key;
                DROP INDEX queue_by_expiry;
                -- pending notifications without a collapse key
                CREATE TABLE queue (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    notification_id INTEGER NOT NULL,
                    PRIMARY KEY (family, device_id, seq)
                ) WITHOUT ROWID;
                -- the pending notification of each collapse key: a newer one replaces it
                CREATE TABLE queue_latest (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    collapse_key TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    notification_id INTEGER NOT NULL,
                    PRIMARY KEY (family, device_id, collapse_key)
                ) WITHOUT ROWID;
                CREATE TEMP TABLE numbered AS
                    SELECT row_number() OVER (ORDER BY family, device_id, seq) AS id, * FROM queue_v2;
                INSERT INTO notifications(id, expires_at, body) SELECT id, expires_at, body FROM numbered;
                INSERT INTO queue(family, device_id, seq, notification_id)
                    SELECT family, device_id, seq, id FROM numbered WHERE collapse_key IS NULL;
                INSERT OR REPLACE INTO queue_latest(family, device_id, collapse_key, seq, notification_id)
                    SELECT family, device_id, collapse_key, seq, id FROM numbered WHERE collapse_key IS NOT NULL ORDER BY seq;
                DROP TABLE numbered;
                DROP TABLE queue_v2;
                -- a device's queue, as one: what push.listen sends and the outbox posts
                CREATE VIEW pending AS
                    SELECT q.family, q.device_id, q.seq, n.expires_at, n.body
                        FROM queue q JOIN notifications n ON n.id = q.notification_id
                    UNION ALL
                    SELECT l.family, l.device_id, l.seq, n.expires_at, n.body
                        FROM queue_latest l JOIN notifications n ON n.id = l.notification_id;
                """)
        }
        migrator.registerMigration("push-v4-collapse-window") { db in
            try db.execute(sql: """
                -- a change's notification held for the collapse window: a burst of changes
                -- for one device and collapse key becomes its last one (version counts the
                -- replacements, so a release deletes only what it sent)
                CREATE TABLE deferred (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    collapse_key TEXT NOT NULL,
                    due_ms INTEGER NOT NULL,
                    version INTEGER NOT NULL DEFAULT 1,
                    body TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, collapse_key)
                ) WITHOUT ROWID;
                CREATE INDEX deferred_by_due ON deferred(due_ms);
                """)
        }
        migrator.registerMigration("push-v5-wakes") { db in
            try db.execute(sql: """
                -- a device's wake registration (the relay's sealed handle for its APNs token)
                -- and its one pending wake: more notifications for a device already due to
                -- be woken only raise the wake's kind and sequence number
                CREATE TABLE wakes (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    handle TEXT NOT NULL,
                    relay TEXT NOT NULL,
                    status TEXT NOT NULL DEFAULT 'active',
                    registered_at INTEGER NOT NULL,
                    -- the pending wake: when, up to which notification, background or alert
                    due_ms INTEGER,
                    due_seq INTEGER,
                    due_kind TEXT,
                    due_expires_ms INTEGER,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    -- the times (ms) of the background wakes sent in the last hour, comma separated
                    recent TEXT NOT NULL DEFAULT '',
                    last_wake_at INTEGER,
                    -- the last notification the last wake sent was for
                    last_wake_seq INTEGER,
                    last_outcome TEXT,
                    last_error TEXT,
                    PRIMARY KEY (family, device_id)
                ) WITHOUT ROWID;
                CREATE INDEX wakes_by_due ON wakes(due_ms) WHERE due_ms IS NOT NULL;
                """)
        }
        migrator.registerMigration("push-v6-notify-requests") { db in
            try db.execute(sql: """
                -- push.notify's answers by the caller's request id, for a retry (kept a week)
                CREATE TABLE notify_requests (
                    family TEXT NOT NULL,
                    request_id TEXT NOT NULL,
                    result TEXT NOT NULL,
                    at_ms INTEGER NOT NULL,
                    PRIMARY KEY (family, request_id)
                ) WITHOUT ROWID;
                CREATE INDEX notify_requests_by_time ON notify_requests(at_ms);
                """)
        }
        migrator.registerMigration("push-v7-wake-alert-seq") { db in
            try db.execute(sql: """
                -- the last notification of the pending wake that asked for an alert: when a wake
                -- is sent, those after it are woken with their own kind, not the one sent
                ALTER TABLE wakes ADD COLUMN due_alert_seq INTEGER;
                UPDATE wakes SET due_alert_seq = due_seq WHERE due_kind = 'alert';
                """)
        }
        return migrator
    }
}
