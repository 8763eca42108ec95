import RPCCore

/// The usage aggregator's methods (`screentime-aggregatord`, socket `aggregator.sock`).
///
/// Local services call without `auth`; a parent's device may ask for reports on its own
/// family with its credential (`auth.token`).
public enum AggregatorMethods {
    public static let status = MethodSpec<Empty, AggregatorStatus>(
        "aggregator.status", summary: "Where the aggregator is in the store's change log, and what it holds.",
        errors: [])
    public static let report = MethodSpec<ReportParams, Report>(
        "aggregator.report", summary: "A child's or a device's learning and reward time, points and top apps over a range of local days, by day or by week.",
        errors: [.unauthorized, .forbidden, .invalidParams, .notFound])
    public static let recompute = MethodSpec<RecomputeParams, RecomputeResult>(
        "aggregator.recompute", summary: "Rebuilds one child's days, accruals and balance from the store's records; says which days differed. Local administration only.",
        errors: [.forbidden, .invalidParams, .notFound])
    public static let exportCSV = MethodSpec<ReportParams, CSVExport>(
        "aggregator.exportCSV", summary: "The same range as CSV: one line per device, day and app.",
        errors: [.unauthorized, .forbidden, .invalidParams, .notFound])
}

public struct AggregatorStatus: Codable, Sendable, Hashable {
    /// The last change of the store's log applied.
    public var position: Int64
    /// Usage records held in detail.
    public var sessions: Int
    /// Device-days computed.
    public var days: Int
    /// DailySummary records still to be written to the store.
    public var pendingSummaries: Int
    /// Children's accruals and balances still to be written.
    public var pendingChildWrites: Int

    public init(position: Int64, sessions: Int, days: Int, pendingSummaries: Int, pendingChildWrites: Int) {
        self.position = position
        self.sessions = sessions
        self.days = days
        self.pendingSummaries = pendingSummaries
        self.pendingChildWrites = pendingChildWrites
    }
}
