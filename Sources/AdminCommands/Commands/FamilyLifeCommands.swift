import AggregatorAPI
import ArgumentParser
import Foundation
import PushAPI
import RPCCore
import ScreenTimeKit
import StoreAPI

struct AppsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps", abstract: "The family's app rules (parent): category, points per minute, enabled, blocked; and one child's own.",
        discussion: """
            A rule for one child (--child) replaces the family's for that child's devices; `apps reset` gives the family's back.
            Examples:
              screentimectl apps set --profile mum com.google.ios.youtube --category reward
              screentimectl apps set --profile mum com.google.ios.youtube --child leo --blocked true
              screentimectl apps reset --profile mum com.google.ios.youtube --child leo
            """,
        subcommands: [Set.self, List.self, Reset.self], defaultSubcommand: List.self
    )

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one child's own rule for an app: the family's applies to that child again.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The app's bundle id.") var bundleId: String
        @Option(help: "The child's id.") var child: String

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let removed = try await parent.resetChildAppRule(child: self.child, self.bundleId)
                print(removed ? "\(self.child) follows the family's rule for \(self.bundleId) again." : "\(self.child) had no rule of its own for \(self.bundleId).")
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an app's rule; every paired child device gets a pending command to apply it.",
            discussion: "Example:\n  screentimectl apps set --profile mum org.khanacademy --category learning --points-per-minute 2"
        )
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The app's bundle id.") var bundleId: String
        @Option(help: "learning or reward (needed the first time).") var category: String?
        @Option(help: "Points earned per minute of use (learning apps).") var pointsPerMinute: Int?
        @Option(help: "Whether the app counts at all (true or false).") var enabled: Bool?
        @Option(help: "Whether the app is blocked on the child's devices (true or false).") var blocked: Bool?
        @Option(help: "A name to show.") var name: String?
        @Option(help: "For this child only (its id): replaces the family's rule on its devices.") var child: String?

        func validate() throws {
            if let category = self.category, !["learning", "reward"].contains(category) { throw ValidationError("--category is learning or reward") }
            if let points = self.pointsPerMinute, points < 0 { throw ValidationError("--points-per-minute must not be negative") }
            if self.child != nil && self.name != nil { throw ValidationError("--name is the family's: set it without --child") }
        }

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                if let child = self.child {
                    try await parent.setChildAppRule(child: child, self.bundleId, category: self.category, pointsPerMinute: self.pointsPerMinute,
                                                     enabled: self.enabled, blocked: self.blocked)
                    return print("\(child)'s own rule for \(self.bundleId) saved; the server sends it to \(child)'s devices, in place of the family's.")
                }
                let told = try await parent.setAppRule(self.bundleId, category: self.category, pointsPerMinute: self.pointsPerMinute,
                                                       enabled: self.enabled, blocked: self.blocked, displayName: self.name)
                let devices = told.map { $0.deviceName ?? $0.deviceId }.joined(separator: ", ")
                print("Rule for \(self.name ?? self.bundleId) saved; "
                      + (told.isEmpty ? "no child device is paired yet (each gets the family's rules when it is)." : "the server sends the family's rules to \(devices)."))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the family's app rules, each child's own under the family's.")

        static func childRow(_ rule: TypedRecord<ChildAppRule>) -> [String] {
            let child = rule.fields.childRef.recordName.hasPrefix("child-") ? String(rule.fields.childRef.recordName.dropFirst(6)) : rule.fields.childRef.recordName
            return ["  \(rule.fields.bundleId)", "\(child) only", rule.fields.classification, rule.fields.pointsPerMinute.map { String($0) } ?? "default",
                    rule.fields.isEnabled.map { String($0) } ?? "true", rule.fields.blockingEnabled.map { String($0) } ?? "false"]
        }
        @OptionGroup var device: DeviceOptions

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let rules = try await parent.appRules()
                let own = try await parent.childAppRules()
                // Each family rule, then the children's own under it ("emma only").
                var rows: [[String]] = []
                for rule in rules {
                    rows.append([rule.fields.bundleId, "everyone", rule.fields.classification, rule.fields.pointsPerMinute.map { String($0) } ?? "default",
                                 rule.fields.isEnabled.map { String($0) } ?? "true", rule.fields.blockingEnabled.map { String($0) } ?? "false"])
                    rows += own.filter { $0.fields.bundleId == rule.fields.bundleId }.map(Self.childRow)
                }
                rows += own.filter { child in !rules.contains { $0.fields.bundleId == child.fields.bundleId } }.map(Self.childRow)
                print(Table.render(["APP", "FOR", "CATEGORY", "POINTS/MIN", "ENABLED", "BLOCKED"], rows, rightAligned: [3]), terminator: "")
            }
        }
    }
}

