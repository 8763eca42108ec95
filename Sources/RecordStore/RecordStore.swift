import DurableSQLite
import Foundation
import GRDB
import Logging
import ServiceMetrics
import RPCCore
import StoreAPI
import Synchronization

/// The record store: every `store.*` method as an async function of its parameters and the
/// caller's `auth`. Reads run concurrently on WAL snapshots; writes go through group commit.
public final class RecordStore: Sendable {
    public struct Configuration: Sendable {
        /// Where `store.sqlite` and `backups/` live.
        public var stateDirectory: String
        /// How long tombstones, deleted zones and change-log entries are kept.
        public var tombstoneGrace: Duration
        /// Stop migrating at this schema version (upgrade tests only).
        public var schemaVersion: Int?
        /// The time writes are stamped with (records' times, the change log's): the wall
        /// clock, or a test's own (a simulated family life of weeks in seconds).
        public var clock: @Sendable () -> Date

        public init(stateDirectory: String, tombstoneGrace: Duration = .seconds(30 * 86_400), schemaVersion: Int? = nil,
                    clock: @escaping @Sendable () -> Date = { Date() }) {
            self.stateDirectory = stateDirectory
            self.tombstoneGrace = tombstoneGrace
            self.schemaVersion = schemaVersion
            self.clock = clock
        }
    }

    public let configuration: Configuration
    let database: StoreDatabase
    let notifier: ChangeNotifier
    let writer: GroupCommit
    /// The event loops' own read connections, for short reads (``shortRead(_:_:)``).
    let loopReaders: LoopReaders
    let logger: Logger
    let startedAt = Date()
    /// When each device last made a request, in memory: noting it must not cost a write.
    private let lastSeen = Mutex<[DeviceKey: Date]>([:])
    /// Named `store.watch` streams following right now, by watcher name.
    private let followers = Mutex<[String: Int]>([:])

    private struct DeviceKey: Hashable {
        var family: String
        var deviceId: String
    }

    /// Its instruments (disabled unless the service gives it its own).
    let metrics: StoreMetrics

    public init(configuration: Configuration, logger: Logger, metrics: ServiceMetrics? = nil) throws {
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        let path = (configuration.stateDirectory as NSString).appendingPathComponent(StoreDatabase.fileName)
        self.configuration = configuration
        self.database = try StoreDatabase(path: path, schemaVersion: configuration.schemaVersion, logger: logger)
        self.notifier = ChangeNotifier(head: try self.database.pool.read { try StoreDatabase.head($0) })
        self.metrics = metrics.map(StoreMetrics.init) ?? .none
        self.writer = GroupCommit(pool: self.database.pool, notifier: self.notifier, metrics: self.metrics, logger: logger)
        self.loopReaders = LoopReaders(path: path, label: "store.loop-reader")
        self.logger = logger
    }

    public var databasePath: String { self.database.path }
    public var schemaVersion: Int { self.database.schema.version }
    /// The newest committed change.
    public var head: Int64 { self.notifier.head }

    private var pool: DatabasePool { self.database.pool }
    private var schema: SchemaRegistry { self.database.schema }

    // MARK: Plumbing

    /// On ``DatabaseThreads``, never on the event loop the request runs on: a read may wait
    /// for a free reader, and a loop that waits stalls every connection it serves. (A
    /// synchronous read there and back costs two thread wake-ups; GRDB's asynchronous
    /// read four.)
    private func read<T: Sendable>(_ auth: Auth?, _ body: @escaping @Sendable (Principal, Database) throws -> T) async throws -> T {
        do {
            return try await DatabaseThreads.run { try self.pool.read { db in try body(try self.resolve(auth, db), db) } }
        } catch {
            throw self.surface(error)
        }
    }

    /// A read of a few rows by key (one record by name): on the event loop's own connection
    /// when the request runs on one (``LoopReaders``: no wait, no thread hop), else as
    /// ``read(_:_:)``. Anything that may scan belongs in ``read(_:_:)``: it would hold
    /// every connection of the loop while it runs.
    private func shortRead<T: Sendable>(_ auth: Auth?, _ body: @escaping @Sendable (Principal, Database) throws -> T) async throws -> T {
        if let value = try self.readOnLoop(auth, body) { return value }
        return try await self.read(auth, body)
    }

