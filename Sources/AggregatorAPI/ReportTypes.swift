import RPCCore
import StoreAPI

public enum ReportPeriod: String, StringEnum {
    /// One row per local day.
    case day
    /// One row per week, Monday to Sunday (ISO weeks), named by its Monday.
    case week
}

/// `aggregator.report` and `aggregator.exportCSV`: one child (all its devices) or one device,
/// over local days `from` to `to`, both included (at most 400 days).
public struct ReportParams: Codable, Sendable, Hashable {
    /// Local services only; a parent's device reports on its own family.
    public var family: String?
    /// The child's id (as paired: `emma`), or
    public var child: String?
    /// one device.
    public var deviceId: String?
    /// `YYYY-MM-DD`.
    public var from: String
    public var to: String
    /// Default `day`.
    public var by: ReportPeriod?

    public init(family: String? = nil, child: String? = nil, deviceId: String? = nil, from: String, to: String, by: ReportPeriod? = nil) {
        self.family = family
        self.child = child
        self.deviceId = deviceId
        self.from = from
        self.to = to
        self.by = by
    }
}

/// An app's use in a report: what a DailySummary says of it, summed over the period.
public typealias ReportApp = DailySummary.AppUsage

public struct ReportRow: Codable, Sendable, Hashable {
    /// The day, or the week's Monday.
    public var period: String
    public var learningSeconds: Int64
    public var rewardSeconds: Int64
    public var points: Int64
    /// Most used first, at most five.
    public var topApps: [ReportApp]

    public init(period: String, learningSeconds: Int64, rewardSeconds: Int64, points: Int64, topApps: [ReportApp]) {
        self.period = period
        self.learningSeconds = learningSeconds
        self.rewardSeconds = rewardSeconds
        self.points = points
        self.topApps = topApps
    }
}

public struct Report: Codable, Sendable, Hashable {
    public var family: String
    public var child: String?
    public var deviceId: String?
    public var from: String
    public var to: String
    public var by: ReportPeriod
    /// The family's time zone, in which the days are counted.
    public var timeZone: String
    /// Every period of the range, in order, empty ones included.
    public var rows: [ReportRow]
    public var learningSeconds: Int64
    public var rewardSeconds: Int64
    public var points: Int64
    /// Over the whole range, most used first, at most ten.
    public var topApps: [ReportApp]

    public init(family: String, child: String?, deviceId: String?, from: String, to: String, by: ReportPeriod, timeZone: String,
                rows: [ReportRow], learningSeconds: Int64, rewardSeconds: Int64, points: Int64, topApps: [ReportApp]) {
        self.family = family
        self.child = child
        self.deviceId = deviceId
        self.from = from
        self.to = to
        self.by = by
        self.timeZone = timeZone
        self.rows = rows
        self.learningSeconds = learningSeconds
        self.rewardSeconds = rewardSeconds
        self.points = points
        self.topApps = topApps
    }
}

public struct CSVExport: Codable, Sendable, Hashable {
    /// `date,device_id,app,category,seconds,points`, one line per device, day and app.
    public var csv: String
    public var lines: Int

    public init(csv: String, lines: Int) {
        self.csv = csv
        self.lines = lines
    }
}

/// `aggregator.recompute` (local administration).
public struct RecomputeParams: Codable, Sendable, Hashable {
    public var family: String
    /// The child's id, as paired.
    public var child: String

    public init(family: String, child: String) {
        self.family = family
        self.child = child
    }
}

public struct RecomputeResult: Codable, Sendable, Hashable {
    public var family: String
    public var child: String
    /// The store's records read.
    public var usageRecords: Int
    public var ledgerEntries: Int
    /// Device-days the child has now.
    public var days: Int
    /// `<deviceId> <YYYY-MM-DD>` of every day whose totals differ from before (empty when
    /// the incremental path had it right).
    public var daysChanged: [String]
    public var balanceSecondsBefore: Int64?
    public var balanceSeconds: Int64?

    public init(family: String, child: String, usageRecords: Int, ledgerEntries: Int, days: Int, daysChanged: [String],
                balanceSecondsBefore: Int64?, balanceSeconds: Int64?) {
        self.family = family
        self.child = child
        self.usageRecords = usageRecords
        self.ledgerEntries = ledgerEntries
        self.days = days
        self.daysChanged = daysChanged
        self.balanceSecondsBefore = balanceSecondsBefore
        self.balanceSeconds = balanceSeconds
    }
}
