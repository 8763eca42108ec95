import AggregatorAPI
import ArgumentParser
import Foundation
import PairingAPI
import RPCCore
import StoreAPI

// Everyday parenting from a device: a child asks for more time; parents answer, grant,
// take away, pause and resume. The server (the aggregator) decides and keeps the ledger;
// these commands say what it answered, in words.

struct AskCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ask", abstract: "Ask the parents for more reward time (child device).",
        discussion: """
            Every parent device gets an alert at once; a parent approves or denies it (screentimectl requests approve).
            Examples:
              screentimectl ask --profile emma-ipad --minutes 30 --app com.youtube --app-name YouTube --note 'homework done'
              screentimectl ask --profile emma-ipad --rest-of-day
            """)
    @OptionGroup var device: DeviceOptions
    @Option(help: "How many minutes (1 to 1440).") var minutes: Int64?
    @Flag(help: "The rest of the family's day instead.") var restOfDay = false
    @Option(help: "One reward app (its bundle id); default every reward app.") var app: String?
    @Option(help: "The app's name, as the parents will read it.") var appName: String?
    @Option(help: "A note for the parents (at most 200 characters).") var note: String?

    func validate() throws {
        if (self.minutes == nil) == !self.restOfDay { throw ValidationError("give --minutes N or --rest-of-day") }
    }

    func run() async throws {
        try await Output.orExit {
            let child = try self.device.device(.child)
            let request = try await child.aggregator.call(AggregatorMethods.askForTime, AskForTimeParams(
                minutes: self.minutes, restOfDay: self.restOfDay ? true : nil, app: self.app, appName: self.appName, note: self.note))
            print("Asked for \(request.asked). The parents have been told; it expires at \(request.expiresAt.formatted(date: .omitted, time: .shortened)) if nobody answers.")
            if request.whilePaused { print("Reward apps are paused by a parent right now: an approval adds time, and the pause still holds until it ends.") }
        }
    }
}

struct RequestsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "requests", abstract: "Requests for more time: list them (parent or child), approve or deny one (parent).",
        discussion: """
            A request is named by the short id the list shows (or its whole id). The first parent to answer wins; a later answer is told who answered.
            Examples:
              screentimectl requests --profile mum
              screentimectl requests approve 3f2a9c1d --profile mum --minutes 20 --reply 'well done'
              screentimectl requests deny 3f2a9c1d --profile dad --reply 'not tonight'
            """,
        subcommands: [List.self, Approve.self, Deny.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List requests: open ones on top, newest first.")
        @OptionGroup var device: DeviceOptions
        @Option(help: "Only this child's (parent).") var child: String?
        @Flag(help: "Only open ones.") var open = false
        @Option(help: "Show at most this many.") var limit = 20

        func run() async throws {
            try await Output.orExit {
                let device = try self.device.device()
                let requests = try await device.aggregator.call(AggregatorMethods.listRequests, ListRequestsParams(
                    child: self.child, status: self.open ? .open : nil, limit: max(1, min(self.limit, ParentingLimits.listLength)))).requests
                if requests.isEmpty { return print(self.open ? "No requests waiting for an answer." : "No requests for more time yet.") }
                print(Table.render(["ASKED", "REQUEST", "STATUS", "ID"], requests.map { request in
                    [request.createdAt.formatted(date: .abbreviated, time: .shortened), request.sentence, RequestsCommand.status(request), RequestsCommand.shortId(request.id)]
                }), terminator: "")
            }
        }
    }

    struct Approve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Approve a request (parent): its minutes, or --minutes.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The request's id (as the list shows it).") var request: String
        @Option(help: "Approve this many minutes instead of what was asked (1 to 1440).") var minutes: Int64?
        @Option(help: "A reply to the child.") var reply: String?

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let id = try await RequestsCommand.resolve(self.request, parent)
                let answered = try await parent.aggregator.call(AggregatorMethods.answerRequest, AnswerRequestParams(request: id, approve: true, minutes: self.minutes, reply: self.reply))
                print("Approved \(TimeRequestInfo.minutesWords(answered.grantedMinutes ?? answered.minutes)) for \(answered.childName). \(answered.childName)'s device has been told.")
            }
        }
    }

    struct Deny: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deny a request (parent).")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The request's id (as the list shows it).") var request: String
        @Option(help: "A reply to the child.") var reply: String?

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let id = try await RequestsCommand.resolve(self.request, parent)
                let answered = try await parent.aggregator.call(AggregatorMethods.answerRequest, AnswerRequestParams(request: id, approve: false, reply: self.reply))
                print("Said no to \(answered.childName)'s \(answered.asked). \(answered.childName)'s device has been told.")
            }
        }
    }

    /// `request-3f2a9c1d-…` → `3f2a9c1d`.
    static func shortId(_ id: String) -> String { String(id.dropFirst("request-".count).prefix(8)) }

    static func status(_ request: TimeRequestInfo) -> String {
        switch request.status {
        case .open: return "waiting until \(request.expiresAt.formatted(date: .omitted, time: .shortened))"
        case .approved, .denied: return "answered \(request.answeredAt?.formatted(date: .omitted, time: .shortened) ?? "")"
        case .expired: return "expired"
        }
    }

    /// A whole id as given, or the family's one request whose short id it is.
    static func resolve(_ given: String, _ parent: Device) async throws -> String {
        if given.hasPrefix("request-") { return given }
        let all = try await parent.aggregator.call(AggregatorMethods.listRequests, ListRequestsParams()).requests
        let matching = all.filter { $0.id.hasPrefix("request-\(given)") }
        guard matching.count == 1 else {
            throw CLIError(.invalidInput, matching.isEmpty ? "no request \(given) in the family: screentimectl requests lists them"
                                                           : "\(given) names \(matching.count) requests: give more of its id")
        }
        return matching[0].id
    }
}