    /// The same read on the current event loop's connection, or nil when not on one.
    private func readOnLoop<T>(_ auth: Auth?, _ body: (Principal, Database) throws -> T) throws -> T? {
        do {
            return try self.loopReaders.read { db in try body(try self.resolve(auth, db), db) }
        } catch {
            throw self.surface(error)
        }
    }

    private func write<T: Sendable>(_ auth: Auth?, _ body: @escaping @Sendable (Principal, Int64, Database) throws -> T) async throws -> T {
        do {
            let clock = self.configuration.clock
            return try await self.writer.write { db in try body(try self.resolve(auth, db), Millis.of(clock()), db) }
        } catch {
            throw self.surface(error)
        }
    }

    private func resolve(_ auth: Auth?, _ db: Database) throws -> Principal {
        let principal = try Credentials.resolve(auth, in: db)
        if let device = principal.device {
            self.lastSeen.withLock { $0[DeviceKey(family: device.family, deviceId: device.deviceId)] = Date() }
        }
        return principal
    }

    /// Errors as the caller sees them: ours as they are, storage failures logged and summarised.
    private func surface(_ error: any Error) -> any Error {
        if error is RPCError || error is CancellationError { return error }
        if let item = error as? ItemError { return RPCError(item.code, item.message, data: item.field.map { ["field": .string($0)] }) }
        self.logger.error("storage failure", metadata: ["error": "\(error)"])
        return StoreErrors.storage(error)
    }

    /// The zone, for a change only a parent (or a local service) may make.
    private func zoneForParent(_ principal: Principal, family: String, zone: String, _ what: String, _ db: Database) throws -> ZoneRow {
        try AccessControl.requireParent(principal, family, what)
        let row = try ZoneRow.find(db, family: family, name: zone)
        try AccessControl.requireWrite(principal, row, in: db)
        return row
    }

    // MARK: Families and zones

    public func createFamily(_ params: CreateFamilyParams, auth: Auth?) async throws -> FamilyInfo {
        try Validation.family(params.family)
        return try await self.write(auth) { principal, now, db in
            try AccessControl.requireLocal(principal, StoreMethods.createFamily.name)
            return try ZoneOperations.createFamily(params.family, now: now, db)
        }
    }

    public func listFamilies(auth: Auth?) async throws -> ListFamiliesResult {
        try await self.read(auth) { principal, db in
            try AccessControl.requireLocal(principal, StoreMethods.listFamilies.name)
            return ListFamiliesResult(families: try ZoneOperations.listFamilies(db))
        }
    }

    public func createZone(_ params: ZoneParams, auth: Auth?) async throws -> ZoneInfo {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        return try await self.write(auth) { principal, now, db in
            try AccessControl.requireParent(principal, params.family, "create zones")
            if principal != .local, Names.isInternalZone(params.zone) {
                throw RPCError.invalidParams("params.zone", "names starting with _ are reserved for the services")
            }
            let zone = try ZoneOperations.createZone(family: params.family, name: params.zone, now: now, db)
            return ZoneInfo(name: zone.name, createdAt: Millis.date(zone.createdAt), participants: 0)
        }
    }

    public func deleteZone(_ params: ZoneParams, auth: Auth?) async throws -> DeleteZoneResult {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        guard params.zone != Names.defaultZone else {
            throw RPCError.invalidParams("params.zone", "the default zone cannot be deleted")
        }
        return try await self.write(auth) { principal, now, db in
            let zone = try self.zoneForParent(principal, family: params.family, zone: params.zone, "delete zones", db)
            return DeleteZoneResult(recordsDeleted: try ZoneOperations.deleteZone(zone, schema: self.schema, principal: principal, now: now, db))
        }
    }

    public func listZones(_ params: FamilyParams, auth: Auth?) async throws -> ListZonesResult {
        try Validation.family(params.family)
        return try await self.read(auth) { principal, db in
            ListZonesResult(zones: try ZoneOperations.listZones(family: params.family, principal: principal, db))
        }
    }

