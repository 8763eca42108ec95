import Foundation
import RPCCore
import StoreAPI

/// The usage aggregator's methods (`screentime-aggregatord`, socket `aggregator.sock`).
///
/// Local services call without `auth`; a parent's device may ask for reports and status on
/// its own family with its credential (`auth.token`); a child's gets `forbidden`.
public enum AggregatorMethods {
    public static let status = MethodSpec<Empty, AggregatorStatus>(
        "aggregator.status", summary: "Where the aggregator is in the store's change log, and what it holds: the whole server for a local caller, the parent's own family for a parent.",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden])
    public static let report = MethodSpec<ReportParams, Report>(
        "aggregator.report", summary: "A child's or a device's learning and reward time, points and top apps over a range of local days, by day or by week.",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .invalidParams, .notFound])
    public static let recompute = MethodSpec<RecomputeParams, RecomputeResult>(
        "aggregator.recompute", summary: "Rebuilds one child's days, accruals and balance from the store's records; says which days differed. Local administration only.",
        callers: .local,
        errors: [.forbidden, .invalidParams, .notFound])
    public static let rollUp = MethodSpec<RollUpParams, RollUpResult>(
        "aggregator.rollUp", summary: "Retention now: rolls weeks older than the retention period into WeeklySummary records and prunes their usage records and ledger entries from the store. Local administration only.",
        callers: .local,
        errors: [.forbidden, .invalidParams, .notFound])
    public static let exportCSV = MethodSpec<ReportParams, CSVExport>(
        "aggregator.exportCSV", summary: "The same range as CSV: one line per device, day and app.",
        callers: [.local, .parent],
        errors: [.unauthorized, .forbidden, .invalidParams, .notFound])
    public static let resync = MethodSpec<ResyncParams, ResyncResult>(
        "aggregator.resync", summary: "A child device asks for its configuration again (or a parent for one of its family's child devices): the family's rules and its shield, written anew as its pending `configuration` command.",
        callers: [.child, .parent],
        errors: [.unauthorized, .deviceRevoked, .forbidden, .notFound])
    public static let backup = MethodSpec<BackupParams, BackupResult>(
        "aggregator.backup", summary: "Writes a consistent online copy of the aggregator's database (its days, sealed weeks, schedules, chores, outboxes) into its backups directory under a plain file name; `lastSeq` is its position in the store's change log. Local administration only.",
        callers: .local,
        errors: [.forbidden, .invalidParams, .conflict, .unavailable])
    public static let backupReport = MethodSpec<BackupReport, ServerBackupState>(
        "aggregator.backupReport", summary: "The scheduled backup tells how its run went; the first failure of a streak alerts every parent (what failed, in words), and so does the first success after one. Local administration only.",
        callers: .local,
        errors: [.forbidden, .invalidParams])
    public static let backupState = MethodSpec<Empty, ServerBackupState>(
        "aggregator.backupState", summary: "How the server's scheduled backups are going: the last run, the last one that worked (its archive, size and copy), and since when they fail, if they do.",
        callers: [.local, .parent],
        errors: [.unauthorized, .deviceRevoked, .forbidden])
    public static let devices = MethodSpec<Empty, DeviceConfigurations>(
        "aggregator.devices", summary: "Each child device of the parent's family: the configuration version it last applied beside the family's current one.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden])

    // Everyday parenting (ParentingTypes.swift).
    public static let askForTime = MethodSpec<AskForTimeParams, TimeRequestInfo>(
        "aggregator.askForTime", summary: "A child's device asks its parents for more reward time (minutes or the rest of the day, one app or all, with a note); every parent gets a high-priority alert.",
        callers: .child,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound, .limitExceeded])
    public static let answerRequest = MethodSpec<AnswerRequestParams, TimeRequestInfo>(
        "aggregator.answerRequest", summary: "A parent approves (optionally another amount: a ledger adjustment) or denies a child's request; the first answer wins, a later one gets `conflict` saying who answered and how.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound, .conflict])
    public static let listRequests = MethodSpec<ListRequestsParams, TimeRequestList>(
        "aggregator.listRequests", summary: "Requests for more time: a parent's family's (or one child's), a child device's own child's; open ones on top, newest first.",
        callers: [.parent, .child],
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])
    public static let grant = MethodSpec<GrantParams, GrantResult>(
        "aggregator.grant", summary: "A parent adds or takes away points or minutes of a child's earned time, with a reason; a removal never takes the balance below zero.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])
    public static let pause = MethodSpec<PauseParams, ChildTime>(
        "aggregator.pause", summary: "A parent shields a child's reward apps now, whatever the balance, for some minutes or until resumed.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])
    public static let resume = MethodSpec<ResumeParams, ChildTime>(
        "aggregator.resume", summary: "A parent ends a child's pause now: reward apps are unshielded if earned time is left.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])

    // Downtime (DowntimeTypes.swift).
    public static let setSchedule = MethodSpec<SetScheduleParams, DowntimeSchedule>(
        "aggregator.setSchedule", summary: "A parent sets a child's weekly downtime (windows in the family's time zone during which reward apps are shielded whatever the balance, but for apps always allowed); overlapping or empty windows are refused.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])
    public static let listSchedules = MethodSpec<ListSchedulesParams, ScheduleList>(
        "aggregator.listSchedules", summary: "Each child's downtime schedule, whether downtime is on now and until when (a parent's family, or a child device's own child).",
        callers: [.parent, .child],
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])

    // The weekly digest (DigestTypes.swift).
    public static let digest = MethodSpec<DigestParams, WeeklyDigest>(
        "aggregator.digest", summary: "Each child's week (learning and reward time, points earned and spent, requests, chores, top apps) beside the week before, as the weekly notification says it.",
        callers: [.local, .parent],
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])

    // Chores (ChoreTypes.swift).
    public static let setChore = MethodSpec<SetChoreParams, ChoreInfo>(
        "aggregator.setChore", summary: "A parent adds a chore for a child (its points; once, every day, or on given weekdays), changes one, or removes it.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound, .limitExceeded])
    public static let listChores = MethodSpec<ListChoresParams, ChoreList>(
        "aggregator.listChores", summary: "Chores and where today's stands, with the completions waiting for a parent on top (a parent's family or one child; a child device's own child).",
        callers: [.parent, .child],
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound])
    public static let choreDone = MethodSpec<ChoreDoneParams, ChoreCompletion>(
        "aggregator.choreDone", summary: "A child's device marks a chore done (once per occurrence: a day of the family's, or once for a one-off); every parent is alerted.",
        callers: .child,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound, .conflict])
    public static let answerChore = MethodSpec<AnswerChoreParams, ChoreCompletion>(
        "aggregator.answerChore", summary: "A parent approves a chore done (its points enter the ledger, naming the parent) or sends it back with a reason; the first answer wins, a later one gets `conflict`.",
        callers: .parent,
        errors: [.unauthorized, .deviceRevoked, .forbidden, .invalidParams, .notFound, .conflict])
}

