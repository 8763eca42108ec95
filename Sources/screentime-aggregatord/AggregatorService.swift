import AggregatorEngine
import ArgumentParser
import ServerVersion
import ServiceKit

@main
struct AggregatorService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-aggregatord",
        abstract: "The ScreenTime Rewards usage aggregator: usage sessions into daily summaries, points and earned time.",
        discussion: """
            Serves the aggregator.* methods on <runtime-dir>/aggregator.sock (or the socket systemd passes). \
            Follows the record store's change log (<runtime-dir>/store.sock) from where it stopped and writes \
            DailySummary records back to it; its own data is <state-dir>/aggregator.sqlite. See docs/protocol.md.
            """,
        version: ServerVersion.current
    )

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("store-socket"), help: ArgumentHelp("The record store's socket.", discussion: "Default: <runtime-dir>/store.sock.", valueName: "path"))
    var storeSocket: String?

    @Option(name: .customLong("push-socket"), help: ArgumentHelp("The push service's socket, for alerts to parents.", discussion: "Default: <runtime-dir>/push.sock.", valueName: "path"))
    var pushSocket: String?

    @Option(name: .customLong("alert-check-interval"), help: ArgumentHelp("Seconds between checks for devices that went quiet (Family.alertNoDataHours).", valueName: "seconds"))
    var alertCheckSeconds: Double = 60

    @Option(name: .customLong("default-points-per-minute"), help: ArgumentHelp("Points per minute of a learning app that no AppRule or AppConfiguration rates.", valueName: "points"))
    var defaultPointsPerMinute: Int = 1

    @Option(name: .customLong("retention-days"), help: ArgumentHelp("Days of detail kept: older weeks are rolled into WeeklySummary records and their usage records and ledger entries pruned from the store.", valueName: "days"))
    var retentionDays: Int = 90

    @Option(name: .customLong("retention-interval"), help: ArgumentHelp("Seconds between retention roll-ups.", valueName: "seconds"))
    var retentionSeconds: Double = 3600

    mutating func validate() throws {
        guard (7...3660).contains(self.retentionDays) else { throw ValidationError("--retention-days must be between 7 and 3660") }
        guard (1...604_800).contains(self.retentionSeconds) else { throw ValidationError("--retention-interval must be between 1 and 604800 seconds") }
        guard (0...1000).contains(self.defaultPointsPerMinute) else { throw ValidationError("--default-points-per-minute must be between 0 and 1000") }
        guard (0.05...86_400).contains(self.alertCheckSeconds) else { throw ValidationError("--alert-check-interval must be between 0.05 and 86400 seconds") }
    }

    func run() async throws {
        let runtimeDirectory = ServicePaths(options: self.options).runtimeDirectory
        let configuration = AggregatorConfiguration(
            storeSocket: self.storeSocket ?? runtimeDirectory + "/store.sock",
            pushSocket: self.pushSocket ?? runtimeDirectory + "/push.sock",
            alertCheckInterval: .milliseconds(Int64(self.alertCheckSeconds * 1000)),
            defaultPointsPerMinute: self.defaultPointsPerMinute,
            retentionDays: self.retentionDays,
            retentionInterval: .milliseconds(Int64(self.retentionSeconds * 1000)))
        try await ServiceMain.run(service: "aggregator", identifier: "screentime-aggregatord", version: ServerVersion.current, options: self.options) { environment in
            try await .aggregator(configuration, environment: environment)
        }
    }
}
