import AggregatorAPI
import ArgumentParser
import Foundation

// Chores from a device: parents add and answer them, the child marks them done. The server
// (the aggregator) keeps the family's days and enters the points once.

struct ChoresCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chores", abstract: "Chores: list them (parent or child), add or remove one, approve or send back one done (parent), mark one done (child).",
        discussion: """
            A chore is named by the id the list shows (chore-…), a chore done by its own (done-…). The first parent to answer wins.
            Examples:
              screentimectl chores --profile mum
              screentimectl chores add --profile mum --child emma --title 'Tidy your room' --points 10 --on mon,thu
              screentimectl chores done chore-3f2a9c1d --profile emma-tablet --note 'even under the bed'
              screentimectl chores approve done-8e1b0c2a --profile dad
              screentimectl chores send-back done-8e1b0c2a --profile mum --reason 'the bed is not made'
            """,
        subcommands: [List.self, Add.self, Remove.self, Done.self, Approve.self, SendBack.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The chores, where today's stands, and those waiting for a parent.")
        @OptionGroup var device: DeviceOptions
        @Option(help: "Only this child's (parent).") var child: String?

        func run() async throws {
            try await Output.orExit {
                let device = try self.device.device()
                let list = try await device.aggregator.call(AggregatorMethods.listChores, ListChoresParams(child: self.child))
                if list.chores.isEmpty { print("No chores yet.") } else {
                    print(Table.render(["CHORE", "CHILD", "POINTS", "WHEN", "TODAY", "ID"], list.chores.map { chore in
                        [chore.title, chore.childName, "\(chore.points)", chore.when, ChoresCommand.today(chore), chore.id]
                    }), terminator: "")
                }
                let waiting = list.completions.filter { $0.status == .waiting }
                if !waiting.isEmpty {
                    print("\nWaiting for a parent:")
                    print(Table.render(["DONE", "WHAT", "ID"], waiting.map { [$0.doneAt.formatted(date: .abbreviated, time: .shortened), $0.sentence, $0.id] }), terminator: "")
                }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a chore for a child (parent): every day, on some days, or once.")
        @OptionGroup var device: DeviceOptions
        @Option(help: "The child's id.") var child: String
        @Option(help: "What to do (at most 80 characters).") var title: String
        @Option(help: "Points it earns (1 to 10000).") var points: Int64
        @Option(help: "Only on these days: mon,thu or a range like mon-fri.") var on: String?
        @Flag(help: "Once only (a one-off).") var once = false

        func validate() throws {
            if self.once && self.on != nil { throw ValidationError("give --on DAYS or --once, not both") }
            if let on = self.on { _ = try DowntimeCommand.days(on, in: on) }
        }

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let days = try self.on.map { try DowntimeCommand.days($0, in: $0) }
                let chore = try await parent.aggregator.call(AggregatorMethods.setChore, SetChoreParams(
                    child: self.child, title: self.title, points: self.points, repeat: self.once ? .once : days == nil ? .daily : .weekly, days: days))
                print("Added “\(chore.title)” for \(chore.childName): \(chore.points) points, \(chore.when.lowercased()). \(chore.childName)'s device has been told. Its id: \(chore.id)")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a chore (parent); what was done stays in the history.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The chore's id (chore-…).") var chore: String

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let chore = try await parent.aggregator.call(AggregatorMethods.setChore, SetChoreParams(id: self.chore, remove: true))
                print("Removed “\(chore.title)” from \(chore.childName)'s chores.")
            }
        }
    }

    struct Done: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mark a chore done (child device); the parents are told at once.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The chore's id (chore-…).") var chore: String
        @Option(help: "A note for the parents (at most 200 characters).") var note: String?

        func run() async throws {
            try await Output.orExit {
                let child = try self.device.device(.child)
                let done = try await child.aggregator.call(AggregatorMethods.choreDone, ChoreDoneParams(chore: self.chore, note: self.note))
                print("Marked “\(done.title)” done. The parents have been told; its \(done.points) points come when one approves.")
            }
        }
    }

    struct Approve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Approve a chore done (parent): its points are added.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The id of the chore done (done-…).") var completion: String

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let done = try await parent.aggregator.call(AggregatorMethods.answerChore, AnswerChoreParams(completion: self.completion, approve: true))
                print("Approved \(done.childName)'s “\(done.title)”: \(done.points) points added. \(done.childName)'s device has been told.")
            }
        }
    }

    struct SendBack: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "send-back", abstract: "Send a chore done back (parent), with a reason: it is not done yet.")
        @OptionGroup var device: DeviceOptions
        @Argument(help: "The id of the chore done (done-…).") var completion: String
        @Option(help: "Why, for the child.") var reason: String

        func run() async throws {
            try await Output.orExit {
                let parent = try self.device.device(.parent)
                let done = try await parent.aggregator.call(AggregatorMethods.answerChore, AnswerChoreParams(completion: self.completion, approve: false, reason: self.reason))
                print("Sent back \(done.childName)'s “\(done.title)”. \(done.childName) can mark it done again.")
            }
        }
    }

    /// "to do", "waiting for a parent", "approved", "sent back", "not today".
    static func today(_ chore: ChoreInfo) -> String {
        switch chore.todayStatus {
        case .waiting?: "waiting for a parent"
        case .approved?: chore.repeat == .once ? "done" : "approved"
        case .rejected?: "sent back"
        case nil: chore.dueToday ? "to do" : "not today"
        }
    }
}
