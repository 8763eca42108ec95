import AggregatorAPI
import AggregatorEngine
import Foundation
import PushEngine
import RPCClient
import RPCCore
import ServiceHarness
import ServiceKit
import StackSupport
import StoreAPI
import Testing
import TestSupport
import UsageModel

/// A store, pairing and aggregator service (and push, for alerts); a family in
/// Europe/Paris with a confirmed child device that records usage. Either their engines in
/// the test's own process (``inProcess(withPush:configure:_:)``: for tests of the
/// aggregator's logic), or the real binaries (``start(aggregatorArguments:withPush:storeArguments:)``:
/// for what needs a process: kill -9, restarts).
final class AggregatorStack: @unchecked Sendable {
    let harness: PairingHarness
    let aggregatorSocket: String
    private var process: ServiceProcess?
    private let engine: RestartableService?
    /// With `withPush`, as a process: the push service, for alerts.
    private let pushProcess: ServiceProcess?
    let family: Bootstrapped
    let child: PairedChild
    let days = LocalDays(timeZone: "Europe/Paris")!
    private let aggregatorArguments: [String]

    private init(harness: PairingHarness, aggregatorSocket: String, process: ServiceProcess?, engine: RestartableService?, push: ServiceProcess?,
                 family: Bootstrapped, child: PairedChild, aggregatorArguments: [String]) {
        self.harness = harness
        self.aggregatorSocket = aggregatorSocket
        self.process = process
        self.engine = engine
        self.pushProcess = push
        self.family = family
        self.child = child
        self.aggregatorArguments = aggregatorArguments
        self.local = RPCClient(configuration: ClientConfiguration(socketPath: aggregatorSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        self.parentStore = harness.storeClient(token: family.parentCredential.token)
    }

    static func start(aggregatorArguments: [String] = [], withPush: Bool = false, storeArguments: [String] = []) async throws -> AggregatorStack {
        let harness = try await PairingHarness.start(storeArguments: storeArguments)
        let family = try await Bootstrapped.make(harness)
        let child = try await family.pairChild(harness)
        let push = withPush ? try await ServiceProcess.start("screentime-pushd", service: "push", in: harness.directory, stateDirectory: harness.state) : nil
        let aggregator = try await ServiceProcess.start("screentime-aggregatord", service: "aggregator", in: harness.directory,
                                                        stateDirectory: harness.state, arguments: aggregatorArguments)
        return AggregatorStack(harness: harness, aggregatorSocket: aggregator.socketPath, process: aggregator, engine: nil, push: push,
                               family: family, child: child, aggregatorArguments: aggregatorArguments)
    }

    /// Runs `body` with the store's, pairing's, the aggregator's (and with `withPush`,
    /// push's) engines serving in this process (`configure` changes the aggregator's
    /// configuration), then stops them gracefully.
    static func inProcess<T: Sendable>(withPush: Bool = false, configure: @escaping @Sendable (inout AggregatorConfiguration) -> Void = { _ in },
                                       storeClock: @escaping @Sendable () -> Date = { Date() },
                                       _ body: @Sendable (AggregatorStack) async throws -> T) async throws -> T {
        try await PairingHarness.inProcess(storeClock: storeClock) { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness)
            @Sendable func run() async throws -> T {
                let setup: @Sendable (ServiceEnvironment) async throws -> ServiceSetup = { environment in
                    var configuration = AggregatorConfiguration(storeSocket: harness.storeSocket, pushSocket: environment.paths.socketPath(for: "push"))
                    configure(&configuration)
                    return try await .aggregator(configuration, environment: environment)
                }
                let aggregator = try await RestartableService("aggregator", in: harness.directory, setup: setup)
                let stack = AggregatorStack(harness: harness, aggregatorSocket: aggregator.socketPath, process: nil, engine: aggregator, push: nil,
                                            family: family, child: child, aggregatorArguments: [])
                let result: T
                do {
                    result = try await withCleanup { try await body(stack) } afterwards: { await stack.local.close() }
                } catch {
                    try? await aggregator.stop()
                    throw error
                }
                try await aggregator.stop()
                return result
            }
            guard withPush else { return try await run() }
            return try await withService("push", in: harness.directory, setup: { environment in
                try await .push(PushConfiguration(storeSocket: harness.storeSocket, version: "0.0.0-test"), environment: environment)
            }) { _ in try await run() }
        }
    }

    /// The aggregator's process (a stack made by ``start(aggregatorArguments:withPush:storeArguments:)`` only).
    var aggregator: ServiceProcess {
        guard let process = self.process else { preconditionFailure("the aggregator runs in the test's process: start it with AggregatorStack.start to have a process") }
        return process
    }

    /// What the aggregator logged so far.
    var aggregatorLog: String { self.engine?.log ?? self.aggregator.log }

    /// In process: stops the aggregator's engine gracefully and starts it again on its
    /// database, as a restart of its service would.
    func restartEngine() async throws {
        guard let engine = self.engine else { preconditionFailure("the aggregator runs as a process: use restart()") }
        try await engine.restart()
    }

    /// The aggregator as a local service, and the parent's connection to the store (what the
    /// parent's app reads): one each, kept for the stack's life.
    let local: RPCClient
    let parentStore: RPCClient

    func kill() async {
        self.aggregator.signal(SIGKILL)
        _ = try? await self.aggregator.waitForExit()
    }

    func restart() async throws {
        self.process = try await ServiceProcess.start("screentime-aggregatord", service: "aggregator", in: self.harness.directory,
                                                      stateDirectory: self.harness.state, arguments: self.aggregatorArguments)
    }

    func stopNow() {
        self.aggregator.stopNow()
        self.pushProcess?.stopNow()
        self.harness.stopNow()
    }

    /// A local time in the family's zone: "2026-03-29 01:30".
    func at(_ text: String) -> Date { LocalTime(self.days).at(text) }

    /// The child device saves (or replaces) a usage session (sent at `deviceClock` by the
    /// device's clock, when given).
    func session(_ name: String, app: String = "org.khan", category: String? = "learning", from start: Date, to end: Date, bundleId: String? = nil,
                 deviceClock: Date? = nil, on device: PairedChild? = nil) async throws {
        let device = device ?? self.child
        var fields: [String: JSONValue] = [
            "logicalID": .string(app), "deviceID": .string(device.deviceId), "sessionStart": .date(start), "sessionEnd": .date(end),
            "totalSeconds": .int(max(0, Int64(end.timeIntervalSince(start)))),
        ]
        if let category { fields["category"] = .string(category) }
        if let bundleId { fields["bundleId"] = .string(bundleId) }
        let result = try await device.store.call(StoreMethods.modify, ModifyParams(
            family: self.family.family, zone: device.zone, saves: [RecordSave(recordType: "UsageRecord", recordName: name, fields: fields)],
            savePolicy: .allKeys, atomic: true, deviceClock: deviceClock))
        #expect(result.allSucceeded)
    }

    func deleteSession(_ name: String) async throws {
        _ = try await self.child.store.call(StoreMethods.modify, ModifyParams(
            family: self.family.family, zone: self.child.zone, deletes: [RecordDelete(recordName: name)], atomic: true))
    }

    /// A parent sets a family-wide rule for an app.
    func rule(bundleId: String, _ classification: String, pointsPerMinute: Int64, enabled: Bool = true) async throws {
        let result = try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "AppRule", recordName: "rule-\(bundleId)", fields: [
                "familyRef": .reference(self.family.family, zone: StoreNames.defaultZone), "bundleId": .string(bundleId),
                "classification": .string(classification), "pointsPerMinute": .int(pointsPerMinute), "isEnabled": .bool(enabled),
            ]),
        ], savePolicy: .allKeys, atomic: true))
        #expect(result.allSucceeded)
    }

    /// The device's DailySummary for a local day, as the parent reads it; nil if none.
    func summary(_ day: String) async throws -> Summary? {
        let name = "\(self.child.deviceId)_\(day)"
        let records = try await self.parentStore.call(StoreMethods.fetch, FetchParams(family: self.family.family, zone: self.child.zone, recordNames: [name])).records
        return records.first.map(Summary.init)
    }

    /// Waits until the day's summary satisfies `condition` (nil: there is none). The bound
    /// is generous: in CI, beside systemd containers booting, a first summary has taken over
    /// ten seconds; the wait ends as soon as the summary is there.
    @discardableResult
    func waitForSummary(_ day: String, timeout: Duration = .seconds(30), until condition: (Summary?) -> Bool) async throws -> Summary? {
        try await eventually("the summary of \(day) coming to what was expected", timeout: timeout) { seen in
            let summary = try await self.summary(day)
            seen = String(describing: summary)
            return condition(summary) ? .some(summary) : nil
        }
    }

    /// Waits until the aggregator holds `sessions` sessions and has written every summary.
    func settle(sessions: Int, timeout: Duration = .seconds(20)) async throws {
        try await eventually("the aggregator settling at \(sessions) sessions", timeout: timeout) { seen in
            let status = try await self.local.call(AggregatorMethods.status, Empty())
            seen = String(describing: status)
            return status.sessions == sessions && status.pendingSummaries == 0 && status.pendingChildWrites == 0
                && status.pendingRetentionWrites == 0 && status.pendingConfigurations == 0 ? () : nil
        }
    }
}