struct CommandsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "commands", abstract: "The commands the parents sent to this child device: list them, or apply them.",
        subcommands: [List.self, Apply.self, Resync.self], defaultSubcommand: List.self
    )

    struct Resync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask the server for this device's configuration again (the family's rules and the shield), then apply it.",
            discussion: "The server also sends it by itself when a parent confirms the device and whenever the rules change; this is for a device that thinks it missed something.")
        @OptionGroup var device: DeviceOptions

        func run() async throws {
            try await Output.orExit {
                var child = try self.device.device(.child)
                let version = try await child.aggregator.call(AggregatorMethods.resync, ResyncParams()).version
                // The server writes it within a second: wait for it, then apply it.
                let deadline = ContinuousClock.now + .seconds(15)
                while true {
                    let waiting = try await child.pendingCommands().filter { $0.fields.configuration?.version ?? -1 >= version }
                    if let command = waiting.first {
                        print("\(try await child.apply(command))")
                        return
                    }
                    guard ContinuousClock.now < deadline else {
                        throw CLIError(.timeout, "the server did not send the configuration within 15 s; is the aggregator running? (screentimectl ping aggregator)")
                    }
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the pending commands.")
        @OptionGroup var device: DeviceOptions

        func run() async throws {
            try await Output.orExit {
                let child = try self.device.device(.child)
                let commands = try await child.pendingCommands()
                if commands.isEmpty { return print("No pending commands.") }
                print(Table.render(["COMMAND", "TYPE", "CREATED", "PAYLOAD"], commands.map { command in
                    [command.recordName, command.fields.commandType, command.fields.createdAt.map(StoreDates.format) ?? "", command.fields.payloadJSON ?? ""]
                }), terminator: "")
            }
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Apply every pending command on this device and mark it executed.")
        @OptionGroup var device: DeviceOptions

        func run() async throws {
            try await Output.orExit {
                var child = try self.device.device(.child)
                // The parents see which version each device runs.
                try await child.reportAppVersion()
                let commands = try await child.pendingCommands()
                if commands.isEmpty { return print("No pending commands.") }
                for command in commands {
                    print("\(command.recordName): \(try await child.apply(command))")
                }
            }
        }
    }
}

struct UsageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "usage", abstract: "Upload app usage sessions from this child device.",
        discussion: """
            Through a gateway (--server, or a profile paired through one) uploads go through \
            ScreenTimeKit's offline queue, kept beside the profile (<profile>.kit.sqlite): each \
            batch is stored first, then sent once; what cannot be sent now (the gateway \
            unreachable) waits, and `usage sync` (or the next upload) sends it, exactly once.
            """,
        subcommands: [Add.self, Import.self, Sync.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Upload one session of an app.",
            discussion: "Example:\n  screentimectl usage add --profile emma-tablet org.khanacademy --minutes 30\n(the session ends now unless --start or --end says otherwise)"
        )
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The app's bundle id.") var app: String
        @Option(help: "How long the session lasted.") var minutes: Double
        @Option(help: "When it started (RFC 3339, e.g. 2026-11-22T16:00:00+01:00).") var start: String?
        @Option(help: "When it ended (RFC 3339); default now, or start + minutes.") var end: String?
        @Option(help: "learning or reward; default the rule this device applied for the app.") var category: String?

        func validate() throws {
            guard self.minutes > 0 && self.minutes <= 24 * 60 else { throw ValidationError("--minutes is more than 0 and at most 1440") }
            if self.start != nil && self.end != nil { throw ValidationError("give --start or --end, not both") }
        }

        func run() async throws {
            try await Output.orExit {
                let child = try self.device.device(.child)
                let length = self.minutes * 60
                let session: Device.Session
                if let start = self.start {
                    let begin = try Self.date(start, "--start")
                    session = Device.Session(app: self.app, start: begin, end: begin.addingTimeInterval(length), category: self.category)
                } else {
                    let end = try self.end.map { try Self.date($0, "--end") } ?? Date()
                    session = Device.Session(app: self.app, start: end.addingTimeInterval(-length), end: end, category: self.category)
                }
                let category = try child.category(of: session)
                if category == "reward" && child.profile.shielded {
                    throw CLIError(.refused, "reward apps are shielded on this device: earned time is used up (learning apps earn more)")
                }
                let uploaded = try await child.upload([session])
                if uploaded.queued > 0 {
                    print("Queued \(uploaded.names[0]): \(self.app) (\(category)), \(Table.time(Int64(length))) from \(StoreDates.format(session.start)); \(uploaded.why): `screentimectl usage sync` sends it (once) then.")
                } else {
                    print("Uploaded \(uploaded.names[0]): \(self.app) (\(category)), \(Table.time(Int64(length))) from \(StoreDates.format(session.start)).")
                }
            }
        }

        static func date(_ text: String, _ option: String) throws(CLIError) -> Date {
            guard let date = StoreDates.parse(text) else { throw CLIError(.invalidInput, "\(option) is not an RFC 3339 time (2026-11-22T16:00:00+01:00): \(text)") }
            return date
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Upload the sessions of a CSV file, in batches, with progress.",
            discussion: """
                The CSV has a header line naming its columns: app, start, end (RFC 3339) and, \
                optionally, category (learning or reward; else the rule this device applied). \
                Importing the same file again uploads nothing twice.
                """
        )
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The CSV file, or - for standard input.") var file: String

        func run() async throws {
            try await Output.orExit {
                let child = try self.device.device(.child)
                let sessions = try UsageCSV.parse(try self.read())
                guard !sessions.isEmpty else { throw CLIError(.invalidInput, "\(self.file) holds no sessions") }
                for session in sessions { _ = try child.category(of: session) }
                let uploaded = try await child.upload(sessions) { done in Progress.count("uploaded", done, of: sessions.count) }
                if uploaded.queued > 0 {
                    print("Queued \(uploaded.names.count) sessions from \(self.file) (\(Output.count(uploaded.queued, "batch waits", "batches wait")): \(uploaded.why); `screentimectl usage sync` sends them, once then).")
                } else {
                    print("Imported \(uploaded.names.count) sessions from \(self.file).")
                }
            }
        }

        func read() throws(CLIError) -> String {
            if self.file == "-" { return String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) }
            guard let data = FileManager.default.contents(atPath: self.file) else { throw CLIError(.invalidInput, "cannot read \(self.file)") }
            return String(decoding: data, as: UTF8.self)
        }
    }
}

