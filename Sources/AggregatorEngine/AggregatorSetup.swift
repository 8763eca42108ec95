import AggregatorAPI
import ChangeFeed
import DurableSQLite
import Foundation
import Logging
import RPCClient
import RPCCore
import RPCServer
import ServiceKit
import ServiceLifecycle
import StoreAPI

/// How the aggregator runs: what its options say.
public struct AggregatorConfiguration: Sendable {
    /// The record store's socket.
    public var storeSocket: String
    /// The push service's socket, for alerts to parents.
    public var pushSocket: String
    /// Between checks for devices that went quiet.
    public var alertCheckInterval: Duration
    /// Points per minute of a learning app that no rule rates.
    public var defaultPointsPerMinute: Int
    /// Days of detail kept before weeks are rolled up.
    public var retentionDays: Int
    public var retentionInterval: Duration
    /// The time parents' and children's actions are made at, and requests expire and
    /// pauses end by (tests move it).
    public var clock: @Sendable () -> Date
    /// The longest the aggregator goes without looking at the clock for a request's expiry
    /// or a pause's end (it also wakes at each of them).
    public var deadlineCheckInterval: Duration

    public init(storeSocket: String, pushSocket: String, alertCheckInterval: Duration = .seconds(60), defaultPointsPerMinute: Int = 1,
                retentionDays: Int = 90, retentionInterval: Duration = .seconds(3600), clock: @escaping @Sendable () -> Date = { Date() },
                deadlineCheckInterval: Duration = .seconds(60)) {
        self.clock = clock
        self.deadlineCheckInterval = deadlineCheckInterval
        self.storeSocket = storeSocket
        self.pushSocket = pushSocket
        self.alertCheckInterval = alertCheckInterval
        self.defaultPointsPerMinute = defaultPointsPerMinute
        self.retentionDays = retentionDays
        self.retentionInterval = retentionInterval
    }
}