    // MARK: Records

    public func modify(_ params: ModifyParams, auth: Auth?) async throws -> ModifyResult {
        try ModifyOperation.validate(params)
        let schema = self.schema
        let prepared = try ModifyOperation.prepare(params, schema: schema)
        return try await self.write(auth) { principal, now, db in
            try ModifyOperation(schema: schema, principal: principal, params: params, prepared: prepared, now: now).run(db)
        }
    }

    /// A fetch answered on the calling event loop, on its own read connection (a few
    /// records by name); nil when it must run as ``fetch(_:auth:)`` (more records, or not on
    /// an event loop).
    /// The result writes the records' fields as stored (``FetchReply``).
    func fetchOnLoop(_ params: FetchParams, auth: Auth?) throws -> FetchReply? {
        try FetchOperation.validate(params)
        guard params.recordNames.count <= FetchOperation.shortReadLimit else { return nil }
        return try self.readOnLoop(auth) { principal, db in try FetchOperation.reply(params, principal: principal, db) }
    }

    public func fetch(_ params: FetchParams, auth: Auth?) async throws -> FetchResult {
        try FetchOperation.validate(params)
        if params.recordNames.count <= FetchOperation.shortReadLimit {
            return try await self.shortRead(auth) { principal, db in try FetchOperation.run(params, principal: principal, db) }
        }
        return try await self.read(auth) { principal, db in try FetchOperation.run(params, principal: principal, db) }
    }

    public func query(_ params: QueryParams, auth: Auth?) async throws -> QueryResult {
        let schema = self.schema
        return try await self.read(auth) { principal, db in try QueryOperation.run(params, schema: schema, principal: principal, db) }
    }

    // MARK: Change feeds

    public func zoneChanges(_ params: ZoneChangesParams, auth: Auth?) async throws -> ZoneChangesResult {
        try await self.read(auth) { principal, db in try ZoneChangesOperation.run(params, principal: principal, db) }
    }

    public func databaseChanges(_ params: DatabaseChangesParams, auth: Auth?) async throws -> DatabaseChangesResult {
        try await self.read(auth) { principal, db in try DatabaseChangesOperation.run(params, principal: principal, db) }
    }

    /// Streams changes after `params.after` through `send`, then (with `follow`) waits for
    /// new commits until cancelled. Returns the position reached.
    public func watch(_ params: WatchParams, auth: Auth?, send: @Sendable (ChangeEvent) async throws -> Void) async throws -> WatchEnd {
        var cursor = params.after ?? 0
        guard cursor >= 0 else { throw RPCError.invalidParams("params.after", "must not be negative") }
        if let types = params.recordTypes {
            for (index, type) in types.enumerated() where self.schema[type] == nil {
                throw self.schema.unknownType(type, parameter: "params.recordTypes[\(index)]")
            }
        }
        try await self.read(auth) { principal, _ in try AccessControl.requireLocal(principal, StoreMethods.watch.name) }
        if params.kinds?.isEmpty == true {
            throw RPCError.invalidParams("params.kinds", "names no kind; leave it out for every kind but credentialChanged, or name at least one")
        }
        if let watcher = params.watcher { try Validation.identifier(watcher, "params.watcher") }
        let limit = try Validation.limit(params.limit, default: .max, maximum: WatchParams.maximumLimit)
        var sent = 0
        let (wakeups, stop) = self.notifier.subscribe()
        defer { stop() }
        // Only a watch that follows counts: one that ends when caught up wakes nobody later.
        let follower = params.follow == false ? nil : params.watcher
        if let follower { self.followers.withLock { $0[follower, default: 0] += 1 } }
        defer { if let follower { self.followers.withLock { $0[follower, default: 1] -= 1 } } }
        var iterator = wakeups.makeAsyncIterator()
        let pageSize = 256
        // A watch of credentials alone (what the services that keep them follow) reads the
        // log only when a credential changed since its position, not on every commit.
        let credentialsOnly = params.kinds == [.credentialChanged]
        var checked = false
        while true {
            let after = cursor
            if credentialsOnly, checked {
                let head = self.notifier.head
                if self.notifier.credentialHead <= after {
                    cursor = max(cursor, head)
                    if params.follow == false { return WatchEnd(lastSeq: cursor) }
                    if self.notifier.head > cursor { continue }
                    guard await iterator.next() != nil else { throw CancellationError() }
                    continue
                }
            }
            checked = true
            let page = try await self.read(nil) { _, db in
                // Checked on every page: a purge may pass the cursor while it waits.
                try WatchReader.checkHorizon(after: after, db)
                return try WatchReader.page(after: after, params: params, limit: pageSize, db)
            }
            for event in page.events {
                try await send(event)
                cursor = event.seq
                sent += 1
                if sent == limit { return WatchEnd(lastSeq: cursor) }
            }
            cursor = max(cursor, page.scannedThrough)
            if page.events.count == pageSize { continue }
            if params.follow == false { return WatchEnd(lastSeq: cursor) }
            if self.notifier.head > cursor { continue }
            guard await iterator.next() != nil else { throw CancellationError() }
        }
    }

