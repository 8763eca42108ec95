import AggregatorAPI
import ArgumentParser
import Foundation

// Downtime from a device: parents set a child's weekly schedule; parents and the child read
// it. The server keeps the clock (the family's time zone) and shields at each boundary.

struct DowntimeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "downtime", abstract: "A child's weekly downtime: show it (parent or child), set it or turn it off (parent).",
        discussion: """
            During downtime a child's reward apps are shielded whatever its earned time, but for the apps always allowed.
            Windows are in the family's time zone; an end before the start is the next morning's.
            Examples:
              screentimectl downtime --profile mum
              screentimectl downtime set --profile mum --child emma --window 'sun-thu 20:00-07:00' --window 'fri,sat 21:00-08:00' --allow com.apple.Maps
              screentimectl downtime off --profile mum --child emma
            """,
        subcommands: [Show.self, Set.self, Off.self], defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Each child's downtime, and whether it is on now.")
        @OptionGroup var device: DeviceOptions
        @Option(help: "Only this child's (parent).") var child: String?

        func run() async throws {
            try await Output.orExit {
                let device = try self.device.device()
                let schedules = try await device.aggregator.call(AggregatorMethods.listSchedules, ListSchedulesParams(child: self.child)).schedules
                if schedules.isEmpty { return print("No children yet.") }
                for schedule in schedules { print(DowntimeCommand.sentences(schedule)) }
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Set a child's downtime (parent), replacing what it had.")
        @OptionGroup var device: DeviceOptions
        @Option(help: "The child's id.") var child: String
        @Option(name: .customLong("window"), help: ArgumentHelp("A window: days and times, e.g. 'sun-thu 20:00-07:00', 'weekdays 16:00-17:00', 'every-day 21:30-07:00'. Repeat for more.",
                                                                  valueName: "days from-to"))
        var windows: [String]
        @Option(name: .customLong("allow"), help: "An app always allowed during downtime (its bundle id). Repeat for more; default the ones it had.") var allowed: [String] = []
        @Flag(inversion: .prefixedNo, help: "Whether approving a request for more time during downtime lifts it for the minutes approved (default: as it was, else yes).")
        var liftOnApproval: Bool?

        func validate() throws {
            guard !self.windows.isEmpty else { throw ValidationError("give at least one --window (or use `downtime off`)") }
            for window in self.windows { _ = try DowntimeCommand.window(window) }
        }

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let schedule = try await parent.aggregator.call(AggregatorMethods.setSchedule, SetScheduleParams(
                    child: self.child, windows: try self.windows.map(DowntimeCommand.window), alwaysAllowed: self.allowed.isEmpty ? nil : self.allowed,
                    liftOnApproval: self.liftOnApproval))
                print(DowntimeCommand.sentences(schedule))
            }
        }
    }

    struct Off: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "off", abstract: "Turn a child's downtime off (parent).")
        @OptionGroup var device: DeviceOptions
        @Option(help: "The child's id.") var child: String

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                print(DowntimeCommand.sentences(try await parent.aggregator.call(AggregatorMethods.setSchedule, SetScheduleParams(child: self.child, windows: []))))
            }
        }
    }

    /// "Emma: Sun–Thu 20:00–07:00; Fri, Sat 21:00–08:00. Always allowed: Maps. On now, until 07:00."
    static func sentences(_ schedule: DowntimeSchedule) -> String {
        guard !schedule.windows.isEmpty else { return "\(schedule.childName): no downtime." }
        var text = "\(schedule.childName): \(schedule.windows.map(\.words).joined(separator: "; "))."
        if !schedule.alwaysAllowedNames.isEmpty { text += " Always allowed: \(schedule.alwaysAllowedNames.joined(separator: ", "))." }
        // On the family's clocks, as the windows are.
        let zone = schedule.timeZone.flatMap(TimeZone.init(identifier:)) ?? .current
        let clock = { (date: Date) in date.formatted(Date.FormatStyle(date: .omitted, time: .shortened, timeZone: zone)) }
        if schedule.active, let until = schedule.activeUntil {
            text += " Downtime is on now, until \(clock(until))."
        } else if let lifted = schedule.liftedUntil {
            text += " Downtime is lifted until \(clock(lifted))."
        } else if let next = schedule.nextStart {
            var style = Date.FormatStyle.dateTime.weekday(.wide).hour().minute()
            style.timeZone = zone
            text += " Next from \(next.formatted(style))."
        }
        if !schedule.liftOnApproval { text += " Approving more time does not lift it." }
        return text
    }

    /// "sun-thu 20:00-07:00" → a window.
    static func window(_ text: String) throws -> DowntimeWindow {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        let times = parts.last?.split(separator: "-").map(String.init) ?? []
        guard parts.count == 2, times.count == 2, DowntimeWindow.minutes(times[0]) != nil, DowntimeWindow.minutes(times[1]) != nil else {
            throw ValidationError("--window '\(text)': days and times, like 'sun-thu 20:00-07:00' (24-hour HH:MM)")
        }
        return DowntimeWindow(days: try Self.days(String(parts[0]), in: text), start: times[0], end: times[1])
    }

    /// "sun-thu", "fri,sat", "weekdays", "weekends", "every-day".
    static func days(_ text: String, in window: String) throws -> [Weekday] {
        switch text.lowercased() {
        case "every-day", "daily": return Weekday.allCases
        case "weekdays": return [.mon, .tue, .wed, .thu, .fri]
        case "weekends": return [.sat, .sun]
        default: break
        }
        var days: [Weekday] = []
        for item in text.lowercased().split(separator: ",") {
            let ends = item.split(separator: "-").map { Weekday(rawValue: String($0.prefix(3))) }
            guard (1...2).contains(ends.count), let first = ends.first ?? nil, let last = ends.last ?? nil else {
                throw ValidationError("--window '\(window)': days as mon, tue, wed, thu, fri, sat, sun, a range like sun-thu, or weekdays, weekends, every-day")
            }
            var index = first.index
            while true {
                days.append(Weekday.allCases[index])
                if index == last.index { break }
                index = (index + 1) % 7
            }
        }
        return days
    }
}