extension UsageCommand {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send what this device's offline queue holds (uploads made while the gateway was unreachable), oldest first, each batch once.",
            discussion: """
                One line per batch: `sent ID (N records)`, or `already applied ID` when the server \
                had applied it before and only its reply was lost (a crash, a dropped connection). \
                Exits 0 when the queue is empty, 69 when the gateway is unreachable (the rest stays \
                queued), 1 when the server refused a batch for good (it is kept, set aside).
                """
        )
        @OptionGroup var device: DeviceOptions

        func run() async throws {
            try await Output.orExit {
                let child = try self.device.device(.child)
                guard child.target != nil || FileManager.default.fileExists(atPath: child.kitDatabasePath) else {
                    print("Nothing queued: this device uploads straight to the local sockets.")
                    return
                }
                let kit = try child.kit()
                let pending = try kit.queue.pending().count
                Output.line("\(Output.count(pending, "batch", "batches")) queued.")
                let outcome = try await child.sync(kit) { event in
                    switch event {
                    case .sending(let batch): Output.line("sending \(batch.requestId)")
                    case .applied(let batch, let result):
                        Output.line(result.replayed ? "already applied \(batch.requestId)" : "sent \(batch.requestId) (\(batch.params.saves?.count ?? 0) records)")
                    case .failed(let batch, let error): Output.line("refused \(batch.requestId): \(error.code): \(error.message)")
                    case .willRetry(let batch, let error, _): Output.line("not sent \(batch.requestId): \(error.code)")
                    case .held(let batch, _): Output.line("kept, not sent \(batch.requestId): this device was removed from the family")
                    }
                }
                Output.line("\(outcome.applied) sent, \(outcome.alreadyApplied) already applied, \(outcome.failed.count) refused, \(outcome.waiting) still queued.")
                if !outcome.failed.isEmpty { throw CLIError(.refused, "the server refused \(Output.count(outcome.failed.count, "batch", "batches")); they are kept, set aside") }
                if let error = outcome.notNow { throw error }
                if outcome.waiting > 0 {
                    throw RPCError(.unavailable, "the connection to the gateway could not be made\(DeviceLink.reason(kit.transport)); \(Output.count(outcome.waiting, "batch stays", "batches stay")) queued")
                }
            }
        }
    }
}

