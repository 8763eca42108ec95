import RPCCore
import StoreAPI

/// One schema change. Versions are applied in order on start, each once, in the same
/// transaction as its data backfill; a shipped version is never edited, only followed.
enum SchemaStep: Sendable {
    case addRecordType(RecordTypeDefinition)
    /// Adds a field; records that exist get its `defaultValue` (if any).
    case addField(recordType: String, FieldDefinition)
    /// Makes a field queryable; existing records are indexed.
    case addIndex(recordType: String, field: String)
    /// A field no query needs is no longer indexed: every save of the type wrote a page for
    /// it. Its index rows are deleted; filtering or sorting on it is refused from then on.
    case dropIndex(recordType: String, field: String)
    /// A field stays queryable but loses its index entries: no documented query starts from
    /// its values, and each entry was a page every save wrote. Its entries are deleted; a
    /// query checks the field on each record it reads (``FieldDefinition/readFromRecords``).
    case readFromRecords(recordType: String, field: String)
    /// Adds a uniqueness constraint; refused on start if existing records break it.
    case addUnique(recordType: String, fields: [String])
    /// More values a string field with a list of allowed values accepts.
    case allowValues(recordType: String, field: String, values: [String])
    /// Records of the type are never changed once written (see `RecordTypeDefinition.appendOnly`).
    case makeAppendOnly(recordType: String)
    /// A date field may not be in the future (see `RecordTypeDefinition.notInFuture`).
    case notInFuture(recordType: String, field: String, offsetField: String)
    /// Values of a field only the server's own services may write (see
    /// `RecordTypeDefinition.serverOnlyValues`).
    case serverOnlyValues(recordType: String, field: String, values: [String])
}

struct SchemaVersion: Sendable {
    var number: Int
    var name: String
    var steps: [SchemaStep]

    /// The GRDB migration identifier: never change it once shipped.
    var migrationIdentifier: String { "schema-v\(self.number)-\(self.name)" }
}

/// Every schema version, oldest first. Add new versions at the end.
enum SchemaHistory {
    static let versions: [SchemaVersion] = [version1, version2, version3, version4, version5, version6, version7, version8, version9, version10, version11, version12, version13]

    static var latest: Int { versions.last!.number }

    // Field helpers keep the table below readable.
    private static func string(_ name: String, required: Bool = false, indexed: Bool = false, allowed: [String]? = nil) -> FieldDefinition {
        FieldDefinition(name: name, type: .string, required: required, indexed: indexed, allowedValues: allowed)
    }
    private static func int(_ name: String, required: Bool = false, indexed: Bool = false, minimum: Int64? = nil) -> FieldDefinition {
        FieldDefinition(name: name, type: .int64, required: required, indexed: indexed, minimum: minimum)
    }
    private static func date(_ name: String, required: Bool = false, indexed: Bool = false) -> FieldDefinition {
        FieldDefinition(name: name, type: .date, required: required, indexed: indexed)
    }
    private static func bool(_ name: String) -> FieldDefinition { FieldDefinition(name: name, type: .bool) }
    private static func json(_ name: String) -> FieldDefinition { FieldDefinition(name: name, type: .json) }
    private static func reference(_ name: String, required: Bool = false, indexed: Bool = true, action: ReferenceAction = .none) -> FieldDefinition {
        FieldDefinition(name: name, type: .reference, required: required, indexed: indexed, referenceAction: action)
    }
    private static func strings(_ name: String, indexed: Bool = false, set: Bool = false) -> FieldDefinition {
        FieldDefinition(name: name, type: .stringList, indexed: indexed, mergeAsSet: set)
    }

    private static let categories = ["learning", "reward"]

