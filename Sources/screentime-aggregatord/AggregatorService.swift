import AggregatorAPI
import ArgumentParser
import Foundation
import Logging
import RPCClient
import RPCServer
import ServiceKit
import ServiceLifecycle
import Synchronization

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
        version: aggregatorVersion
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
        let store = RPCClient(configuration: ClientConfiguration(
            socketPath: self.storeSocket ?? ServicePaths(options: self.options).runtimeDirectory + "/store.sock",
            callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        let push = RPCClient(configuration: ClientConfiguration(
            socketPath: self.pushSocket ?? ServicePaths(options: self.options).runtimeDirectory + "/push.sock",
            callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        let alertCheck = Duration.milliseconds(Int64(self.alertCheckSeconds * 1000))
        let retentionInterval = Duration.milliseconds(Int64(self.retentionSeconds * 1000))
        let retentionDays = self.retentionDays
        let ingest = Ingest(defaultPointsPerMinute: self.defaultPointsPerMinute)
        let summaries = Wakeup()
        let opened = Mutex<AggregatorDatabase?>(nil)
        try await ServiceMain.run(
            service: "aggregator", identifier: "screentime-aggregatord", version: aggregatorVersion, options: self.options,
            background: { environment in
                guard let database = opened.withLock({ $0 }) else { return [] }
                return [
                    Follower(store: store, database: database, ingest: ingest, summaries: summaries, logger: environment.logger),
                    Writeback(
                        summaries: SummaryWriter(store: store, database: database, logger: environment.logger),
                        earnedTime: EarnedTimeWriter(store: store, database: database, logger: environment.logger),
                        retention: RetentionWriter(store: store, database: database, logger: environment.logger),
                        alerts: AlertWriter(push: push, database: database, logger: environment.logger),
                        wakeup: summaries, logger: environment.logger),
                    Periodic(every: alertCheck, QuietDevices(database: database, writeback: summaries, logger: environment.logger).check),
                    Periodic(every: retentionInterval, RollUps(database: database, retentionDays: retentionDays, writeback: summaries, logger: environment.logger).check),
                ]
            },
            methods: { environment in
                try FileManager.default.createDirectory(atPath: environment.paths.stateDirectory, withIntermediateDirectories: true)
                let database = try AggregatorDatabase(path: environment.paths.stateDirectory + "/" + AggregatorDatabase.fileName, logger: environment.logger)
                opened.withLock { $0 = database }
                let position = try database.position()
                environment.logger.info("database open", metadata: [
                    "path": "\(database.path)", "position": "\(position)", "store_socket": "\(store.configuration.socketPath)",
                ])
                var methods = MethodTable(implementing: AggregatorMethods.list)
                methods.on(AggregatorMethods.status) { _, _ in
                    let counts = try database.counts()
                    return AggregatorStatus(position: try database.position(), sessions: counts.sessions, days: counts.days,
                                            pendingSummaries: counts.pendingSummaries, pendingChildWrites: counts.pendingChildWrites,
                                            pendingRetentionWrites: counts.pendingRetentionWrites)
                }
                let reports = Reports(database: database, store: store)
                methods.on(AggregatorMethods.report) { params, context in try await reports.report(params, auth: context.auth) }
                methods.on(AggregatorMethods.exportCSV) { params, context in try await reports.exportCSV(params, auth: context.auth) }
                let recompute = Recompute(store: store, database: database, ingest: ingest, writeback: summaries)
                methods.on(AggregatorMethods.recompute) { params, context in try await recompute.run(params, auth: context.auth) }
                let rollUps = RollUps(database: database, retentionDays: retentionDays, writeback: summaries, logger: environment.logger)
                methods.on(AggregatorMethods.rollUp) { params, context in try await rollUps.run(params, auth: context.auth) }
                return methods
            }
        )
    }
}

let aggregatorVersion = "0.7.0"
