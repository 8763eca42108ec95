import Foundation

/// One usage session as the aggregator counts it.
public struct Span: Sendable, Hashable {
    /// The app's logical id (the UsageRecord's `logicalID`).
    public var app: String
    public var start: Date
    public var end: Date

    public init(app: String, start: Date, end: Date) {
        self.app = app
        self.start = start
        self.end = end
    }
}

public enum Category: String, Sendable, Codable, CaseIterable {
    case learning, reward
}

/// How an app counts: its category and, for learning, its points per minute; a blocked
/// app (its rule blocks it: the shield was bypassed or not applied yet) counts for nothing.
public struct AppRating: Sendable, Hashable {
    public var category: Category?
    public var pointsPerMinute: Int
    public var blocked: Bool

    public init(category: Category?, pointsPerMinute: Int, blocked: Bool = false) {
        self.category = category
        self.pointsPerMinute = pointsPerMinute
        self.blocked = blocked
    }
}

/// One app's share of a day.
public struct AppUsage: Sendable, Hashable, Codable {
    public var app: String
    public var category: Category?
    public var seconds: Int64
    public var points: Int64
    /// Used while its rule blocked it (true; absent otherwise).
    public var blocked: Bool?

    public init(app: String, category: Category?, seconds: Int64, points: Int64, blocked: Bool = false) {
        self.app = app
        self.category = category
        self.seconds = seconds
        self.points = points
        self.blocked = blocked ? true : nil
    }
}

/// A device's day: what the DailySummary says.
public struct DayTotals: Sendable, Hashable {
    public var learningSeconds: Int64 = 0
    public var rewardSeconds: Int64 = 0
    public var points: Int64 = 0
    /// Most used first.
    public var apps: [AppUsage] = []

    public init() {}

    public var isEmpty: Bool { self.apps.isEmpty }

    /// The rules, in one place:
    /// - a session counts from `sessionStart` to `sessionEnd`, the part inside the day;
    /// - sessions of the same app overlapping in time count once (their union);
    /// - an app's seconds are whole seconds, rounded down, of that union;
    /// - a learning app earns `floor(seconds × pointsPerMinute / 60)` points for the day
    ///   (per app and day, so splitting a session in two never loses a point; the aggregator
    ///   counts an app's parts under different rules as keys of their own, each rounded);
    /// - an app of neither category counts in `apps` but not in the totals;
    /// - a blocked app counts in `apps` (marked `blocked`) but not in the totals: it earns
    ///   no points and spends no earned time.
    public static func compute(_ spans: [Span], from dayStart: Date, to dayEnd: Date, rating: (String) -> AppRating) -> DayTotals {
        var byApp: [String: [(Date, Date)]] = [:]
        for span in spans {
            let start = max(span.start, dayStart), end = min(span.end, dayEnd)
            if start < end { byApp[span.app, default: []].append((start, end)) }
        }
        var totals = DayTotals()
        for (app, intervals) in byApp {
            let milliseconds = Self.unionMilliseconds(intervals)
            let seconds = milliseconds / 1000
            let rate = rating(app)
            var points: Int64 = 0
            switch rate.blocked ? nil : rate.category {
            case .learning?:
                points = seconds * Int64(rate.pointsPerMinute) / 60
                totals.learningSeconds += seconds
                totals.points += points
            case .reward?:
                totals.rewardSeconds += seconds
            case nil:
                break
            }
            totals.apps.append(AppUsage(app: app, category: rate.category, seconds: seconds, points: points, blocked: rate.blocked))
        }
        totals.apps.sort { ($0.seconds, $1.app) > ($1.seconds, $0.app) }
        return totals
    }

    /// The same day with its apps renamed by `name` (several keys may name one app: its
    /// parts under different rules), the entries of one app, category and block merged
    /// (seconds and points added), most used first. The totals do not change.
    public func merged(_ name: (String) -> String) -> DayTotals {
        struct Key: Hashable { var app: String; var category: Category?; var blocked: Bool? }
        var byKey: [Key: AppUsage] = [:]
        for usage in self.apps {
            let key = Key(app: name(usage.app), category: usage.category, blocked: usage.blocked)
            if var known = byKey[key] {
                known.seconds += usage.seconds
                known.points += usage.points
                byKey[key] = known
            } else {
                var renamed = usage
                renamed.app = key.app
                byKey[key] = renamed
            }
        }
        var result = self
        result.apps = byKey.values.sorted { ($0.seconds, $1.app) > ($1.seconds, $0.app) }
        return result
    }

    /// The length of the union of intervals, in whole milliseconds.
    static func unionMilliseconds(_ intervals: [(Date, Date)]) -> Int64 {
        let sorted = intervals.map { (Self.millis($0.0), Self.millis($0.1)) }.sorted { $0.0 < $1.0 }
        var total: Int64 = 0
        var current: (Int64, Int64)?
        for (start, end) in sorted {
            if let open = current, start <= open.1 {
                current = (open.0, max(open.1, end))
            } else {
                if let open = current { total += open.1 - open.0 }
                current = (start, end)
            }
        }
        if let open = current { total += open.1 - open.0 }
        return total
    }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}
