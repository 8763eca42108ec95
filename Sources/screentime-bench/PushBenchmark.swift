import ArgumentParser
import Foundation
import PushAPI
import RPCClient
import RPCCore
import ServiceKit
import StoreAPI
import Synchronization

/// A store and a push service; parent devices, each with a query subscription and a live
/// `push.listen`; one record changed again and again. Timed: from `store.modify` returning
/// to each listener holding the notification (store commit, change feed, fan-out, durable
/// queue, delivery, all included), with 1, 1,000 and 10,000 listeners; notifications per
/// second sustained; the push service's memory per idle listener.
///
/// The listeners are the C harness (Benchmarks/floor/listeners.c: every stream in one
/// thread, the notification's number found in the frame), because in real life they are
/// phones elsewhere: a Swift client per listener in this process costs about as much CPU
/// as the service, on the same cores. `--swift-listeners` listens with the real client.
struct PushBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Benchmarks screentime-pushd: change-to-notification latency with many listeners, throughput, memory per listener."
    )

    @Option(parsing: .upToNextOption, help: "Listener counts measured, ascending.")
    var listeners: [Int] = [1, 1000, 10_000]

    @Option(help: "Changes timed at each listener count (fewer as listeners grow, at least 20).")
    var rounds: Int = 200

    @Option(help: "Changes sent back to back for the throughput figure.")
    var burst: Int = 200

    @Flag(help: "Listen with a Swift RPCClient per device in this process instead of the C listener harness (their CPU then competes with the service's).")
    var swiftListeners = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard !self.listeners.isEmpty, self.listeners.allSatisfy({ $0 >= 1 }), self.listeners == self.listeners.sorted() else {
            throw ValidationError("--listeners takes counts of at least 1, ascending")
        }
        guard self.rounds >= 20 else { throw ValidationError("--rounds must be at least 20") }
        guard (10...1000).contains(self.burst) else { throw ValidationError("--burst must be between 10 and 1000 (a listener is cut off 1024 behind)") }
    }

    func run() async throws {
        let levels = self.common.quick ? [1, 100, 1000] : self.listeners
        let most = levels.last!
        let openFiles = OpenFileLimit.raiseToHard()
        guard openFiles > most + 256 else {
            throw BenchError("\(most) listeners need \(most + 256) open files; the hard limit is \(openFiles) (raise it with ulimit -Hn or in limits.conf)")
        }
        let services = try BenchServices(self.common, benchmark: "push")
        defer { services.stop() }
        let work = services.work
        let store = try services.launch("screentime-stored")
        let push = try services.launch("screentime-pushd", ["--max-connections", "\(most + 100)"])
        let storeClient = services.client("store")
        let pushSocket = work + "/push.sock"

        say("\(most) parent devices")
        _ = try await storeClient.call(StoreMethods.createFamily, CreateFamilyParams(family: Self.family))
        _ = try await storeClient.call(StoreMethods.createZone, ZoneParams(family: Self.family, zone: Self.zone))
        let devices = (0..<most).map { BenchDevice(index: $0, socket: pushSocket) }
        try await concurrently(devices, width: 32) { device in
            _ = try await storeClient.call(StoreMethods.putCredential, PutCredentialParams(
                family: Self.family, deviceId: device.deviceId, role: .coParent, tokenSHA256: SHA256Hex.of(device.token)))
        }

        let writer = ChangeWriter(store: storeClient)
        let arrivals = Arrivals()
        let harness = self.swiftListeners ? nil : try ListenerHarness(workDirectory: work, socket: pushSocket, arrivals: arrivals)
        defer { harness?.stop() }
        say(harness == nil ? "listening with a Swift client per device" : "listening with the C harness (one thread)")
        var figures: [Figure] = []
        var connected = 0
        for level in levels {
            // Each new device subscribes, then listens: every change goes to `level` queues.
            let joining = Array(devices[connected..<level])
            try await concurrently(joining, width: 32) { device in
                _ = try await device.client.call(PushMethods.subscribe, SubscribeParams(
                    subscriptionId: "bench", kind: .query, zone: Self.zone, recordType: RecordTypes.usageRecord, firesOn: [.create, .update],
                    notification: NotificationSpec(includeKeys: ["totalSeconds"], collapseKey: "bench")))
                // The harness listens on connections of its own: this one would only count
                // against the service's connection limit.
                if harness != nil { await device.client.close() }
            }
            try await Self.settle(connected, writer: writer, arrivals: arrivals)
            let before = try ProcessMemory.residentBytes(pid: push.process.processIdentifier)
            for device in joining {
                if let harness { harness.listen(token: device.token) } else { device.listen(into: arrivals) }
            }
            connected = level
            try await Self.settle(level, writer: writer, arrivals: arrivals)
            if level == most {
                // What the listeners added, once connected and caught up.
                let rss = try ProcessMemory.residentBytes(pid: push.process.processIdentifier)
                let perListener = Double(rss - before) / Double(joining.count) / 1024
                let floor = try NIOFloorMemory.perConnectionKiB(workDirectory: work, connections: min(joining.count, 4000))
                figures.append(Figure(name: "memory per idle listener (\(joining.count) joining)", value: perListener, unit: "KiB",
                                      comparison: "bare SwiftNIO connection", comparisonValue: floor, ratio: perListener / floor,
                                      target: "< 16 KiB", met: perListener < 16))
            }
            let rounds = max(20, level >= 10_000 ? self.rounds / 4 : level >= 1000 ? self.rounds / 2 : self.rounds) / (self.common.quick ? 5 : 1)
            let cpu = CPUTime(pids: ["push": [push.process.processIdentifier], "store": [store.process.processIdentifier]])
            let spentBefore = cpu.sample()
            let latency = level == most
                ? try await services.phase("changes to \(level) listening", [push, store]) {
                    try await Self.latency(level, rounds: max(rounds, 4), writer: writer, arrivals: arrivals)
                }
                : try await Self.latency(level, rounds: max(rounds, 4), writer: writer, arrivals: arrivals)
            // With what the listeners' acknowledgements cost the services.
            let spent = cpu.since(spentBefore, per: max(rounds, 4))
            let target: Double? = level == 1000 ? 20 : level == 10_000 ? 200 : nil
            figures.append(Figure(name: "modify → notification, \(level) listening, p50", value: latency.p50 / 1000, unit: "ms"))
            figures.append(Figure(name: "modify → notification, \(level) listening, p99", value: latency.p99 / 1000, unit: "ms",
                                  target: target.map { "< \(Int($0)) ms" }, met: target.map { latency.p99 / 1000 < $0 }))
            figures.append(Figure(name: "  CPU per change, \(level) listening", value: spent.values.reduce(0, +), unit: "ms (" + spent.sorted { $0.value > $1.value }
                .map { "\($0.key) \(Report.format($0.value))" }.joined(separator: ", ") + ")"))
            say("  \(level) listening: p50 \(Report.format(latency.p50 / 1000)) ms, p99 \(Report.format(latency.p99 / 1000)) ms")
        }

        let burst = self.common.quick ? 50 : self.burst
        let rate = try await Self.throughput(connected: connected, burst: burst, writer: writer, arrivals: arrivals)
        figures.append(Figure(name: "delivered, \(burst) changes × \(connected)", value: rate, unit: "notifications/s"))

        Report.print("screentime-pushd (\(levels.map(String.init).joined(separator: "/")) listeners\(self.common.quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
        for device in devices { device.stop() }
        await storeClient.close()
    }

    static let family = "bench"
    static let zone = "data"

    /// Changes until every listener holds the latest (the first listen of each device also
    /// returns its queued backlog), then a moment of quiet.
    static func settle(_ listening: Int, writer: ChangeWriter, arrivals: Arrivals) async throws {
        guard listening > 0 else { return }
        for _ in 0..<5 {
            arrivals.expect(round: writer.next)
            _ = try await writer.change()
            if await arrivals.wait(for: listening, timeout: .seconds(20)) {
                try await Task.sleep(for: .milliseconds(200))
                return
            }
        }
        throw BenchError("only \(arrivals.count) of \(listening) listeners received a change within 20 s, five times over")
    }

    private static func latency(_ listening: Int, rounds: Int, writer: ChangeWriter, arrivals: Arrivals) async throws -> Samples {
        var samples = Samples()
        for _ in 0..<rounds {
            let round = writer.next
            arrivals.expect(round: round)
            _ = try await writer.change()
            let returned = Monotonic.nanoseconds()
            guard await arrivals.wait(for: listening, timeout: .seconds(30)) else {
                throw BenchError("only \(arrivals.count) of \(listening) listeners received change \(round) within 30 s")
            }
            // A notification may beat the modify reply to the client: that counts as zero.
            for arrived in arrivals.times { samples.add(.nanoseconds(Int64(arrived) - Int64(min(arrived, returned)))) }
        }
        return samples
    }

    /// `burst` changes back to back; notifications counted as they arrive, whatever round.
    private static func throughput(connected: Int, burst: Int, writer: ChangeWriter, arrivals: Arrivals) async throws -> Double {
        arrivals.expectAny()
        let started = Monotonic.nanoseconds()
        for _ in 0..<burst { _ = try await writer.change() }
        let total = burst * connected
        guard await arrivals.wait(for: total, timeout: .seconds(120)) else {
            throw BenchError("only \(arrivals.count) of \(total) notifications arrived within 2 minutes")
        }
        return Double(total) / (Double(arrivals.last - started) / 1e9)
    }

    /// Runs `body` on every item, `width` at a time.
}