/// Usage sessions from CSV: a header line, then `app,start,end[,category]` in any column order.
enum UsageCSV {
    static func parse(_ text: String) throws(CLIError) -> [Device.Session] {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard let header = lines.first else { return [] }
        let columns = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let app = columns.firstIndex(of: "app"), let start = columns.firstIndex(of: "start"), let end = columns.firstIndex(of: "end") else {
            throw CLIError(.invalidInput, "the CSV's first line must name its columns: app,start,end[,category]; it is: \(header)")
        }
        let category = columns.firstIndex(of: "category")
        var sessions: [Device.Session] = []
        for (index, line) in lines.dropFirst().enumerated() {
            let cells = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let where_ = "line \(index + 2)"
            guard cells.count >= columns.count else { throw CLIError(.invalidInput, "\(where_) has \(cells.count) cells, the header \(columns.count)") }
            guard let begin = StoreDates.parse(cells[start]) else { throw CLIError(.invalidInput, "\(where_): start is not an RFC 3339 time: \(cells[start])") }
            guard let finish = StoreDates.parse(cells[end]) else { throw CLIError(.invalidInput, "\(where_): end is not an RFC 3339 time: \(cells[end])") }
            guard finish > begin else { throw CLIError(.invalidInput, "\(where_): the session ends before it starts") }
            guard !cells[app].isEmpty else { throw CLIError(.invalidInput, "\(where_): no app") }
            let named = category.map { cells[$0] }.flatMap { $0.isEmpty ? nil : $0 }
            if let named, !["learning", "reward"].contains(named) { throw CLIError(.invalidInput, "\(where_): category is learning or reward, not \(named)") }
            sessions.append(Device.Session(app: cells[app], start: begin, end: finish, category: named))
        }
        return sessions
    }
}

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch", abstract: "Stream this device's notifications live, acknowledging each (parent or child).",
        discussion: """
            Subscribes first, as the app would: a parent to the children's daily summaries, \
            balances and command results (alerts come too), a child to the commands sent to it. \
            What arrived while nobody watched comes first. Ctrl-C stops.
            """
    )
    @OptionGroup var device: DeviceOptions
    @Option(help: "Stop after this many notifications.") var count: Int?
    @Option(help: "Stop after this many seconds.") var seconds: Double?
    @Flag(help: "Print each notification as JSON.") var json = false

    func run() async throws {
        try await Output.orExit {
            let device = try self.device.device()
            try await device.subscribeForWatching()
            Progress.note("watching \(device.profile.name)'s notifications…")
            let watching = Task {
                var shown = 0
                try await device.watch { notification in
                    if self.json {
                        Output.print(try JSONValue(encoding: notification), pretty: false)
                    } else {
                        Output.line(Device.line(notification))
                    }
                    shown += 1
                    return self.count.map { shown < $0 } ?? true
                }
            }
            if let seconds = self.seconds {
                Task {
                    try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                    watching.cancel()
                }
            }
            do {
                try await watching.value
            } catch is CancellationError {
            } catch let error as RPCError where error.code == .cancelled {
            }
        }
    }
}