/// `aggregator.resync`: a child device asks for itself (no `deviceId`); a parent names one
/// of its family's child devices.
public struct ResyncParams: Codable, Sendable, Hashable {
    public var deviceId: String?
    public init(deviceId: String? = nil) { self.deviceId = deviceId }
}

/// `aggregator.resync`: the family's configuration version the device will get.
public struct ResyncResult: Codable, Sendable, Hashable {
    public var version: Int64
    public init(version: Int64) { self.version = version }
}

/// One child device's configuration, as the aggregator knows it.
public struct DeviceConfigurationState: Codable, Sendable, Hashable {
    public var deviceId: String
    /// The version of the last `configuration` command it executed (a family whose rules
    /// never changed has version 0: `appliedAt` tells whether it executed one at all).
    public var appliedVersion: Int64
    /// The family's version now; `behind` is how many changes it has not applied.
    public var currentVersion: Int64
    public var behind: Int64
    /// When it last executed its configuration; nil: never.
    public var appliedAt: Date?
    /// The app's version, as the device last said (its RegisteredDevice's `appVersion`).
    public var appVersion: String?
    /// How far the device's clock was ahead of the server's (negative: behind) by the last
    /// usage it sent, in seconds (whole minutes); absent when it is right.
    public var clockOffsetSeconds: Int64?

    public init(deviceId: String, appliedVersion: Int64, currentVersion: Int64, appliedAt: Date?) {
        self.deviceId = deviceId
        self.appliedVersion = appliedVersion
        self.currentVersion = currentVersion
        self.behind = max(0, currentVersion - appliedVersion)
        self.appliedAt = appliedAt
    }

    /// How far off a device's clock may be before parents are told (seconds).
    public static let clockTolerance: Int64 = 300

    /// The device's clock in words when it is more than ``clockTolerance`` off: "2 h
    /// ahead", "40 min behind"; nil when it is right.
    public var clockOff: String? {
        guard let offset = self.clockOffsetSeconds, abs(offset) > Self.clockTolerance else { return nil }
        return Self.clockWords(offset)
    }

    /// "2 h ahead", "2 h 5 min ahead", "40 min behind" for an offset in seconds.
    public static func clockWords(_ offsetSeconds: Int64) -> String {
        let minutes = (abs(offsetSeconds) + 30) / 60
        let amount = minutes < 120 ? "\(minutes) min" : minutes % 60 == 0 ? "\(minutes / 60) h" : "\(minutes / 60) h \(minutes % 60) min"
        return "\(amount) \(offsetSeconds > 0 ? "ahead" : "behind")"
    }