/// One parent device: its credential, its client, its listening task.
private final class BenchDevice: Sendable {
    let deviceId: String
    let token: String
    let client: RPCClient
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(index: Int, socket: String) {
        self.deviceId = "parent-\(index)"
        self.token = "bench-token-\(index)-\(UUID().uuidString)"
        self.client = RPCClient(configuration: ClientConfiguration(socketPath: socket, callTimeout: .seconds(120), connectTimeout: .seconds(30), auth: Auth(token: self.token)))
    }

    /// Listens with the real client, in this process.
    func listen(into arrivals: Arrivals) {
        let client = self.client
        self.task.withLock {
            $0 = Task {
                do {
                    for try await event in client.stream(PushMethods.listen, ListenParams()) {
                        guard case .item(let notification) = event, case .int(let round)? = notification.fields?["totalSeconds"] else { continue }
                        arrivals.arrived(round: round, at: Monotonic.nanoseconds())
                    }
                } catch {
                    say("  a listener ended: \(error)")
                }
            }
        }
    }

    func stop() { self.task.withLock { $0?.cancel() } }
}

/// Changes one UsageRecord, its `totalSeconds` numbering the change.
final class ChangeWriter: Sendable {
    let store: RPCClient
    private let counter = Mutex<Int64>(1)

    init(store: RPCClient) { self.store = store }

