import DurableSQLite
import Foundation
import GRDB

extension AggregatorDatabase {
    /// The database's history, oldest first: each migration is named and never edited once
    /// shipped; a change is a new migration.
    static var migrations: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("aggregator-v1") { db in
            try db.execute(sql: """
                -- the UsageRecords as last seen (one row per record)
                CREATE TABLE sessions (
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    app TEXT NOT NULL,
                    bundle_id TEXT,
                    category TEXT,
                    start_ms INTEGER NOT NULL,
                    end_ms INTEGER NOT NULL,
                    PRIMARY KEY (family, zone, record_name)
                ) WITHOUT ROWID;
                CREATE INDEX sessions_by_device ON sessions(family, device_id, start_ms);
                -- a device's local day, as computed
                CREATE TABLE days (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    day TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    learning_seconds INTEGER NOT NULL,
                    reward_seconds INTEGER NOT NULL,
                    points INTEGER NOT NULL,
                    apps TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, day)
                ) WITHOUT ROWID;
                -- days whose DailySummary record must be written (or deleted) in the store
                CREATE TABLE summary_outbox (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    day TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    PRIMARY KEY (family, device_id, day)
                ) WITHOUT ROWID;
                CREATE TABLE families (
                    family TEXT PRIMARY KEY NOT NULL,
                    time_zone TEXT NOT NULL
                ) WITHOUT ROWID;
                -- AppRule (family-wide, by bundle id) and AppConfiguration (per device, by logical id)
                CREATE TABLE app_rules (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,  -- '' for a family-wide AppRule
                    app TEXT NOT NULL,        -- bundle id (AppRule) or logical id (AppConfiguration)
                    record TEXT NOT NULL,     -- zone/recordName of the rule, to forget it on delete
                    category TEXT,
                    points_per_minute INTEGER,
                    PRIMARY KEY (family, device_id, app)
                ) WITHOUT ROWID;
                CREATE INDEX app_rules_by_record ON app_rules(family, record);
                -- a child device's zone: its device and child (from the MonitoringSession)
                CREATE TABLE devices (
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    device_id TEXT,
                    child_ref TEXT,
                    PRIMARY KEY (family, zone)
                ) WITHOUT ROWID;
                """)
            try db.execute(sql: MetaTable.createSQL)
        }
        migrator.registerMigration("aggregator-v2-earned-time") { db in
            try db.execute(sql: """
                ALTER TABLE families ADD COLUMN seconds_per_point INTEGER NOT NULL DEFAULT 60;
                -- redemptions and adjustments parents wrote (accruals are the aggregator's own)
                CREATE TABLE ledger (
                    family TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    child TEXT NOT NULL,
                    type TEXT NOT NULL,
                    amount INTEGER NOT NULL,
                    PRIMARY KEY (family, record_name)
                ) WITHOUT ROWID;
                CREATE INDEX ledger_by_child ON ledger(family, child);
                -- a child's earned time as last computed; shield_version counts shield changes,
                -- commands_version the last one written to the child's devices
                CREATE TABLE children (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    points INTEGER NOT NULL,
                    reward_seconds INTEGER NOT NULL,
                    balance_seconds INTEGER NOT NULL,
                    shielded INTEGER NOT NULL,
                    shield_version INTEGER NOT NULL DEFAULT 0,
                    commands_version INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (family, child)
                ) WITHOUT ROWID;
                -- a child's accrual for a day (day) or its balance (day = '') to write to the store
                CREATE TABLE child_outbox (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    day TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    PRIMARY KEY (family, child, day)
                ) WITHOUT ROWID;
                CREATE TABLE shield_policies (
                    family TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    child TEXT NOT NULL,  -- '' for the family's default policy
                    apps TEXT NOT NULL,
                    categories TEXT NOT NULL,
                    PRIMARY KEY (family, record_name)
                ) WITHOUT ROWID;
                CREATE INDEX devices_by_device ON devices(family, device_id);
                """)
        }
        migrator.registerMigration("aggregator-v3-alerts") { db in
            try db.execute(sql: """
                ALTER TABLE families ADD COLUMN alert_reward_minutes INTEGER;
                ALTER TABLE families ADD COLUMN alert_exhausted INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE families ADD COLUMN alert_no_data_hours INTEGER;
                -- alerts that fired and are not re-armed yet: (kind, subject, day)
                CREATE TABLE alerts_fired (
                    family TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    day TEXT NOT NULL,
                    PRIMARY KEY (family, kind, subject, day)
                ) WITHOUT ROWID;
                -- alerts to send to the family's parents through push.notify
                CREATE TABLE alert_outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    family TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    title TEXT NOT NULL,
                    body TEXT NOT NULL,
                    data TEXT NOT NULL
                );
                """)
        }
        migrator.registerMigration("aggregator-v4-retention") { db in
            // Entries known before now get today as their date: kept another retention period.
            try db.execute(sql: """
                ALTER TABLE ledger ADD COLUMN at_ms INTEGER NOT NULL DEFAULT 0;
                UPDATE ledger SET at_ms = ?;
                -- days before this one are rolled up: never computed again
                ALTER TABLE families ADD COLUMN sealed_before TEXT NOT NULL DEFAULT '';
                -- what was pruned from the store, per child and week (its Monday)
                CREATE TABLE carried (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    week TEXT NOT NULL,
                    redeemed INTEGER NOT NULL DEFAULT 0,
                    adjusted INTEGER NOT NULL DEFAULT 0,
                    ledger_entries INTEGER NOT NULL DEFAULT 0,
                    usage_records INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (family, child, week)
                ) WITHOUT ROWID;
                -- WeeklySummary records to write
                CREATE TABLE week_outbox (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    week TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    PRIMARY KEY (family, child, week)
                ) WITHOUT ROWID;
                -- records to delete from the store
                CREATE TABLE prune_outbox (
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    PRIMARY KEY (family, zone, record_name)
                ) WITHOUT ROWID;
                """, arguments: [Millis.of(Date())])
        }
        migrator.registerMigration("aggregator-v5-child-names") { db in
            // The child's name from its zone's MonitoringSession, for the parents' alerts
            // (zones known before this learn it at that record's next change; until then
            // the alerts name the child by its record).
            try db.execute(sql: "ALTER TABLE devices ADD COLUMN child_name TEXT")
        }
        migrator.registerMigration("aggregator-v6-configuration") { db in
            try db.execute(sql: """
                -- the family's configuration version: one more at each change of its rules
                ALTER TABLE families ADD COLUMN config_version INTEGER NOT NULL DEFAULT 0;
                -- a device's pairing (its MonitoringSession's status: pending, active,
                -- revoked) and the configuration version it last executed
                ALTER TABLE devices ADD COLUMN status TEXT;
                ALTER TABLE devices ADD COLUMN applied_version INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE devices ADD COLUMN applied_at_ms INTEGER;
                -- the device's name (its RegisteredDevice), for the parents' alerts
                ALTER TABLE devices ADD COLUMN device_name TEXT;
                ALTER TABLE devices ADD COLUMN app_version TEXT;
                -- a rule that blocks its app, and the app's name for people
                ALTER TABLE app_rules ADD COLUMN blocked INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE app_rules ADD COLUMN display_name TEXT;
                -- each rule as it was from a moment on (its save; category '': no rule from
                -- then, NULL: a rule naming no category): usage counts at the rule in force
                -- when it was used
                CREATE TABLE rule_history (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,  -- '' for the family's AppRule
                    app TEXT NOT NULL,
                    from_ms INTEGER NOT NULL,
                    category TEXT,
                    points_per_minute INTEGER,
                    blocked INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (family, device_id, app, from_ms)
                ) WITHOUT ROWID;
                -- the rules known before: in force since always
                INSERT INTO rule_history(family, device_id, app, from_ms, category, points_per_minute, blocked)
                    SELECT family, device_id, app, 0, category, points_per_minute, 0 FROM app_rules;
                -- configuration snapshots to write to devices' zones (version: of this row,
                -- to know a newer request came while it was written)
                CREATE TABLE config_outbox (
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    PRIMARY KEY (family, zone)
                ) WITHOUT ROWID;
                """)
            // Devices known before keep a NULL status: at its next start the aggregator reads
            // their pairing and names, and their families' rules, from the store again
            // (UsageFollower.refreshFromStore), and sends the active ones their configuration.
        }
        migrator.registerMigration("aggregator-v7-ledger-and-clocks") { db in
            try db.execute(sql: """
                -- the aggregator's own ledger entries, each written to the store once and never
                -- changed: per child and day, entries whose sum (reversals taken off) is the
                -- day's points; seq numbers them in the day
                CREATE TABLE accruals (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    day TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    type TEXT NOT NULL,  -- accrual, or reversal: points counted and taken back
                    amount INTEGER NOT NULL,
                    at_ms INTEGER NOT NULL,
                    written INTEGER NOT NULL DEFAULT 0,
                    replaces TEXT,  -- an entry of the day's earlier single accrual, deleted when this is written
                    PRIMARY KEY (family, child, day, seq)
                ) WITHOUT ROWID;
                CREATE INDEX accruals_to_write ON accruals(family) WHERE written = 0;
                -- each day's accrual as one rewritten entry before: now the day's first entry
                INSERT INTO accruals(family, child, day, seq, type, amount, at_ms, replaces)
                    SELECT d.family, v.child_ref, d.day, 1, 'accrual', sum(d.points), ?, 'accrual-' || v.child_ref || '-' || d.day
                    FROM days d JOIN devices v ON v.family = d.family AND v.device_id = d.device_id
                    LEFT JOIN families f ON f.family = d.family
                    WHERE v.child_ref IS NOT NULL AND d.day >= coalesce(f.sealed_before, '')
                    GROUP BY d.family, v.child_ref, d.day HAVING sum(d.points) > 0;
                -- a day whose points fell to nothing had its entry's delete queued: still deleted
                INSERT OR IGNORE INTO prune_outbox(family, zone, record_name)
                    SELECT o.family, 'default', 'accrual-' || o.child || '-' || o.day FROM child_outbox o
                    WHERE o.day != '' AND NOT EXISTS (SELECT 1 FROM accruals a WHERE a.family = o.family AND a.child = o.child AND a.day = o.day);
                -- child_outbox keeps balances only (day = '')
                DELETE FROM child_outbox WHERE day != '';
                -- how far the device's clock was ahead of the server's (seconds), by its
                -- newest session
                ALTER TABLE devices ADD COLUMN clock_offset_s INTEGER NOT NULL DEFAULT 0;
                -- when that session was sent (an older one, replayed, does not count)
                ALTER TABLE devices ADD COLUMN clock_at_ms INTEGER NOT NULL DEFAULT 0;
                """, arguments: [Millis.of(Date())])
        }
        migrator.registerMigration("aggregator-v8-parenting") { db in
            try db.execute(sql: """
                -- a child's requests for more time; the row is the truth, the store's
                -- TimeRequest its copy (an answer is taken here, once: status = 'open' → another)
                CREATE TABLE time_requests (
                    family TEXT NOT NULL,
                    id TEXT NOT NULL,  -- request-<uuid>: the record's name
                    child TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    minutes INTEGER NOT NULL,
                    rest_of_day INTEGER NOT NULL DEFAULT 0,
                    app TEXT,
                    app_name TEXT,
                    note TEXT,
                    status TEXT NOT NULL,  -- open, approved, denied, expired
                    created_ms INTEGER NOT NULL,
                    expires_ms INTEGER NOT NULL,
                    while_paused INTEGER NOT NULL DEFAULT 0,
                    answered_ms INTEGER,
                    answered_by TEXT,  -- the parent's device id
                    answered_by_name TEXT,
                    granted_minutes INTEGER,
                    reply TEXT,
                    PRIMARY KEY (family, id)
                ) WITHOUT ROWID;
                CREATE INDEX time_requests_by_child ON time_requests(family, child, status);
                CREATE INDEX time_requests_open ON time_requests(expires_ms) WHERE status = 'open';
                -- a parent's pause of a child's reward apps: one row per child (its last
                -- pause), kept when it ends (ended_ms)
                CREATE TABLE pauses (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    since_ms INTEGER NOT NULL,
                    until_ms INTEGER,  -- NULL: until a parent resumes
                    ended_ms INTEGER,  -- NULL: on
                    by_device TEXT NOT NULL,
                    by_name TEXT NOT NULL,
                    reason TEXT,
                    PRIMARY KEY (family, child)
                ) WITHOUT ROWID;
                -- records the aggregator writes for parents' and children's actions (time
                -- requests, ledger entries, audit entries), in order
                CREATE TABLE record_outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    family TEXT NOT NULL,
                    zone TEXT NOT NULL,
                    record_type TEXT NOT NULL,
                    record_name TEXT NOT NULL,
                    fields TEXT NOT NULL
                );
                -- notifications to hand to push (push.notify's params), in order
                CREATE TABLE notify_outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    family TEXT NOT NULL,
                    params TEXT NOT NULL
                );
                ALTER TABLE families ADD COLUMN request_expiry_minutes INTEGER NOT NULL DEFAULT 120;
                ALTER TABLE families ADD COLUMN max_open_requests INTEGER NOT NULL DEFAULT 3;
                -- why the child's reward apps are shielded: balance, paused, dailyCap; and
                -- the reward time of the family's day when last computed (against a cap)
                ALTER TABLE children ADD COLUMN shield_reason TEXT;
                ALTER TABLE children ADD COLUMN reward_today_seconds INTEGER NOT NULL DEFAULT 0;
                -- a child's own rules, from its ChildContext: a daily cap of reward time and
                -- whether unspent time expires at the end of the family's week (expired_through:
                -- the Monday up to which it has, so a week expires once)
                -- the family's parents by device, as the family knows them (their
                -- ParentProfile's name, else their device's), for the audit log's sentences
                CREATE TABLE parent_names (
                    family TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    display_name TEXT,
                    device_name TEXT,
                    PRIMARY KEY (family, device_id)
                ) WITHOUT ROWID;
                CREATE TABLE child_rules (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    daily_cap_minutes INTEGER,
                    weekly_expiry INTEGER NOT NULL DEFAULT 0,
                    expired_through TEXT,
                    PRIMARY KEY (family, child)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("aggregator-v9-downtime") { db in
            try db.execute(sql: """
                -- a child's weekly downtime: its windows (JSON, as aggregator.setSchedule took
                -- them), the apps always allowed (JSON), whether an approval lifts it and until
                -- when it is lifted, and whether the child's devices were last told it is on
                CREATE TABLE downtime (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    windows TEXT NOT NULL,
                    always_allowed TEXT NOT NULL DEFAULT '[]',
                    lift_on_approval INTEGER NOT NULL DEFAULT 1,
                    lifted_until_ms INTEGER,
                    told_on INTEGER NOT NULL DEFAULT 0,
                    updated_ms INTEGER,
                    updated_by_name TEXT,
                    PRIMARY KEY (family, child)
                ) WITHOUT ROWID;
                -- when the downtime shielding the child ends (shield_reason 'downtime')
                ALTER TABLE children ADD COLUMN downtime_until_ms INTEGER;
                """)
        }
        migrator.registerMigration("aggregator-v10-chores") { db in
            try db.execute(sql: """
                -- a child's chores, as parents set them (removed ones kept for their history)
                CREATE TABLE chores (
                    family TEXT NOT NULL,
                    id TEXT NOT NULL,
                    child TEXT NOT NULL,
                    title TEXT NOT NULL,
                    points INTEGER NOT NULL,
                    repeat TEXT NOT NULL,        -- once, daily, weekly
                    days TEXT NOT NULL DEFAULT '[]',  -- weekly: the weekdays, JSON
                    created_ms INTEGER NOT NULL,
                    created_by_name TEXT,
                    removed INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (family, id)
                ) WITHOUT ROWID;
                CREATE INDEX chores_by_child ON chores(family, child);
                -- a child's "done" and the parent's answer; one that counts (not sent back)
                -- per chore and occurrence (the family's day, or 'once')
                CREATE TABLE chore_completions (
                    family TEXT NOT NULL,
                    id TEXT NOT NULL,
                    chore TEXT NOT NULL,
                    child TEXT NOT NULL,
                    occurrence TEXT NOT NULL,
                    points INTEGER NOT NULL,     -- the chore's when it was done: what an approval enters
                    device_id TEXT NOT NULL,
                    note TEXT,
                    status TEXT NOT NULL,        -- waiting, approved, rejected
                    done_ms INTEGER NOT NULL,
                    answered_ms INTEGER,
                    answered_by TEXT,
                    answered_by_name TEXT,
                    reason TEXT,
                    PRIMARY KEY (family, id)
                ) WITHOUT ROWID;
                CREATE UNIQUE INDEX chore_completions_once ON chore_completions(family, chore, occurrence) WHERE status != 'rejected';
                CREATE INDEX chore_completions_by_child ON chore_completions(family, child, done_ms);
                """)
        }
        migrator.registerMigration("aggregator-v11-digest-and-removed-children") { db in
            try db.execute(sql: """
                -- the weekly digest: whether, on which day and at what time of the family's it is
                -- sent, and the last day of the last week sent (so a week is sent once)
                ALTER TABLE families ADD COLUMN digest_enabled INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE families ADD COLUMN digest_day TEXT NOT NULL DEFAULT 'sun';
                ALTER TABLE families ADD COLUMN digest_time TEXT NOT NULL DEFAULT '18:00';
                ALTER TABLE families ADD COLUMN digest_sent_through TEXT;
                -- children removed from their family (their ChildContext deleted): no longer
                -- named by parents' calls, listed or in a digest (a child paired again under the
                -- same id is taken off)
                CREATE TABLE removed_children (
                    family TEXT NOT NULL,
                    child TEXT NOT NULL,
                    PRIMARY KEY (family, child)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("aggregator-v12-server-backups") { db in
            try db.execute(sql: """
                -- the scheduled backups' last outcomes, as the backup service reports them
                -- (one row): what the dashboard shows, and whether a failure streak has
                -- alerted the parents
                CREATE TABLE server_backups (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    last_run_ms INTEGER NOT NULL,
                    last_succeeded INTEGER NOT NULL,
                    last_success_ms INTEGER,
                    archive TEXT,
                    bytes INTEGER,
                    copied_to TEXT,
                    failing_since_ms INTEGER,
                    problem TEXT
                );
                """)
        }
        return migrator
    }
}