extension AggregatorStack {
    var childRef: String { "child-emma" }

    /// The child's EarnedTimeBalance, as the parent reads it.
    func balance() async throws -> Record? {
        try await self.parentStore.call(StoreMethods.fetch, FetchParams(family: self.family.family, zone: StoreNames.defaultZone, recordNames: ["balance-\(self.childRef)"])).records.first
    }

    @discardableResult
    func waitForBalance(timeout: Duration = .seconds(30), until condition: (Record?) -> Bool) async throws -> Record? {
        try await eventually("the balance coming to what was expected", timeout: timeout) { seen in
            let balance = try await self.balance()
            seen = String(describing: balance?.fields)
            return condition(balance) ? .some(balance) : nil
        }
    }

    /// The child device's shield commands, oldest first, as the child reads them.
    func shieldCommands() async throws -> [Record] {
        try await self.child.store.call(StoreMethods.query, QueryParams(family: self.family.family, zone: self.child.zone, recordType: "ConfigurationCommand"))
            .records.filter { $0.recordName.hasPrefix("shield-") }.sorted { Int($0.recordName.dropFirst(7))! < Int($1.recordName.dropFirst(7))! }
    }

    /// The aggregator's ledger entries for one of the child's days, oldest first.
    func accruals(_ day: String) async throws -> [Record] {
        let prefix = "accrual-\(self.childRef)-\(day)-"
        return try await self.parentStore.call(StoreMethods.query, QueryParams(family: self.family.family, zone: StoreNames.defaultZone, recordType: "PointsLedgerEntry"))
            .records.filter { $0.recordName.hasPrefix(prefix) }.sorted { Int($0.recordName.dropFirst(prefix.count))! < Int($1.recordName.dropFirst(prefix.count))! }
    }