    /// The number the next change carries.
    var next: Int64 { self.counter.withLock { $0 } }

    /// Saves the record with the next number; returns that number.
    func change() async throws -> Int64 {
        let round = self.counter.withLock { value in
            defer { value += 1 }
            return value
        }
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        let result = try await self.store.call(StoreMethods.modify, ModifyParams(family: PushBenchmark.family, zone: PushBenchmark.zone, saves: [
            RecordSave(recordType: RecordTypes.usageRecord, recordName: "session", fields: [
                "logicalID": "org.khan", "deviceID": "bench-child", "category": "learning",
                "sessionStart": .date(start), "sessionEnd": .date(start.addingTimeInterval(60)), "totalSeconds": .int(round),
            ]),
        ], savePolicy: .allKeys))
        guard result.allSucceeded else { throw BenchError("store.modify failed: \(result.saved)") }
        return round
    }
}

/// When notifications arrived (CLOCK_MONOTONIC nanoseconds, the clock the C harness
/// reads too): those of one round, or (`expectAny`) all of them.
final class Arrivals: Sendable {
    private struct State {
        var round: Int64?
        var times: [UInt64] = []
        /// Who waits for how many arrivals (woken by the arrival that makes them, not by
        /// polling: the benchmark's own CPU competes with what it measures).
        var waiter: (generation: Int, count: Int, continuation: CheckedContinuation<Bool, Never>)?
        var generation = 0
    }

    private let state = Mutex(State())
    private let followers = Mutex<[@Sendable (Int64) -> Void]>([])

    func expect(round: Int64) {
        self.reset(round: round)
        for follower in self.followers.withLock({ $0 }) { follower(round) }
    }

    func expectAny() { self.reset(round: nil) }

    private func reset(round: Int64?) {
        self.state.withLock { state in
            state.round = round
            state.times = []
        }
    }

    /// Also tells `follower` each round expected (devices in another process, which time
    /// only the round they are told).
    func follow(_ follower: @escaping @Sendable (Int64) -> Void) { self.followers.withLock { $0.append(follower) } }

    func arrived(round: Int64, at time: UInt64) {
        self.arrived([(round, time)])
    }

    func arrived(_ batch: [(round: Int64, time: UInt64)]) {
        guard !batch.isEmpty else { return }
        let waiter: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
            for (round, time) in batch where state.round == nil || state.round == round { state.times.append(time) }
            guard let waiter = state.waiter, state.times.count >= waiter.count else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: true)
    }

    var count: Int { self.state.withLock { $0.times.count } }
    var times: [UInt64] { self.state.withLock { $0.times } }
    var last: UInt64 { self.state.withLock { $0.times.max() ?? Monotonic.nanoseconds() } }

    /// Whether `count` arrivals were reached within `timeout` (one waiter at a time).
    func wait(for count: Int, timeout: Duration) async -> Bool {
        let timer = Mutex<Task<Void, Never>?>(nil)
        defer { timer.withLock { $0?.cancel() } }
        return await withCheckedContinuation { continuation in
            let generation: Int? = self.state.withLock { state in
                precondition(state.waiter == nil, "Arrivals has one waiter at a time")
                if state.times.count >= count { return nil }
                state.generation += 1
                state.waiter = (state.generation, count, continuation)
                return state.generation
            }
            guard let generation else { return continuation.resume(returning: true) }
            // Started once the waiter is in place, so it always finds the one it is for.
            timer.withLock { $0 = Task { await self.expire(generation, after: timeout) } }
        }
    }

    private func expire(_ generation: Int, after timeout: Duration) async {
        try? await Task.sleep(for: timeout)
        guard !Task.isCancelled else { return }
        let waiter: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
            guard let waiter = state.waiter, waiter.generation == generation else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: false)
    }
}

/// A process's resident memory, from /proc.
enum ProcessMemory {
    static func residentBytes(pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { throw BenchError("no VmRSS in /proc/\(pid)/status") }
        return kib * 1024
    }
}