    /// The app's record types as it used them with CloudKit (data model, CloudKit types,
    /// pairing). Where two named one thing differently both fields are kept;
    /// docs/protocol.md ("Record types") maps them. (The migration's name stays as shipped.)
    static let version1 = SchemaVersion(number: 1, name: "seed-record-types", steps: [
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.family, summary: "The family itself; one per family, in the default zone, named by the family id.",
            fields: [string("code"), int("settingsVersion", minimum: 0), string("displayName")])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.parentProfile, summary: "A parent: role and devices.",
            fields: [
                reference("familyRef", required: true), string("role", required: true, indexed: true, allowed: ["admin", "co_parent"]),
                strings("deviceIds", indexed: true, set: true), string("displayName"),
            ])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.childContext, summary: "A child, by an opaque identifier; its devices.",
            fields: [
                reference("familyRef", required: true), string("childOpaqueId", required: true, indexed: true),
                string("displayName"), strings("pairedDeviceIds", indexed: true, set: true),
            ],
            unique: [["familyRef", "childOpaqueId"]])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.monitoringSession, summary: "The root record of a child device's zone.",
            fields: [
                reference("childRef"), string("deviceID", indexed: true), string("parentDeviceID", indexed: true),
                string("status", indexed: true, allowed: ["pending", "active", "revoked"]), string("title"),
            ])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.registeredDevice, summary: "A device, parent or child.",
            fields: [
                string("deviceID", required: true, indexed: true), string("deviceName", required: true),
                string("deviceType", required: true, indexed: true, allowed: ["parent", "child"]), string("childName"),
                string("parentDeviceID", indexed: true), reference("childRef"), date("registrationDate"),
                date("lastSyncDate", indexed: true), bool("isActive"),
            ],
            childAccess: .write, ownerField: "deviceID")),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.appRule, summary: "A family-wide rule for an app.",
            fields: [
                reference("familyRef", required: true), string("bundleId", required: true, indexed: true),
                string("classification", required: true, allowed: categories), string("source", allowed: ["default", "override"]),
                int("pointsPerMinute", minimum: 0), bool("isEnabled"), bool("blockingEnabled"), string("displayName"),
            ],
            unique: [["familyRef", "bundleId"]])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.appConfiguration, summary: "A per-device app configuration.",
            fields: [
                string("logicalID", required: true, indexed: true), string("tokenHash"), string("bundleIdentifier", indexed: true),
                string("displayName"), string("sfSymbolName"), string("category", indexed: true, allowed: categories),
                int("pointsPerMinute", minimum: 0), bool("isEnabled"), bool("blockingEnabled"), date("dateAdded"),
                date("lastModified", indexed: true), string("deviceID", indexed: true),
            ])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.shieldPolicy, summary: "Which reward apps and categories get shielded.",
            fields: [
                reference("familyRef", required: true), reference("childRef", action: .deleteSelf),
                strings("rewardCategories"), strings("rewardApps"),
            ])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.configurationCommand, summary: "A change for a child device to apply; the child reports its status.",
            fields: [
                string("commandID"), string("targetDeviceID", required: true, indexed: true),
                string("commandType", required: true, indexed: true), json("payloadJSON"), date("createdAt", indexed: true),
                date("executedAt"), string("status", required: true, indexed: true, allowed: ["pending", "executed", "failed"]),
                string("errorMessage"),
            ],
            childAccess: .updateFields, childWritableFields: ["status", "executedAt", "errorMessage"],
            ownerField: "targetDeviceID")),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.usageRecord, summary: "One session of one app on one child device.",
            fields: [
                string("recordID"), string("logicalID", required: true, indexed: true), string("bundleId", indexed: true),
                string("displayName"), date("sessionStart", required: true, indexed: true), date("sessionEnd", required: true, indexed: true),
                int("totalSeconds", required: true, minimum: 0), int("earnedPoints", minimum: 0),
                string("category", indexed: true, allowed: categories), string("deviceID", required: true, indexed: true),
            ],
            childAccess: .write, ownerField: "deviceID")),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.dailySummary, summary: "A device's day, written by the aggregator: `<deviceID>_<YYYY-MM-DD>`.",
            fields: [
                string("summaryID", indexed: true), date("date", required: true, indexed: true), string("deviceID", required: true, indexed: true),
                reference("childRef"), int("totalLearningSeconds", minimum: 0), int("totalRewardSeconds", minimum: 0),
                int("totalPointsEarned", minimum: 0), json("appsUsedJSON"), date("lastUpdated"),
            ])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.pointsLedgerEntry, summary: "Points earned, redeemed or adjusted (positive amounts).",
            fields: [
                reference("familyRef", required: true), reference("childRef", required: true, action: .deleteSelf),
                string("type", required: true, indexed: true, allowed: ["accrual", "redemption", "adjustment"]),
                int("amount", required: true, minimum: 1), date("timestamp", required: true, indexed: true), string("reason"),
                reference("actorParentRef", indexed: false), string("idempotencyKey", indexed: true),
            ],
            unique: [["familyRef", "idempotencyKey"]])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.earnedTimeBalance, summary: "A child's earned reward time; one per child.",
            fields: [
                reference("childRef", required: true, action: .deleteSelf), int("balanceSeconds", required: true), date("updatedAt"),
            ],
            unique: [["childRef"]])),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.auditEntry, summary: "What a parent did, for the family's audit log.",
            fields: [
                reference("familyRef", required: true), reference("actorParentRef", required: true, indexed: false),
                string("action", required: true), string("target"), date("timestamp", required: true, indexed: true), json("metadata"),
            ])),
    ])

    /// The family's IANA time zone, for local days (the aggregator); and rules by class.
    static let version2 = SchemaVersion(number: 2, name: "family-time-zone", steps: [
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "timeZone", type: .string, defaultValue: "UTC")),
        .addIndex(recordType: RecordTypes.appRule, field: "classification"),
    ])

    /// The pairing service's own state (in each family's internal `_pairing` zone), and
    /// who acted, for audit entries written by the server or a child rather than a parent.
    static let version3 = SchemaVersion(number: 3, name: "pairing", steps: [
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.pairingInvitation,
            summary: "A child-device invitation or a parent enrollment code (pairing service only; only the secret's hash is kept).",
            fields: [
                string("kind", required: true, indexed: true, allowed: ["child", "parent"]),
                string("secretSHA256", required: true), string("role", allowed: ["admin", "co_parent"]),
                string("status", required: true, indexed: true, allowed: ["open", "accepted", "confirmed", "rejected", "locked", "used"]),
                date("expiresAt", required: true, indexed: true), int("failedAttempts", minimum: 0),
                string("createdBy"), string("zone"), string("childOpaqueId"), string("childName"),
                string("deviceID", indexed: true), string("deviceName"), date("acceptedAt"),
            ])),
        .addField(recordType: RecordTypes.auditEntry, FieldDefinition(name: "actor", type: .string, indexed: true)),
    ])

    /// Earned time (the aggregator): how many seconds of reward time a point buys, per
    /// family; the points behind a balance and whether reward apps are shielded.
    static let version4 = SchemaVersion(number: 4, name: "earned-time", steps: [
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "rewardSecondsPerPoint", type: .int64, minimum: 0, defaultValue: 60)),
        .addField(recordType: RecordTypes.earnedTimeBalance, FieldDefinition(name: "pointsBalance", type: .int64)),
        .addField(recordType: RecordTypes.earnedTimeBalance, FieldDefinition(name: "rewardSecondsUsed", type: .int64, minimum: 0)),
        .addField(recordType: RecordTypes.earnedTimeBalance, FieldDefinition(name: "shielded", type: .bool)),
    ])

    /// The parents' alert thresholds (the aggregator sends them through push): reward time
    /// in a day over N minutes, earned time running out, a device silent for N hours.
    static let version5 = SchemaVersion(number: 5, name: "alerts", steps: [
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "alertRewardMinutesPerDay", type: .int64, minimum: 1)),
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "alertOnBalanceExhausted", type: .bool, defaultValue: true)),
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "alertNoDataHours", type: .int64, minimum: 1)),
    ])

    /// Retention (detail kept 90 days, then weekly aggregates): the aggregator
    /// rolls a child's old weeks into one record each before it prunes their usage records
    /// and ledger entries.
    static let version6 = SchemaVersion(number: 6, name: "weekly-summaries", steps: [
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.weeklySummary,
            summary: "A child's week rolled up by the aggregator's retention: `week-<childRecordName>-<YYYY-MM-DD>` (its Monday), in the default zone.",
            fields: [
                reference("childRef", required: true, action: .deleteSelf), date("weekStart", required: true, indexed: true),
                int("totalLearningSeconds", minimum: 0), int("totalRewardSeconds", minimum: 0), int("pointsAccrued", minimum: 0),
                int("pointsRedeemed", minimum: 0), int("pointsAdjusted", minimum: 0), int("usageRecordsPruned", minimum: 0),
                int("ledgerEntriesPruned", minimum: 0), json("appsUsedJSON"), date("lastUpdated"),
            ],
            unique: [["childRef", "weekStart"]])),
    ])

    /// The version of the app on a device, as the device says (its own RegisteredDevice):
    /// what the parents see beside each device.
    static let version7 = SchemaVersion(number: 7, name: "app-version", steps: [
        .addField(recordType: RecordTypes.registeredDevice, string("appVersion")),
    ])

    /// The points ledger is a record of what happened: an entry is never changed (a
    /// correction is a new entry), and points counted and then taken back (usage deleted,
    /// or counted again lower) are a `reversal`; accruals and reversals are the
    /// aggregator's alone. A device's clock can be wrong: the store
    /// writes into each UsageRecord how far the sender's clock was off
    /// (`clockOffsetSeconds`, from the call's `deviceClock`), refuses a session that ends
    /// in the future, and the aggregator places sessions by the server's time.
    static let version8 = SchemaVersion(number: 8, name: "ledger-and-clocks", steps: [
        .allowValues(recordType: RecordTypes.pointsLedgerEntry, field: "type", values: ["reversal"]),
        .makeAppendOnly(recordType: RecordTypes.pointsLedgerEntry),
        .serverOnlyValues(recordType: RecordTypes.pointsLedgerEntry, field: "type", values: ["accrual", "reversal"]),
        .addField(recordType: RecordTypes.usageRecord, int("clockOffsetSeconds")),
        .notInFuture(recordType: RecordTypes.usageRecord, field: "sessionEnd", offsetField: "clockOffsetSeconds"),
    ])

    /// Everyday parenting (the aggregator): a child's requests for more time and their
    /// answers, written by the server alone; points a parent takes away (`deduction`) and a
    /// week's unspent points that expire (`expiry`), the server's own entries; the family's
    /// settings for requests; a child's daily cap and weekly expiry; and why and since when
    /// a child's reward apps are shielded.
    static let version9 = SchemaVersion(number: 9, name: "everyday-parenting", steps: [
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.timeRequest,
            summary: "A child's request for more reward time and its answer, written by the aggregator: `request-<id>` in the default zone.",
            fields: [
                reference("childRef", required: true, action: .deleteSelf), string("deviceID", required: true, indexed: true),
                int("minutes", required: true, minimum: 1), bool("restOfDay"), string("app"), string("appName"), string("note"),
                string("status", required: true, indexed: true, allowed: TimeRequest.statuses), date("createdAt", required: true, indexed: true),
                date("expiresAt"), bool("whilePaused"), date("answeredAt"), reference("answeredByParentRef", indexed: false),
                string("answeredBy"), int("grantedMinutes", minimum: 1), string("reply"),
            ],
            serverOnlyValues: ["status": Set(TimeRequest.statuses)])),
        .allowValues(recordType: RecordTypes.pointsLedgerEntry, field: "type", values: ["deduction", "expiry"]),
        .serverOnlyValues(recordType: RecordTypes.pointsLedgerEntry, field: "type", values: ["deduction", "expiry"]),
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "requestExpiryMinutes", type: .int64, minimum: 1, defaultValue: 120)),
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "maxOpenRequests", type: .int64, minimum: 1, defaultValue: 3)),
        .addField(recordType: RecordTypes.childContext, int("dailyRewardCapMinutes", minimum: 1)),
        .addField(recordType: RecordTypes.childContext, bool("weeklyExpiry")),
        .addField(recordType: RecordTypes.earnedTimeBalance, string("shieldReason", allowed: ["balance", "paused", "dailyCap"])),
        .addField(recordType: RecordTypes.earnedTimeBalance, date("pausedSince")),
        .addField(recordType: RecordTypes.earnedTimeBalance, date("pausedUntil")),
        .addField(recordType: RecordTypes.earnedTimeBalance, string("pausedBy")),
        .addField(recordType: RecordTypes.earnedTimeBalance, int("rewardSecondsToday", minimum: 0)),
    ])

    /// Downtime (the aggregator): reward apps shielded by a child's weekly schedule, and
    /// until when.
    static let version10 = SchemaVersion(number: 10, name: "downtime", steps: [
        .allowValues(recordType: RecordTypes.earnedTimeBalance, field: "shieldReason", values: ["downtime"]),
        .addField(recordType: RecordTypes.earnedTimeBalance, date("downtimeUntil")),
    ])

    /// The week's rhythms: a child's own rule for an app, replacing the family's for its
    /// devices; and when the family's weekly digest is sent.
    static let version11 = SchemaVersion(number: 11, name: "week-rhythms", steps: [
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "digestEnabled", type: .bool, defaultValue: true)),
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "digestDay", type: .string, allowedValues: ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                                                                  defaultValue: "sun")),
        .addField(recordType: RecordTypes.family, FieldDefinition(name: "digestTime", type: .string, defaultValue: "18:00")),
        .addRecordType(RecordTypeDefinition(
            name: RecordTypes.childAppRule,
            summary: "One child's own rule for an app, replacing the family's AppRule for that child's devices: `child-rule:<childId>:<bundleId>` in the default zone.",
            fields: [
                reference("familyRef", required: true), reference("childRef", required: true, action: .deleteSelf),
                string("bundleId", required: true, indexed: true), string("classification", required: true, allowed: categories),
                int("pointsPerMinute", minimum: 0), bool("isEnabled"), bool("blockingEnabled"),
            ],
            unique: [["childRef", "bundleId"]])),
    ])

    /// Fewer pages a usage record's save writes: of its indexes, those that no query of
    /// the server, the app or the documents uses go (`bundleId`, `sessionEnd`, `category`);
    /// `logicalID`, `sessionStart` and `deviceID` stay, the fields the app's CloudKit type
    /// made queryable (docs/data-model.md, "Indexes and the queries that need them").
    static let version12 = SchemaVersion(number: 12, name: "usage-indexes", steps: [
        .dropIndex(recordType: RecordTypes.usageRecord, field: "bundleId"),
        .dropIndex(recordType: RecordTypes.usageRecord, field: "sessionEnd"),
        .dropIndex(recordType: RecordTypes.usageRecord, field: "category"),
    ])

    /// Fewer pages again: a usage record keeps one index entry, `sessionStart`'s, which the
    /// documented query (one device's sessions since a date, newest first) reads in order.
    /// `logicalID` and `deviceID` stay queryable, read from the records: a query on them
    /// alone reads the records in record order, as listing a zone's usage records does, at
    /// most 10,000 a page (docs/data-model.md, "Indexes and the queries that need them").
    static let version13 = SchemaVersion(number: 13, name: "usage-entries", steps: [
        .readFromRecords(recordType: RecordTypes.usageRecord, field: "logicalID"),
        .readFromRecords(recordType: RecordTypes.usageRecord, field: "deviceID"),
    ])
}
