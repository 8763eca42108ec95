import Foundation

/// Times and durations as the family reads them: in the family's time zone (the Family
/// record's `timeZone`), days as the aggregator counts them, "2 minutes ago".
struct FamilyClock: Sendable {
    let timeZone: TimeZone
    let now: Date

    init(timeZone identifier: String?, now: Date = Date()) {
        self.timeZone = identifier.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")!
        self.now = now
    }

    var timeZoneName: String { self.timeZone.identifier }

    /// `YYYY-MM-DD` of a moment, in the family's zone (the aggregator's day names).
    func day(_ date: Date) -> String {
        let parts = self.calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    var today: String { self.day(self.now) }

    func day(daysAgo: Int) -> String {
        self.day(self.calendar.date(byAdding: .day, value: -daysAgo, to: self.now) ?? self.now)
    }

    /// `YYYY-MM-DD` moved by whole days (calendar days: no time zone involved).
    static func day(_ day: String, plus days: Int) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = day.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, let date = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2], hour: 12)),
              let moved = calendar.date(byAdding: .day, value: days, to: date) else { return day }
        let out = calendar.dateComponents([.year, .month, .day], from: moved)
        return String(format: "%04d-%02d-%02d", out.year ?? 0, out.month ?? 0, out.day ?? 0)
    }

    var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = self.timeZone
        return calendar
    }

    /// `24 Nov 2026, 14:05`.
    func time(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_GB")
        formatter.timeZone = self.timeZone
        formatter.dateFormat = "d MMM yyyy, HH:mm"
        return formatter.string(from: date)
    }

    /// `just now`, `2 minutes ago`, `3 hours ago`, `5 days ago`.
    func ago(_ date: Date) -> String {
        let seconds = Int(self.now.timeIntervalSince(date))
        if seconds < 60 { return "just now" }
        let (value, unit): (Int, String) = seconds < 3600 ? (seconds / 60, "minute") : seconds < 86_400 ? (seconds / 3600, "hour") : (seconds / 86_400, "day")
        return "\(value) \(unit)\(value == 1 ? "" : "s") ago"
    }

    /// `1 h 05 min`, `12 min`, `0 min`.
    static func duration(_ seconds: Int64) -> String {
        let minutes = max(0, seconds) / 60
        if minutes < 60 { return "\(minutes) min" }
        return "\(minutes / 60) h \(String(format: "%02d", minutes % 60)) min"
    }
}