extension ServiceSetup {
    /// The aggregator: opens its database, and returns its methods and what runs beside them
    /// (the store follower, the write-back to the store, the quiet-device check, retention).
    public static func aggregator(_ configuration: AggregatorConfiguration, environment: ServiceEnvironment) async throws -> ServiceSetup {
        let logger = environment.logger
        let store = RPCClient(configuration: ClientConfiguration(socketPath: configuration.storeSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        let push = RPCClient(configuration: ClientConfiguration(socketPath: configuration.pushSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        let ingest = Ingest(defaultPointsPerMinute: configuration.defaultPointsPerMinute, clock: configuration.clock)
        let summaries = Wakeup()
        // Who a device is, kept from the store's change feed: not a store.whoami per call.
        let credentials = CredentialTable(store: store, logger: logger)

        try FileManager.default.createDirectory(atPath: environment.paths.stateDirectory, withIntermediateDirectories: true)
        let database = try AggregatorDatabase(path: environment.paths.stateDirectory + "/" + AggregatorDatabase.fileName, logger: logger)
        let position = try await database.position()
        logger.info("database open", metadata: [
            "path": "\(database.path)", "position": "\(position)", "store_socket": "\(configuration.storeSocket)",
        ])

        var methods = MethodTable(implementing: AggregatorMethods.list)
        methods.on(AggregatorMethods.status) { _, context in
            // A local caller sees the whole server; a parent its own family, without the
            // change-log position (every family's writes move it); a child nothing.
            var family: String?
            if let auth = context.auth { family = try await CallerIdentity.parentFamily(auth, credentials: credentials, for: "aggregator.status") }
            // The position first, then the counts: counts read after it include at least
            // what it says is applied, so `caughtUp` never comes with stale counts.
            var position: Int64?
            var progress: (storeHead: Int64, caughtUp: Bool)?
            if family == nil {
                let applied = try await database.position()
                position = applied
                progress = await UsageFollower.progress(store: store, after: applied)
            }
            let counts = try await database.counts(family: family)
            return AggregatorStatus(position: position, storeHead: progress?.storeHead, caughtUp: progress?.caughtUp,
                                    sessions: counts.sessions, days: counts.days,
                                    pendingSummaries: counts.pendingSummaries, pendingChildWrites: counts.pendingChildWrites,
                                    pendingRetentionWrites: counts.pendingRetentionWrites, pendingConfigurations: counts.pendingConfigurations)
        }
        let reports = Reports(database: database, store: store, credentials: credentials)
        methods.on(AggregatorMethods.report) { params, context in try await reports.report(params, auth: context.auth) }
        methods.on(AggregatorMethods.exportCSV) { params, context in try await reports.exportCSV(params, auth: context.auth) }
        let recompute = Recompute(store: store, database: database, ingest: ingest, writeback: summaries)
        methods.on(AggregatorMethods.recompute) { params, context in try await recompute.run(params, auth: context.auth) }
        let stateDirectory = environment.paths.stateDirectory
        methods.on(AggregatorMethods.backup) { params, context in
            let copy = try await OnlineBackup.take(params.path, remote: context.auth != nil, service: "aggregator", stateDirectory: stateDirectory,
                                                   pool: database.pool) { try StoreLogPosition.load($0) }
            logger.notice("backup written", metadata: ["path": "\(copy.path)", "bytes": "\(copy.bytes)", "last_seq": "\(copy.lastSeq)"])
            return BackupResult(path: copy.path, bytes: copy.bytes, lastSeq: copy.lastSeq, milliseconds: copy.milliseconds)
        }
        methods.on(AggregatorMethods.backupReport) { report, context in
            guard context.auth == nil else { throw RPCError(.forbidden, "aggregator.backupReport is for the server's own backup service, on the server") }
            let state = try await database.pool.write { db in try ServerBackups.report(report, now: configuration.clock(), db) }
            if report.succeeded {
                logger.info("scheduled backup", metadata: ["archive": "\(report.archive ?? "")", "bytes": "\(report.bytes ?? 0)", "parents_alerted": "\(state.parentsAlerted ?? false)"])
            } else {
                logger.error("scheduled backup failed", metadata: ["problem": "\(report.problem ?? "")", "parents_alerted": "\(state.parentsAlerted ?? false)"])
            }
            if state.parentsAlerted == true { summaries.signal() }
            return state
        }
        methods.on(AggregatorMethods.backupState) { _, context in
            if let auth = context.auth { _ = try await CallerIdentity.parentFamily(auth, credentials: credentials, for: "aggregator.backupState") }
            return try await database.pool.read { db in try ServerBackups.state(db) }
        }
        let rollUps = RollUps(database: database, retentionDays: configuration.retentionDays, writeback: summaries, logger: logger)
        methods.on(AggregatorMethods.rollUp) { params, context in try await rollUps.run(params, auth: context.auth) }
        methods.on(AggregatorMethods.resync) { params, context in
            // A child device for itself; a parent for one of its family's child devices.
            let target: (family: String, deviceId: String)
            if let auth = context.auth, let role = try await credentials.whoami(auth).role, role.isParent {
                guard let deviceId = params.deviceId, !deviceId.isEmpty else {
                    throw RPCError(.invalidParams, "params.deviceId: the child device to send its configuration again (a parent names one)")
                }
                target = (try await CallerIdentity.parentFamily(auth, credentials: credentials, for: "aggregator.resync"), deviceId)
            } else {
                target = try await CallerIdentity.childDevice(context.auth, credentials: credentials, for: "aggregator.resync")
                guard params.deviceId == nil || params.deviceId == target.deviceId else {
                    throw RPCError(.forbidden, "aggregator.resync: a child's device asks for itself only; leave params.deviceId out")
                }
            }
            guard let version = try await database.resync(family: target.family, deviceId: target.deviceId) else {
                throw RPCError(.notFound, params.deviceId == nil
                    ? "this device is not confirmed in its family yet (or the server has not seen it yet); try again once a parent has confirmed it"
                    : "no active child device \(target.deviceId) in this family (pairing.listDevices lists them)")
            }
            summaries.signal()
            return ResyncResult(version: version)
        }
        methods.on(AggregatorMethods.devices) { _, context in
            guard let auth = context.auth else { throw RPCError(.forbidden, "aggregator.devices: for a parent's device; send its credential as auth.token") }
            let family = try await CallerIdentity.parentFamily(auth, credentials: credentials, for: "aggregator.devices")
            return DeviceConfigurations(devices: try await database.configurationStates(family: family))
        }

        let deadlines = Wakeup()
        let parenting = Parenting(database: database, store: store, credentials: credentials, clock: configuration.clock, writeback: summaries,
                                  deadlines: deadlines, logger: logger)
        methods.on(AggregatorMethods.askForTime) { params, context in try await parenting.askForTime(params, auth: context.auth) }
        methods.on(AggregatorMethods.answerRequest) { params, context in try await parenting.answerRequest(params, auth: context.auth) }
        methods.on(AggregatorMethods.listRequests) { params, context in try await parenting.listRequests(params, auth: context.auth) }
        methods.on(AggregatorMethods.grant) { params, context in try await parenting.grant(params, auth: context.auth) }
        methods.on(AggregatorMethods.pause) { params, context in try await parenting.pause(params, auth: context.auth) }
        methods.on(AggregatorMethods.resume) { params, context in try await parenting.resume(params, auth: context.auth) }
        methods.on(AggregatorMethods.setSchedule) { params, context in try await parenting.setSchedule(params, auth: context.auth) }
        methods.on(AggregatorMethods.listSchedules) { params, context in try await parenting.listSchedules(params, auth: context.auth) }
        methods.on(AggregatorMethods.setChore) { params, context in try await parenting.setChore(params, auth: context.auth) }
        methods.on(AggregatorMethods.listChores) { params, context in try await parenting.listChores(params, auth: context.auth) }
        methods.on(AggregatorMethods.choreDone) { params, context in try await parenting.choreDone(params, auth: context.auth) }
        methods.on(AggregatorMethods.answerChore) { params, context in try await parenting.answerChore(params, auth: context.auth) }
        methods.on(AggregatorMethods.digest) { params, context in try await parenting.digest(params, auth: context.auth) }

        let metrics = AggregatorMetrics(environment.metrics)
        var follower = UsageFollower(store: store, database: database, ingest: ingest, summaries: summaries, logger: logger)
        follower.metrics = metrics
        var alerts = AlertWriter(push: push, store: store, database: database, logger: logger)
        alerts.metrics = metrics
        let background: [any Service] = [
            credentials,
            follower,
            Writeback(
                summaries: SummaryWriter(store: store, database: database, logger: logger),
                earnedTime: EarnedTimeWriter(store: store, database: database, logger: logger),
                configuration: ConfigurationWriter(store: store, database: database, logger: logger),
                retention: RetentionWriter(store: store, database: database, logger: logger),
                alerts: alerts,
                parenting: ParentingWriter(store: store, push: push, database: database, logger: logger),
                wakeup: summaries, logger: logger),
            ParentingDeadlines(database: database, clock: configuration.clock, checkInterval: configuration.deadlineCheckInterval,
                               changed: deadlines, writeback: summaries, logger: logger),
            Periodic(every: configuration.alertCheckInterval, QuietDevices(database: database, writeback: summaries, logger: logger).check),
            Periodic(every: configuration.retentionInterval, rollUps.check),
        ]
        return ServiceSetup(methods: methods, background: background)
    }
}