    /// What the ledger holds for the day: its accruals less its reversals.
    func accrued(_ day: String) async throws -> Int64 {
        try await self.accruals(day).reduce(0) { sum, entry in
            let amount = entry.fields["amount"]?.intValue ?? 0
            return sum + (entry.fields["type"] == "reversal" ? -amount : amount)
        }
    }

    /// A parent's redemption or adjustment.
    func ledger(_ type: String, _ amount: Int64, key: String, at: Date = Date()) async throws -> ModifyResult {
        try await self.parentStore.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: StoreNames.defaultZone, saves: [
            RecordSave(recordType: "PointsLedgerEntry", recordName: "entry-\(key)", fields: [
                "familyRef": .reference(self.family.family, zone: StoreNames.defaultZone), "childRef": .reference(self.childRef, zone: StoreNames.defaultZone),
                "type": .string(type), "amount": .int(amount), "timestamp": .date(at), "reason": "by hand", "idempotencyKey": .string(key),
                "actorParentRef": .reference("parent-\(self.family.parentCredential.deviceId)", zone: StoreNames.defaultZone),
            ]),
        ], savePolicy: .allKeys))
    }
}

/// A DailySummary's fields.
struct Summary: CustomStringConvertible {
    var learning: Int64
    var reward: Int64
    var points: Int64
    var apps: [AppUsage]
    var date: Date?
    var childRef: String?
    var changeTag: String?

    init(_ record: Record) {
        self.changeTag = record.changeTag
        self.learning = record.fields["totalLearningSeconds"]?.intValue ?? -1
        self.reward = record.fields["totalRewardSeconds"]?.intValue ?? -1
        self.points = record.fields["totalPointsEarned"]?.intValue ?? -1
        self.apps = (try? JSONDecoder().decode([AppUsage].self, from: Data((record.fields["appsUsedJSON"]?.stringValue ?? "[]").utf8))) ?? []
        self.date = record.fields["date"]?.stringValue.flatMap(StoreDates.parse)
        self.childRef = record.fields["childRef"]?.objectValue?["recordName"]?.stringValue
    }

    var description: String { "learning \(self.learning) s, reward \(self.reward) s, \(self.points) points, apps \(self.apps.map { "\($0.app): \($0.seconds)" })" }
}
