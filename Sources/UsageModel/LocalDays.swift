import Foundation
import Synchronization

/// Local calendar days in a family's IANA time zone: a day is `YYYY-MM-DD` and runs from
/// one local midnight to the next, so across a daylight-saving change it lasts 23 or 25
/// hours.
public struct LocalDays: Sendable {
    public let timeZone: TimeZone
    private let calendar: Calendar
    /// Foundation's calendar arithmetic is slow next to everything else the aggregator
    /// does per session (it was a fifth of its ingest); a day's bounds never change.
    private let memo: Memo

    private final class Memo: Sendable {
        struct Day { var name: String; var start: Date; var end: Date }
        let state = Mutex<(bounds: [String: Day], last: Day?)>(([:], nil))
    }

    /// Each time zone's days, made once: their memo then serves every batch and family in
    /// that zone. A household's server sees a zone or two; the bound keeps a stream of
    /// distinct identifiers (offsets such as `GMT+0130` are valid too) from growing it.
    private static let known = Mutex<[String: LocalDays]>([:])
    private static let mostKnown = 64

    /// Nil for an identifier that is not an IANA time zone.
    public init?(timeZone identifier: String) {
        if let known = Self.known.withLock({ $0[identifier] }) {
            self = known
            return
        }
        guard let zone = TimeZone(identifier: identifier) else { return nil }
        self.timeZone = zone
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        self.calendar = calendar
        self.memo = Memo()
        Self.known.withLock { known in
            if known.count >= Self.mostKnown { known.removeAll(keepingCapacity: true) }
            known[identifier] = self
        }
    }

    /// The day an instant falls on.
    public func day(containing instant: Date) -> String {
        let parts = self.calendar.dateComponents([.year, .month, .day], from: instant)
        return Self.format(year: parts.year!, month: parts.month!, day: parts.day!)
    }

    /// When `day` starts and ends (the next day's start); nil for a malformed day.
    public func bounds(of day: String) -> (start: Date, end: Date)? {
        if let known = self.memo.state.withLock({ $0.bounds[day] }) { return (known.start, known.end) }
        guard let bounds = self.computeBounds(of: day) else { return nil }
        self.memo.state.withLock { memo in
            if memo.bounds.count >= 4096 { memo.bounds.removeAll(keepingCapacity: true) }
            memo.bounds[day] = Memo.Day(name: day, start: bounds.start, end: bounds.end)
        }
        return bounds
    }

    /// The day an instant falls on, with its bounds; the last answer is kept, since
    /// consecutive sessions mostly fall on the same day.
    private func dayAndBounds(containing instant: Date) -> Memo.Day? {
        if let last = self.memo.state.withLock({ $0.last }), last.start <= instant, instant < last.end { return last }
        let day = self.day(containing: instant)
        guard let bounds = self.bounds(of: day) else { return nil }
        let found = Memo.Day(name: day, start: bounds.start, end: bounds.end)
        self.memo.state.withLock { $0.last = found }
        return found
    }

    private func computeBounds(of day: String) -> (start: Date, end: Date)? {
        guard let (year, month, dayOfMonth) = Self.parse(day),
              let noon = self.calendar.date(from: DateComponents(year: year, month: month, day: dayOfMonth, hour: 12))
        else { return nil }
        let start = self.calendar.startOfDay(for: noon)
        guard let next = self.calendar.date(byAdding: .day, value: 1, to: noon) else { return nil }
        return (start, self.calendar.startOfDay(for: next))
    }

    /// The days an interval touches, each with its part of the interval.
    public func split(_ start: Date, _ end: Date) -> [(day: String, start: Date, end: Date)] {
        guard start < end else { return [] }
        var parts: [(String, Date, Date)] = []
        var cursor = start
        while cursor < end {
            guard let day = self.dayAndBounds(containing: cursor), day.end > cursor else { break }
            let partEnd = min(end, day.end)
            parts.append((day.name, cursor, partEnd))
            cursor = partEnd
        }
        return parts
    }

    /// The day after (`by` 1) or before (`by` -1).
    public func day(_ day: String, plus days: Int) -> String? {
        guard let (year, month, dayOfMonth) = Self.parse(day),
              let noon = self.calendar.date(from: DateComponents(year: year, month: month, day: dayOfMonth, hour: 12)),
              let moved = self.calendar.date(byAdding: .day, value: days, to: noon)
        else { return nil }
        return self.day(containing: moved)
    }

    /// The Monday of the (ISO) week the day is in.
    public func monday(of day: String) -> String? {
        guard let (year, month, dayOfMonth) = Self.parse(day),
              let noon = self.calendar.date(from: DateComponents(year: year, month: month, day: dayOfMonth, hour: 12))
        else { return nil }
        let weekday = self.calendar.component(.weekday, from: noon)  // 1 is Sunday
        return self.day(day, plus: -((weekday + 5) % 7))
    }

    /// The day's place in its week: 0 for Monday … 6 for Sunday.
    public func weekday(of day: String) -> Int? {
        guard let (year, month, dayOfMonth) = Self.parse(day),
              let noon = self.calendar.date(from: DateComponents(year: year, month: month, day: dayOfMonth, hour: 12))
        else { return nil }
        return (self.calendar.component(.weekday, from: noon) + 5) % 7
    }

    /// The instant the family's clocks show `minute` (minutes after midnight) on `day`. A
    /// time the clocks skip (the spring-forward gap) is the first instant after the gap: the
    /// clocks never show 02:30, and 03:00 is the first time that is "at or after 02:30". A
    /// time they show twice (the autumn's repeated hour) is its first occurrence.
    public func instant(of day: String, minute: Int) -> Date? {
        guard let (year, month, dayOfMonth) = Self.parse(day), (0...1440).contains(minute) else { return nil }
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        guard let midnight = utc.date(from: DateComponents(year: year, month: month, day: dayOfMonth)) else { return nil }
        // The wall-clock time read as if it were UTC, less each offset the zone has near
        // it: an offset that holds at its own instant is a reading of that wall time.
        let wall = midnight.timeIntervalSince1970 + Double(minute * 60)
        let offsets = Set([-86_400.0, 0, 86_400].map { Double(self.timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: wall + $0))) })
        let readings = offsets.map { wall - $0 }.filter { Double(self.timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: $0))) == wall - $0 }
        if let first = readings.min() { return Date(timeIntervalSince1970: first) }
        // In a gap: the transition that skipped it.
        let before = Date(timeIntervalSince1970: wall - (offsets.max() ?? 0) - 1)
        return self.timeZone.nextDaylightSavingTimeTransition(after: before)
    }

    /// Every day from `first` to `last`, both included, in order.
    public func days(from first: String, through last: String) -> [String] {
        var days: [String] = []
        var cursor: String? = first
        while let day = cursor, day <= last {
            days.append(day)
            cursor = self.day(day, plus: 1)
        }
        return days
    }

    public static func format(year: Int, month: Int, day: Int) -> String {
        // As `%04d-%02d-%02d` would write it, without Foundation's formatter (once a session).
        func padded(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return value < 0 || digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
        return padded(year, 4) + "-" + padded(month, 2) + "-" + padded(day, 2)
    }

    public static func parse(_ day: String) -> (Int, Int, Int)? {
        let parts = day.split(separator: "-")
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let year = Int(parts[0]), let month = Int(parts[1]), let dayOfMonth = Int(parts[2]),
              (1...12).contains(month), (1...31).contains(dayOfMonth)
        else { return nil }
        return (year, month, dayOfMonth)
    }
}