    /// In words: "up to date", "2 changes behind", "not applied yet".
    public var summary: String {
        if self.appliedAt == nil { return "not applied yet" }
        if self.behind == 0 { return "up to date" }
        return self.behind == 1 ? "1 change behind" : "\(self.behind) changes behind"
    }
}

/// `aggregator.devices`.
public struct DeviceConfigurations: Codable, Sendable, Hashable {
    public var devices: [DeviceConfigurationState]
    public init(devices: [DeviceConfigurationState]) { self.devices = devices }
}

/// For a local caller, the whole server; for a parent, its own family only, without the
/// position (the store's log counts every family's changes).
public struct AggregatorStatus: Codable, Sendable, Hashable {
    /// The last change of the store's log applied; nil for a parent (every family's writes
    /// move it). It follows only the record types it counts, so it stays behind the store's
    /// head when other changes come after: see `caughtUp`.
    public var position: Int64?
    /// The store's newest change when asked; absent for a parent, or when the store could
    /// not be reached.
    public var storeHead: Int64?
    /// Every change up to `storeHead` that the aggregator follows is applied (what it
    /// writes back may still be pending: the `pending…` counts); absent for a parent, or
    /// when the store could not be reached.
    public var caughtUp: Bool?
    /// Usage records held in detail.
    public var sessions: Int
    /// Device-days computed.
    public var days: Int
    /// DailySummary records still to be written to the store.
    public var pendingSummaries: Int
    /// Children's accruals and balances, and the records of parents' and children's actions
    /// (requests, ledger and audit entries), still to be written.
    public var pendingChildWrites: Int
    /// WeeklySummary records to write and records to prune, from retention.
    public var pendingRetentionWrites: Int
    /// Child devices' configuration snapshots still to be written.
    public var pendingConfigurations: Int

    public init(position: Int64?, storeHead: Int64? = nil, caughtUp: Bool? = nil, sessions: Int, days: Int, pendingSummaries: Int,
                pendingChildWrites: Int, pendingRetentionWrites: Int = 0, pendingConfigurations: Int = 0) {
        self.position = position
        self.storeHead = storeHead
        self.caughtUp = caughtUp
        self.sessions = sessions
        self.days = days
        self.pendingSummaries = pendingSummaries
        self.pendingChildWrites = pendingChildWrites
        self.pendingRetentionWrites = pendingRetentionWrites
        self.pendingConfigurations = pendingConfigurations
    }
}

/// `aggregator.rollUp` (local administration; the aggregator also runs it on its own every
/// `--retention-interval`).
public struct RollUpParams: Codable, Sendable, Hashable {
    /// One family; default every family.
    public var family: String?
    /// Roll up as if today were this local day (`YYYY-MM-DD`, not before today); default today.
    public var asOf: String?

    public init(family: String? = nil, asOf: String? = nil) {
        self.family = family
        self.asOf = asOf
    }
}

public struct RollUpResult: Codable, Sendable, Hashable {
    public var families: [FamilyRollUp]

    public init(families: [FamilyRollUp]) {
        self.families = families
    }
}

public struct FamilyRollUp: Codable, Sendable, Hashable {
    public var family: String
    /// Days before this one (a Monday) are rolled up: their detail is pruned from the store.
    public var sealedBefore: String
    /// `<childRecordName> <Monday>` of each WeeklySummary written or rewritten.
    public var weeks: [String]
    /// Records queued for deletion from the store.
    public var usageRecordsPruned: Int
    public var ledgerEntriesPruned: Int
    public var accrualsPruned: Int

    public init(family: String, sealedBefore: String, weeks: [String], usageRecordsPruned: Int, ledgerEntriesPruned: Int, accrualsPruned: Int) {
        self.family = family
        self.sealedBefore = sealedBefore
        self.weeks = weeks
        self.usageRecordsPruned = usageRecordsPruned
        self.ledgerEntriesPruned = ledgerEntriesPruned
        self.accrualsPruned = accrualsPruned
    }
}

extension AggregatorMethods {
    /// Every method of the aggregator service, in the order `rpc.describe` lists them. The service's
    /// method table is built against this list, and the gateway allows devices what it says.
    public static let list = MethodList(service: "aggregator", [
        status,
        report,
        recompute,
        rollUp,
        exportCSV,
        resync,
        devices,
        backup,
        backupReport,
        backupState,
        askForTime,
        answerRequest,
        listRequests,
        grant,
        pause,
        resume,
        setSchedule,
        listSchedules,
        setChore,
        listChores,
        choreDone,
        answerChore,
        digest,
    ])
}