struct GrantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grant", abstract: "Give a child more reward time, in minutes or points (parent).",
        discussion: "Example:\n  screentimectl grant --profile mum --child emma --minutes 15 --reason 'bonus for the dishes'")
    @OptionGroup var device: DeviceOptions
    @OptionGroup var change: PointsOrMinutes

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let result = try await parent.aggregator.call(AggregatorMethods.grant, self.change.params(sign: 1))
            print("Added \(PointsOrMinutes.words(result.points, minutes: self.change.minutes)) for \(result.time.childName). \(ChildTimeWords.sentence(result.time))")
        }
    }
}

struct TakeAwayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "take-away", abstract: "Take reward time away from a child, in minutes or points (parent); never below zero.",
        discussion: "Example:\n  screentimectl take-away --profile mum --child emma --minutes 30 --reason 'no screens after the fight'")
    @OptionGroup var device: DeviceOptions
    @OptionGroup var change: PointsOrMinutes

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let result = try await parent.aggregator.call(AggregatorMethods.grant, self.change.params(sign: -1))
            if result.points == 0 {
                print("\(result.time.childName) has no earned time left to take away. \(ChildTimeWords.sentence(result.time))")
            } else {
                let all = result.points == result.askedPoints
                print("Took away \(PointsOrMinutes.words(result.points, minutes: all ? self.change.minutes : nil)) from \(result.time.childName)\(all ? "" : " (all there was)"). \(ChildTimeWords.sentence(result.time))")
            }
        }
    }
}

struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause", abstract: "Shield a child's reward apps now, whatever the balance (parent).",
        discussion: "Examples:\n  screentimectl pause --profile mum --child emma --minutes 60 --reason dinner\n  screentimectl pause --profile mum --child emma   (until resumed)")
    @OptionGroup var device: DeviceOptions
    @Option(help: "The child's id.") var child: String
    @Option(help: "For this many minutes (1 to 10080); default until resumed.") var minutes: Int64?
    @Option(help: "Why, for the child and the family's log.") var reason: String?

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let time = try await parent.aggregator.call(AggregatorMethods.pause, PauseParams(child: self.child, minutes: self.minutes, reason: self.reason))
            print(ChildTimeWords.sentence(time))
        }
    }
}

struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "End a child's pause now (parent).")
    @OptionGroup var device: DeviceOptions
    @Option(help: "The child's id.") var child: String

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            print(ChildTimeWords.sentence(try await parent.aggregator.call(AggregatorMethods.resume, ResumeParams(child: self.child))))
        }
    }
}

/// What `grant` and `take-away` take: a child, minutes or points, and why.
struct PointsOrMinutes: ParsableArguments {
    @Option(help: "The child's id.") var child: String
    @Option(help: "Minutes of reward time (1 to 1440), at the family's rate.") var minutes: Int64?
    @Option(help: "Points (1 to 100000) instead.") var points: Int64?
    @Option(help: "Why, for the child and the family's log.") var reason: String?

    func validate() throws {
        guard (self.points == nil) != (self.minutes == nil) else { throw ValidationError("give --minutes or --points") }
        if let value = self.points ?? self.minutes, value < 1 { throw ValidationError("a positive number, please") }
    }

    /// To add (`sign` 1) or take away (−1).
    func params(sign: Int64) -> GrantParams {
        GrantParams(child: self.child, points: self.points.map { sign * $0 }, minutes: self.minutes.map { sign * $0 }, reason: self.reason)
    }

    static func words(_ points: Int64, minutes: Int64?) -> String {
        minutes.map(TimeRequestInfo.minutesWords) ?? (abs(points) == 1 ? "1 point" : "\(abs(points)) points")
    }
}

/// A child's time in a sentence: "Emma has 25 min left (25 points); reward apps are open."
enum ChildTimeWords {
    static func sentence(_ time: ChildTime) -> String {
        let left = "\(time.childName) has \(Table.time(max(0, time.balanceSeconds))) left (\(time.pointsBalance) points)"
        guard time.shielded else { return "\(left); reward apps are open." }
        switch time.shieldReason {
        case "paused":
            let until = time.pausedUntil.map { "until \($0.formatted(date: .omitted, time: .shortened))" } ?? "until a parent resumes them"
            return "\(left); reward apps are paused by \(time.pausedBy ?? "a parent") \(until)."
        case "dailyCap": return "\(left); reward apps are shielded: today's cap is reached."
        case "downtime":
            let until = time.downtimeUntil.map { " until \($0.formatted(date: .omitted, time: .shortened))" } ?? ""
            return "\(left); reward apps are shielded: it is downtime\(until)."
        default: return "\(left); reward apps are shielded until more is earned."
        }
    }
}

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit", abstract: "The family's log (parent): who did what, newest first, in words.",
        discussion: "Every parent's action from any device, the children's requests, pairing, and what the server did by itself.\nExample:\n  screentimectl audit --profile mum --limit 20")
    @OptionGroup var device: DeviceOptions
    @Option(help: "Show at most this many entries (1 to 400).") var limit = 30

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let entries = try await parent.store.call(StoreMethods.query, QueryParams(
                family: parent.family, zone: StoreNames.defaultZone, recordType: RecordTypes.auditEntry,
                sort: QuerySort(AuditEntry.Field.timestamp, descending: true), limit: max(1, min(self.limit, 400)))).records
            // Alerts are in the log too (the alerts' history): said by their title.
            let names = AuditWords.Names(try await parent.pairing.call(PairingMethods.listDevices, Empty()).devices)
            let rows = entries.compactMap { record -> [String]? in
                guard let entry = record.fields(as: AuditEntry.self) else { return nil }
                let metadata = AuditWords.trusted(entry.metadata.flatMap { try? JSONParser.parse($0) }, createdBy: record.createdBy)
                let what = entry.action.hasPrefix("alert.") ? "alerted the parents: \(metadata?["title"]?.stringValue ?? entry.action)"
                                                           : AuditWords.sentence(action: entry.action, target: entry.target ?? "", metadata: metadata, names)
                return [entry.timestamp.formatted(date: .abbreviated, time: .shortened),
                        "\(AuditWords.actor(entry.actor ?? record.createdBy ?? "", metadata: metadata, names)) \(what)"]
            }
            if rows.isEmpty { return print("The family's log is empty.") }
            print(Table.render(["WHEN", "WHAT"], rows), terminator: "")
        }
    }
}