    /// Whether a `store.watch` stream named `watcher` is following now.
    public func isFollowed(by watcher: String) -> Bool {
        self.followers.withLock { ($0[watcher] ?? 0) > 0 }
    }

    /// The sequence number of each commit (the newest when several come together), for
    /// whoever must react to commits inside the store process; `cancel` ends the stream.
    public func commits() -> (stream: AsyncStream<Int64>, cancel: @Sendable () -> Void) {
        self.notifier.subscribe()
    }

    // MARK: Shares

    public func share(_ params: ShareParams, auth: Auth?) async throws -> ShareInfo {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        return try await self.write(auth) { principal, now, db in
            let zone = try self.zoneForParent(principal, family: params.family, zone: params.zone, "share zones", db)
            return try ZoneOperations.share(zone, participants: params.participants, now: now, db)
        }
    }

    public func unshare(_ params: UnshareParams, auth: Auth?) async throws -> ShareInfo {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        return try await self.write(auth) { principal, now, db in
            let zone = try self.zoneForParent(principal, family: params.family, zone: params.zone, "change shares", db)
            return try ZoneOperations.unshare(zone, deviceIds: params.deviceIds, now: now, db)
        }
    }

    public func shareInfo(_ params: ZoneParams, auth: Auth?) async throws -> ShareInfo {
        try Validation.family(params.family)
        try Validation.zone(params.zone)
        return try await self.read(auth) { principal, db in
            let zone = try ZoneRow.find(db, family: params.family, name: params.zone)
            try AccessControl.requireRead(principal, zone, in: db)
            return try ZoneOperations.shareInfo(zone, db)
        }
    }

    // MARK: Credentials

    public func putCredential(_ params: PutCredentialParams, auth: Auth?) async throws -> CredentialInfo {
        try Validation.family(params.family)
        try Validation.identifier(params.deviceId, "params.deviceId")
        guard Credentials.isValidHash(params.tokenSHA256) else {
            throw RPCError.invalidParams("params.tokenSHA256", "must be the SHA-256 of the token as 64 lowercase hex digits")
        }
        return try await self.write(auth) { principal, now, db in
            try AccessControl.requireLocal(principal, StoreMethods.putCredential.name)
            let (info, seq) = try CredentialOperations.put(params, now: now, db)
            self.notifier.noteCredentialChange(at: seq)
            return info
        }
    }

    public func updateCredential(_ params: UpdateCredentialParams, auth: Auth?) async throws -> CredentialInfo {
        try Validation.family(params.family)
        return try await self.write(auth) { principal, now, db in
            try AccessControl.requireLocal(principal, StoreMethods.updateCredential.name)
            let (info, seq) = try CredentialOperations.update(params, now: now, db)
            if let seq { self.notifier.noteCredentialChange(at: seq) }
            return info
        }
    }

