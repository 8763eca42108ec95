import DurableSQLite
import Foundation
import Logging
import ServiceKit
import ServiceLifecycle

/// How the store runs: what its options say.
public struct StoreConfiguration: Sendable {
    public var tombstoneGrace: Duration
    /// How often tombstones and change-log entries past the grace are purged.
    public var purgeInterval: Duration
    /// Whom to wake on commits; nil: push and aggregator at their default sockets.
    public var wake: [WakeTarget]?
    /// Stop migrating at this schema version (upgrade tests only).
    public var schemaVersion: Int?
    /// The time writes are stamped with: the wall clock, or a test's (simulated time).
    public var clock: @Sendable () -> Date

    public init(tombstoneGrace: Duration = .seconds(30 * 86_400), purgeInterval: Duration = .seconds(3600), wake: [WakeTarget]? = nil, schemaVersion: Int? = nil,
                clock: @escaping @Sendable () -> Date = { Date() }) {
        self.tombstoneGrace = tombstoneGrace
        self.purgeInterval = purgeInterval
        self.wake = wake
        self.schemaVersion = schemaVersion
        self.clock = clock
    }
}

extension ServiceSetup {
    /// The record store: opens (and migrates) its database, and returns its methods, the
    /// periodic purge and the waker of following services.
    public static func store(_ configuration: StoreConfiguration, environment: ServiceEnvironment) async throws -> ServiceSetup {
        let store = try RecordStore(
            configuration: .init(stateDirectory: environment.paths.stateDirectory, tombstoneGrace: configuration.tombstoneGrace,
                                 schemaVersion: configuration.schemaVersion, clock: configuration.clock),
            logger: environment.logger, metrics: environment.metrics)
        StoreMetrics.collect(store, into: environment.metrics)
        environment.logger.info("database open", metadata: [
            "path": "\(store.databasePath)", "schema_version": "\(store.schemaVersion)", "head": "\(store.head)",
            "sqlite_memory_statistics": "\(SQLiteMemoryStatistics.areOff ? "off" : "on")",
        ])
        let targets = configuration.wake ?? ["push", "aggregator"].map { WakeTarget(name: $0, socketPath: environment.paths.socketPath(for: $0)) }
        // With nobody to wake (`--wake none`) there is no waker: a service that returns at
        // once would end the whole group.
        let purge = Periodic(every: configuration.purgeInterval, PeriodicPurge(store: store, logger: environment.logger).run)
        return ServiceSetup(
            methods: StoreHandlers.table(store),
            background: targets.isEmpty ? [purge] : [purge, Waker(store: store, targets: targets, logger: environment.logger)])
    }
}
