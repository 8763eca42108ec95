import RPCCore

/// The usage aggregator's methods (`screentime-aggregatord`, socket `aggregator.sock`).
public enum AggregatorMethods {
    public static let status = MethodSpec<Empty, AggregatorStatus>(
        "aggregator.status", summary: "Where the aggregator is in the store's change log, and what it holds.",
        errors: [])
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
