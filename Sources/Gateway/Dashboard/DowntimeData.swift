import AggregatorAPI
import Foundation
import RPCCore

/// A child's downtime on its page: the schedule in words, where the family's clock is in
/// it, and the form that sets it (`aggregator.setSchedule`, as the browser's parent device).
extension BrowserDevice {
    /// Rows of the form: the windows the child has, then empty ones to add (at most 14 in all).
    static let spareWindowRows = 2

    func downtimeCard(_ id: String, _ clock: FamilyClock, appNames: [String: String]) async throws(RPCError) -> [String: Any] {
        let schedule = try await self.call(AggregatorMethods.listSchedules, ListSchedulesParams(child: id)).schedules.first
        let windows = schedule?.windows ?? []
        let rows = (windows.map(Optional.some) + Array(repeating: nil, count: max(0, min(Self.spareWindowRows, DowntimeLimits.windows - windows.count))))
            .enumerated().map { index, window -> [String: Any] in
                [
                    "index": index, "number": index + 1, "start": window?.start ?? "", "end": window?.end ?? "",
                    "days": Weekday.allCases.map { day in
                        ["day": day.rawValue, "short": String(day.name.prefix(3)), "name": day.name, "checked": window?.days.contains(day) ?? false, "index": index]
                    },
                ]
            }
        let allowed = Set(schedule?.alwaysAllowed ?? [])
        let apps = appNames.sorted { $0.value.localizedCaseInsensitiveCompare($1.value) == .orderedAscending }
            .map { ["app": $0.key, "name": $0.value, "checked": allowed.contains($0.key)] as [String: Any] }
        // An app always allowed that the family's rules do not name still shows, by its id.
        let unnamed = (schedule?.alwaysAllowed ?? []).filter { appNames[$0] == nil }.map { ["app": $0, "name": $0, "checked": true] as [String: Any] }
        let allowApps = (apps + unnamed).enumerated().map { index, app in app.merging(["index": index]) { kept, _ in kept } }
        return [
            "downtimeSentence": Self.downtimeSentence(schedule, clock), "downtimeOn": schedule?.active ?? false, "hasDowntime": !windows.isEmpty,
            "downtimeWindows": windows.map(\.words), "windowRows": rows, "allowApps": allowApps, "hasAllowApps": !allowApps.isEmpty,
            "liftOnApproval": schedule?.liftOnApproval ?? true,
            "downtimeAllowed": (schedule?.alwaysAllowed ?? []).map { appNames[$0] ?? $0 }.joined(separator: ", "),
        ]
    }

    /// "Downtime is on until 07:00", "Next downtime: Sunday 20:00", "No downtime".
    static func downtimeSentence(_ schedule: DowntimeSchedule?, _ clock: FamilyClock) -> String {
        guard let schedule, !schedule.windows.isEmpty else { return "No downtime: reward apps follow earned time only." }
        if schedule.active, let until = schedule.activeUntil { return "Downtime is on now, until \(clock.weekdayTime(until))." }
        if let lifted = schedule.liftedUntil { return "Downtime is lifted until \(clock.weekdayTime(lifted)) (a request was approved)." }
        return schedule.nextStart.map { "Next downtime from \(clock.weekdayTime($0))." } ?? "Downtime is set."
    }

    /// The form's windows: rows with at least one day ticked; a row with a day but no
    /// times (or times but no day) is an error the parent can act on.
    static func windows(from form: [String: String]) throws(RPCError) -> [DowntimeWindow] {
        var windows: [DowntimeWindow] = []
        for index in 0..<DowntimeLimits.windows {
            let days = Weekday.allCases.filter { form["w\(index)-\($0.rawValue)"] == "on" }
            let start = (form["w\(index)-start"] ?? "").trimmingCharacters(in: .whitespaces)
            let end = (form["w\(index)-end"] ?? "").trimmingCharacters(in: .whitespaces)
            if days.isEmpty && start.isEmpty && end.isEmpty { continue }
            guard !days.isEmpty else { throw RPCError(.invalidParams, "Window \(index + 1) has times but no day: tick the days it starts on") }
            guard !start.isEmpty, !end.isEmpty else { throw RPCError(.invalidParams, "Window \(index + 1) needs a start and an end time") }
            windows.append(DowntimeWindow(days: days, start: String(start.prefix(5)), end: String(end.prefix(5))))
        }
        return windows
    }
}

extension FamilyClock {
    /// `Monday 20:00` within the coming week, else `24 Nov 2026, 20:00`.
    func weekdayTime(_ date: Date) -> String {
        guard date.timeIntervalSince(self.now) < 6 * 86_400, date > self.now.addingTimeInterval(-86_400) else { return self.time(date) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_GB")
        formatter.timeZone = self.timeZone
        formatter.dateFormat = self.day(date) == self.today ? "HH:mm" : "EEEE HH:mm"
        return formatter.string(from: date)
    }
}
