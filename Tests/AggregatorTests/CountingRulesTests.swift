import Foundation
import Testing
import UsageModel

@Suite("Counting rules: local days, overlaps, points")
struct CountingRulesTests {
    let newYork = LocalDays(timeZone: "America/New_York")!

    @Test("a day is local midnight to local midnight, 23 or 25 hours across daylight saving")
    func dayLengths() throws {
        let spring = try #require(self.newYork.bounds(of: "2026-03-08"))
        let fall = try #require(self.newYork.bounds(of: "2026-11-01"))
        let plain = try #require(self.newYork.bounds(of: "2026-11-22"))
        #expect(spring.end.timeIntervalSince(spring.start) == 23 * 3600)
        #expect(fall.end.timeIntervalSince(fall.start) == 25 * 3600)
        #expect(plain.end.timeIntervalSince(plain.start) == 24 * 3600)
        #expect(self.newYork.day(containing: plain.start) == "2026-11-22" && self.newYork.day(containing: plain.end) == "2026-11-23")
        #expect(self.newYork.day("2026-12-31", plus: 1) == "2027-01-01")
        #expect(LocalDays(timeZone: "Mars/Olympus") == nil && self.newYork.bounds(of: "2026-13-01") == nil)
    }

    @Test("a day's name has four digits of year and two of month and day, as it sorts; each zone's days answer alike wherever they are made")
    func dayNames() throws {
        #expect(LocalDays.format(year: 7, month: 3, day: 9) == "0007-03-09")
        #expect(LocalDays.format(year: 2026, month: 12, day: 31) == "2026-12-31")
        #expect(LocalDays.format(year: 12026, month: 1, day: 1) == "12026-01-01")
        // Many zones made in turn (past the number kept), then New York's again.
        let offsets = (0..<120).map { "GMT\($0 % 2 == 0 ? "+" : "-")\(String(format: "%02d", $0 / 2 % 15))\(["00", "15", "30", "45"][$0 / 30])" }
        #expect(Set(offsets).count == 120 && offsets.compactMap { LocalDays(timeZone: $0) }.count == 120)
        let again = try #require(LocalDays(timeZone: "America/New_York"))
        let instant = try #require(self.newYork.bounds(of: "2026-03-08")).start.addingTimeInterval(5 * 3600)
        #expect(again.day(containing: instant) == "2026-03-08" && again.bounds(of: "2026-03-08")! == self.newYork.bounds(of: "2026-03-08")!)
        #expect(again.timeZone.identifier == "America/New_York")
    }

    @Test("an interval is split at each local midnight it crosses")
    func split() throws {
        let start = try #require(self.newYork.bounds(of: "2026-11-21")).start.addingTimeInterval(23 * 3600)
        let parts = self.newYork.split(start, start.addingTimeInterval(26 * 3600))
        #expect(parts.map(\.day) == ["2026-11-21", "2026-11-22", "2026-11-23"])
        #expect(parts.map { $0.end.timeIntervalSince($0.start) } == [3600, 86400, 3600])
        #expect(self.newYork.split(start, start).isEmpty)
    }

    @Test("same-app overlaps are a union; points round down per app and day; reward and unrated apps earn nothing")
    func totals() throws {
        let day = try #require(self.newYork.bounds(of: "2026-11-22"))
        let at = { (minutes: Double) in day.start.addingTimeInterval(minutes * 60) }
        let spans = [
            Span(app: "a", start: at(60), end: at(120)), Span(app: "a", start: at(90), end: at(150)), Span(app: "a", start: at(100), end: at(110)),
            Span(app: "b", start: at(60), end: at(61.5)),
            Span(app: "game", start: at(200), end: at(230)),
            Span(app: "other", start: at(300), end: at(310)),
            Span(app: "a", start: day.start.addingTimeInterval(-600), end: at(1)),  // from the day before: only its last minute
        ]
        let totals = DayTotals.compute(spans, from: day.start, to: day.end) { app in
            switch app {
            case "a": AppRating(category: .learning, pointsPerMinute: 2)
            case "b": AppRating(category: .learning, pointsPerMinute: 3)
            case "game": AppRating(category: .reward, pointsPerMinute: 10)
            default: AppRating(category: nil, pointsPerMinute: 0)
            }
        }
        #expect(totals.apps.map(\.app) == ["a", "game", "other", "b"])
        #expect(totals.apps.map(\.seconds) == [91 * 60, 1800, 600, 90])
        #expect(totals.apps.map(\.points) == [182, 0, 0, 4], "b: 90 s at 3/min is 4.5, rounded down")
        #expect(totals.learningSeconds == 91 * 60 + 90 && totals.rewardSeconds == 1800 && totals.points == 186)
    }
}
