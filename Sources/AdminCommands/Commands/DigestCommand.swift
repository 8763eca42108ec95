import AggregatorAPI
import ArgumentParser
import Foundation

/// `screentimectl digest`: the week's digest, as each parent's weekly notification says it.
struct DigestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest", abstract: "The week's digest (parent): each child's week beside the week before, as the weekly notification says it.",
        discussion: """
            The week is the seven days of the family's ending with its digest day (Settings: digestDay, digestTime), so far.
            Examples:
              screentimectl digest --profile mum
              screentimectl digest --profile mum --through 2026-11-22
            """)
    @OptionGroup var device: DeviceOptions
    @Option(help: "The week's last day (YYYY-MM-DD); default the week of the family's next digest.") var through: String?

    func run() async throws {
        try await Output.orExit {
            let parent = try self.device.device(.parent)
            let digest = try await parent.aggregator.call(AggregatorMethods.digest, DigestParams(through: self.through))
            print("\(digest.title) (\(digest.from) to \(digest.to), \(digest.timeZone))")
            if digest.children.isEmpty { return print("No children yet.") }
            for week in digest.children { print(week.sentence) }
        }
    }
}