    public func listCredentials(_ params: ListCredentialsParams, auth: Auth?) async throws -> ListCredentialsResult {
        try Validation.family(params.family)
        if let deviceId = params.deviceId { try Validation.identifier(deviceId, "params.deviceId") }
        return try await self.read(auth) { principal, db in
            try AccessControl.requireLocal(principal, StoreMethods.listCredentials.name)
            let seen = self.lastSeen.withLock { $0 }
            return ListCredentialsResult(credentials: try CredentialOperations.list(family: params.family, deviceId: params.deviceId, db).map { info in
                var info = info
                info.lastSeenAt = seen[DeviceKey(family: info.family, deviceId: info.deviceId)]
                return info
            })
        }
    }

    public func credentialSnapshot(auth: Auth?) async throws -> CredentialSnapshotResult {
        try await self.read(auth) { principal, db in
            try AccessControl.requireLocal(principal, StoreMethods.credentialSnapshot.name)
            // One read transaction: the credentials are exactly those at the head read here.
            return CredentialSnapshotResult(seq: try StoreDatabase.head(db), credentials: try CredentialOperations.entries(db))
        }
    }

    public func whoami(auth: Auth?) async throws -> WhoAmIResult {
        try await self.shortRead(auth) { principal, _ in Self.whoami(principal) }
    }

    /// ``whoami(auth:)`` on the calling event loop; nil when not on one.
    public func whoamiOnLoop(auth: Auth?) throws -> WhoAmIResult? {
        try self.readOnLoop(auth) { principal, _ in Self.whoami(principal) }
    }

    private static func whoami(_ principal: Principal) -> WhoAmIResult {
        switch principal {
        case .local: WhoAmIResult(principal: "local")
        case .device(let device):
            WhoAmIResult(principal: "device", family: device.family, deviceId: device.deviceId, role: device.role, status: device.status)
        }
    }

    // MARK: Maintenance

    public var schemaInfo: SchemaResult { self.schema.info }

    /// The longest grace period accepted (100 years); more would overflow the clock arithmetic.
    public static let maximumGraceSeconds: Double = 100 * 365 * 86_400

    public func backup(_ params: BackupParams, auth: Auth?) async throws -> BackupResult {
        try await self.read(auth) { principal, _ in try AccessControl.requireLocal(principal, StoreMethods.backup.name) }
        let (path, bytes, lastSeq, milliseconds) = try await OnlineBackup.take(params.path, remote: false, service: "store",
                                                                               stateDirectory: self.configuration.stateDirectory, pool: self.pool) {
            try StoreDatabase.head($0)
        }
        self.logger.notice("backup written", metadata: ["path": "\(path)", "bytes": "\(bytes)", "last_seq": "\(lastSeq)"])
        return BackupResult(path: path, bytes: bytes, lastSeq: lastSeq, milliseconds: milliseconds)
    }

    public func stats(auth: Auth?) async throws -> StatsResult {
        let head = try await self.read(auth) { principal, db in
            try AccessControl.requireLocal(principal, StoreMethods.stats.name)
            return try StoreDatabase.head(db)
        }
        let totals = self.writer.totals
        return StatsResult(
            startedAt: self.startedAt, writes: totals.writes, commits: totals.commits,
            writesPerCommit: totals.commits == 0 ? 0 : Double(totals.writes) / Double(totals.commits), head: head)
    }

    public func purge(_ params: PurgeParams, auth: Auth?) async throws -> PurgeResult {
        let grace = params.olderThanSeconds ?? Double(self.configuration.tombstoneGrace.components.seconds)
        guard (0...Self.maximumGraceSeconds).contains(grace) else {
            throw RPCError.invalidParams("params.olderThanSeconds", "must be between 0 and \(Int(Self.maximumGraceSeconds)) (100 years)")
        }
        let result = try await self.write(auth) { principal, now, db in
            try AccessControl.requireLocal(principal, StoreMethods.purge.name)
            return try Purge.run(olderThan: now - Int64(grace * 1000), db)
        }
        if result.tombstones + result.zones + result.changes > 0 {
            self.logger.info("purged", metadata: [
                "tombstones": "\(result.tombstones)", "zones": "\(result.zones)", "changes": "\(result.changes)",
                "watch_horizon": "\(result.watchHorizon)",
            ])
        }
        return result
    }
}
