import GRDB

// The aggregator's tables as GRDB's query interface names them, for the statements off the
// hot path: configuration lookups, device states, recompute, retention, the texts of alerts
// that fire. The ingest path (a change at a time, the alert checks and balances in it), the
// write-back of each summary and balance, a report's reads, the roll-ups, the joins and the
// upserts stay SQL in the statement cache (docs/architecture.md, "SQL and the query interface").

/// `families`: one row per family, its settings and versions.
enum FamilyEntry: TableRecord {
    static let databaseTableName = "families"
    enum Columns {
        static let family = Column("family"), configVersion = Column("config_version"), alertExhausted = Column("alert_exhausted")
        static let secondsPerPoint = Column("seconds_per_point"), requestExpiryMinutes = Column("request_expiry_minutes")
        static let maxOpenRequests = Column("max_open_requests")
    }

    static func row(_ family: String) -> QueryInterfaceRequest<FamilyEntry> {
        Self.filter(Columns.family == family)
    }

    /// The version of the family's configuration (0 before any rule).
    static func configVersion(_ family: String, _ db: Database) throws -> Int64 {
        try Self.row(family).select(Columns.configVersion, as: Int64.self).fetchOne(db) ?? 0
    }
}

/// `devices`: one row per child device's zone, what the store's records say of it.
enum DeviceEntry: TableRecord {
    static let databaseTableName = "devices"
    enum Columns {
        static let family = Column("family"), zone = Column("zone"), deviceId = Column("device_id"), status = Column("status")
        static let childRef = Column("child_ref"), childName = Column("child_name"), deviceName = Column("device_name")
        static let appliedVersion = Column("applied_version"), appliedAtMillis = Column("applied_at_ms"), appVersion = Column("app_version")
        static let clockOffsetSeconds = Column("clock_offset_s")
    }

    /// The family's devices that have paired (a zone can be known before its device is).
    static func paired(_ family: String) -> QueryInterfaceRequest<DeviceEntry> {
        Self.filter(Columns.family == family && Columns.deviceId != nil)
    }
}

/// `days`: a device's totals of a day.
enum DayEntry: TableRecord {
    static let databaseTableName = "days"
    enum Columns {
        static let family = Column("family"), deviceId = Column("device_id"), day = Column("day")
        static let learningSeconds = Column("learning_seconds"), rewardSeconds = Column("reward_seconds"), points = Column("points")
    }
}

/// `accruals`: the aggregator's own ledger entries, until the store has them.
enum AccrualEntry: TableRecord {
    static let databaseTableName = "accruals"
    enum Columns {
        static let family = Column("family"), child = Column("child"), day = Column("day"), seq = Column("seq"), written = Column("written")
        static let replaces = Column("replaces")
    }
}

/// `alert_outbox`: alerts to hand to the push service, in order.
enum AlertOutbox: TableRecord {
    static let databaseTableName = "alert_outbox"
    enum Columns {
        static let id = Column("id")
    }
}

/// `app_rules`: a family's rules (device `''`) and devices' own.
enum AppRuleEntry: TableRecord {
    static let databaseTableName = "app_rules"
    enum Columns {
        static let family = Column("family"), app = Column("app"), deviceId = Column("device_id"), displayName = Column("display_name")
    }
}

/// `sessions`: the usage records counted, by record name.
enum SessionEntry: TableRecord {
    static let databaseTableName = "sessions"
    enum Columns {
        static let family = Column("family"), zone = Column("zone"), recordName = Column("record_name")
        static let startMillis = Column("start_ms"), endMillis = Column("end_ms")
    }
}

/// `ledger`: the ledger entries the store holds, by record name.
enum LedgerEntry: TableRecord {
    static let databaseTableName = "ledger"
    enum Columns {
        static let family = Column("family"), child = Column("child"), recordName = Column("record_name")
        static let type = Column("type"), amount = Column("amount"), atMillis = Column("at_ms")
    }
}

/// `children`: each child's balance and shield, as last computed.
struct ChildEntry: Codable, Sendable, FetchableRecord, TableRecord {
    static let databaseTableName = "children"
    var points: Int64
    var balanceSeconds: Int64
    var shielded: Bool
    var shieldReason: String?
    var downtimeUntilMillis: Int64?

    enum CodingKeys: String, CodingKey {
        case points, shielded
        case balanceSeconds = "balance_seconds", shieldReason = "shield_reason", downtimeUntilMillis = "downtime_until_ms"
    }

    enum Columns {
        static let family = Column("family"), child = Column("child"), balanceSeconds = Column(CodingKeys.balanceSeconds)
    }

    static func row(_ child: EarnedTime.Child) -> QueryInterfaceRequest<ChildEntry> {
        Self.filter(Columns.family == child.family && Columns.child == child.child)
    }
}

/// `week_outbox`: weeks whose WeeklySummary the store must get.
enum WeekOutbox: TableRecord {
    static let databaseTableName = "week_outbox"
    enum Columns {
        static let family = Column("family"), child = Column("child"), week = Column("week"), version = Column("version")
    }
}

/// `prune_outbox`: records to delete from the store once their week is rolled up.
enum PruneOutbox: TableRecord {
    static let databaseTableName = "prune_outbox"
    enum Columns {
        static let family = Column("family"), zone = Column("zone"), recordName = Column("record_name")
    }
}