struct SummaryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "summary", abstract: "A child's day, per device, as the DailySummary records hold it (parent).")
    @OptionGroup var device: DeviceOptions
    @Option(help: "The child's id.") var child: String
    @Option(help: "The local day, YYYY-MM-DD (default today).") var day: String?

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let day = self.day ?? LocalDay.today()
            let found = try await parent.summaries(child: self.child, day: day)
            if found.isEmpty {
                let children = try await parent.childIds()
                guard children.contains(self.child) else {
                    throw CLIError(.refused, "this family has no child \(self.child)" + (children.isEmpty ? "; invite one with `screentimectl child invite`" : "; its children are \(children.joined(separator: ", "))"))
                }
                return print("\(self.child) has no paired device yet.")
            }
            print("\(self.child) on \(day):")
            print(Table.render(["DEVICE", "LEARNING", "REWARD", "POINTS", "APPS"], found.map { device, summary in
                guard let summary else { return [device.deviceName ?? device.deviceId, "0", "0", "0", "(no usage)"] }
                let apps = summary.appsUsed.map { "\($0.app) \(Table.time($0.seconds))" }.joined(separator: ", ")
                return [device.deviceName ?? device.deviceId, Table.time(summary.totalLearningSeconds ?? 0), Table.time(summary.totalRewardSeconds ?? 0),
                        String(summary.totalPointsEarned ?? 0), apps]
            }, rightAligned: [1, 2, 3]), terminator: "")
        }
    }
}

struct BalanceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "balance", abstract: "The children's earned reward time and points (parent).")
    @OptionGroup var device: DeviceOptions
    @Option(help: "Only this child.") var child: String?

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let balances = try await parent.balances(child: self.child)
            if balances.isEmpty { return print(self.child.map { "\($0) has no balance yet (no usage counted)." } ?? "No balances yet (no usage counted).") }
            // One relation, said the same everywhere: the points are worth so much reward
            // time; what was used of it is taken off; the rest is left.
            print(Table.render(["CHILD", "POINTS", "WORTH", "USED", "TIME LEFT", "SHIELDED"], balances.map { balance in
                let child = String(balance.fields.childRef.recordName.dropFirst("child-".count))
                let left = balance.fields.balanceSeconds, used = balance.fields.rewardSecondsUsed ?? 0
                return [child, String(balance.fields.pointsBalance ?? 0), Table.time(left + used), Table.time(used), Table.time(left),
                        (balance.fields.shielded ?? false) ? "yes" : "no"]
            }, rightAligned: [1, 2, 3, 4]), terminator: "")
            print("Time left = what the points are worth − reward time used.")
        }
    }
}

struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger", abstract: "A child's points ledger (parent); --redeem or --adjust posts an entry.",
        discussion: "Examples:\n  screentimectl ledger --profile mum --child emma\n  screentimectl ledger --profile mum --child emma --adjust 30 --reason 'tidied her room'"
    )
    @OptionGroup var device: DeviceOptions
    @Option(help: "The child's id.") var child: String
    @Option(help: "Post a redemption of this many points.") var redeem: Int?
    @Option(help: "Post an adjustment (a bonus) of this many points.") var adjust: Int?
    @Option(help: "Why (with --redeem or --adjust).") var reason: String?
    @Option(help: "An idempotency key, so a retry never posts twice (default: a new one).") var key: String?
    @Option(help: "Show at most this many entries.") var limit = 20

    func validate() throws {
        if self.redeem != nil && self.adjust != nil { throw ValidationError("give --redeem or --adjust, not both") }
        if let points = self.redeem ?? self.adjust, points < 1 { throw ValidationError("points are a positive number") }
    }

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            if let points = self.redeem ?? self.adjust {
                let type = self.redeem != nil ? "redemption" : "adjustment"
                let entry = try await parent.postLedgerEntry(child: self.child, type: type, points: points, reason: self.reason,
                                                             key: self.key ?? UUID().uuidString.lowercased())
                print("Posted \(type) of \(points) points (\(entry.recordName)).")
            }
            let entries = try await parent.ledger(child: self.child)
            if entries.isEmpty { return print("\(self.child)'s ledger is empty.") }
            print(Table.render(["WHEN", "TYPE", "POINTS", "REASON"], entries.prefix(self.limit).map { entry in
                let type = entry.fields.type
                let amount = entry.fields.amount
                return [StoreDates.format(entry.fields.timestamp), type, PointsLedgerEntry.debitTypes.contains(type) ? "-\(amount)" : "+\(amount)", entry.fields.reason ?? ""]
            }, rightAligned: [2]), terminator: "")
        }
    }
}
