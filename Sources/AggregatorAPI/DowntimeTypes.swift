import Foundation
import RPCCore

// Downtime: a child's weekly schedule of windows (school nights 20:00–07:00) during which
// its reward apps are shielded whatever its balance, but for the apps always allowed. The
// server keeps the clock: windows are read in the family's time zone, never a device's.

public enum Weekday: String, StringEnum {
    case mon, tue, wed, thu, fri, sat, sun

    /// 0 for Monday … 6 for Sunday.
    public var index: Int { Self.allCases.firstIndex(of: self)! }
    /// "Monday".
    public var name: String {
        ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"][self.index]
    }
}

/// One window of a schedule: on each of `days`, from `start` to `end` on the family's
/// clocks; an `end` at or before `start` is the next morning's.
public struct DowntimeWindow: Codable, Sendable, Hashable {
    /// The days the window starts on.
    public var days: [Weekday]
    /// "20:00" (24-hour, 00:00 to 23:59).
    public var start: String
    /// "07:00": the next day's when not after `start`.
    public var end: String

    public init(days: [Weekday], start: String, end: String) {
        self.days = days
        self.start = start
        self.end = end
    }

    /// "HH:MM" as minutes after midnight; nil when malformed.
    public static func minutes(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.unicodeScalars.allSatisfy { ("0"..."9").contains($0) } }),
              let hour = Int(parts[0]), let minute = Int(parts[1]),
              (0...23).contains(hour), (0...59).contains(minute) else { return nil }
        return hour * 60 + minute
    }

    /// "School nights": "Sun–Thu 20:00–07:00"; "Sat, Sun 21:00–08:00"; "Mon, Wed 16:00–17:30".
    public var words: String {
        "\(Self.words(days: self.days)) \(self.start)–\(self.end)"
    }

    /// "Every day", "Mon–Fri", "Sun–Thu" (a run across the week's end), "Mon, Wed".
    public static func words(days: [Weekday]) -> String {
        let set = Set(days.map(\.index))
        guard set.count < 7 else { return "Every day" }
        let short = { (index: Int) in String(Weekday.allCases[index].name.prefix(3)) }
        // One run of three days or more, perhaps across Sunday to Monday: named by its ends.
        if set.count > 2, let first = set.first(where: { !set.contains(($0 + 6) % 7) }),
           (0..<set.count).allSatisfy({ set.contains((first + $0) % 7) }) {
            return "\(short(first))–\(short((first + set.count - 1) % 7))"
        }
        return set.sorted().map(short).joined(separator: ", ")
    }
}

/// Bounds `aggregator.setSchedule` checks.
public enum DowntimeLimits {
    /// Windows in one schedule.
    public static let windows = 14
    /// Apps always allowed.
    public static let alwaysAllowed = 50
}

/// `aggregator.setSchedule` (a parent's device): the child's whole downtime schedule,
/// replacing what it had; no windows is no downtime.
public struct SetScheduleParams: Codable, Sendable, Hashable {
    /// The child's id (`emma`).
    public var child: String
    /// At most 14; none may overlap another (or itself on the next day).
    public var windows: [DowntimeWindow]
    /// Apps (bundle or logical ids) never shielded by downtime (a phone app, a maps app); at most 50.
    public var alwaysAllowed: [String]?
    /// Whether a parent's approval of a request for more time, during downtime, lifts it
    /// for the minutes approved (default true).
    public var liftOnApproval: Bool?

    public init(child: String, windows: [DowntimeWindow], alwaysAllowed: [String]? = nil, liftOnApproval: Bool? = nil) {
        self.child = child
        self.windows = windows
        self.alwaysAllowed = alwaysAllowed
        self.liftOnApproval = liftOnApproval
    }
}

/// `aggregator.listSchedules`: a parent, every child of its family (or one); a child's
/// device, its own child's.
public struct ListSchedulesParams: Codable, Sendable, Hashable {
    public var child: String?
    public init(child: String? = nil) { self.child = child }
}

/// A child's downtime schedule and where the family's clock is in it.
public struct DowntimeSchedule: Codable, Sendable, Hashable {
    public var child: String
    public var childName: String
    public var windows: [DowntimeWindow]
    public var alwaysAllowed: [String]
    /// The always-allowed apps' names, where the family's rules name them.
    public var alwaysAllowedNames: [String]
    public var liftOnApproval: Bool
    /// Downtime is on now (not lifted).
    public var active: Bool
    /// When the downtime on now ends; or
    public var activeUntil: Date?
    /// when the next one starts.
    public var nextStart: Date?
    /// An approval lifted downtime until then.
    public var liftedUntil: Date?
    public var updatedAt: Date?
    /// The parent who set it, by name.
    public var updatedBy: String?
    /// The family's time zone, in which the windows are read.
    public var timeZone: String?

    public init(child: String, childName: String, windows: [DowntimeWindow], alwaysAllowed: [String], alwaysAllowedNames: [String], liftOnApproval: Bool,
                active: Bool, activeUntil: Date?, nextStart: Date?, liftedUntil: Date?, updatedAt: Date?, updatedBy: String?, timeZone: String? = nil) {
        self.timeZone = timeZone
        self.child = child
        self.childName = childName
        self.windows = windows
        self.alwaysAllowed = alwaysAllowed
        self.alwaysAllowedNames = alwaysAllowedNames
        self.liftOnApproval = liftOnApproval
        self.active = active
        self.activeUntil = activeUntil
        self.nextStart = nextStart
        self.liftedUntil = liftedUntil
        self.updatedAt = updatedAt
        self.updatedBy = updatedBy
    }
}

public struct ScheduleList: Codable, Sendable, Hashable {
    /// One per child (a child without downtime has no windows).
    public var schedules: [DowntimeSchedule]
    public init(schedules: [DowntimeSchedule]) { self.schedules = schedules }
}
