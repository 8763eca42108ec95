import AggregatorEngine
import ArgumentParser
import OptionChecks
import ServerVersion
import ServiceKit

public struct AggregatorService: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "screentime-aggregatord",
        abstract: "The ScreenTime Rewards usage aggregator: usage sessions into daily summaries, points and earned time.",
        discussion: """
            Serves the aggregator.* methods on <runtime-dir>/aggregator.sock (or the socket systemd passes). \
            Follows the record store's change log (<runtime-dir>/store.sock) from where it stopped and writes \
            DailySummary records back to it; its own data is <state-dir>/aggregator.sqlite. The methods: /usr/share/doc/screentime-server/protocol.md (docs/ in the source).
            """,
        version: ServerVersion.current
    )

    public init() {}

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

    public mutating func validate() throws {
        try checkOption("--retention-days", self.retentionDays, in: 7...3660)
        try checkOption("--retention-interval", self.retentionSeconds, in: 1...604_800, "seconds")
        try checkOption("--default-points-per-minute", self.defaultPointsPerMinute, in: 0...1000)
        try checkOption("--alert-check-interval", self.alertCheckSeconds, in: 0.05...86_400, "seconds")
    }

    public func run() async throws {
        let runtimeDirectory = ServicePaths(options: self.options).runtimeDirectory
        let configuration = AggregatorConfiguration(
            storeSocket: self.storeSocket ?? runtimeDirectory + "/store.sock",
            pushSocket: self.pushSocket ?? runtimeDirectory + "/push.sock",
            alertCheckInterval: .seconds(self.alertCheckSeconds),
            defaultPointsPerMinute: self.defaultPointsPerMinute,
            retentionDays: self.retentionDays,
            retentionInterval: .seconds(self.retentionSeconds))
        try await ServiceMain.run(service: "aggregator", identifier: "screentime-aggregatord", version: ServerVersion.current, options: self.options) { environment in
            try await .aggregator(configuration, environment: environment)
        }
    }
}
