import Foundation
import PairingAPI
import RPCClient
import RPCCore
import ScreenTimeKit
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// The real services in one directory, as systemd would run them (store and pairing, and
/// push and the aggregator when asked), each one stoppable and startable again on the same
/// state; and kits opened on their sockets.
final class KitStack: @unchecked Sendable {
    let directory = TemporaryDirectory()
    var state: String { self.directory.file("state") }
    private(set) var services: [String: ServiceProcess] = [:]
    /// Each service's options beyond the usual (kept for its restarts).
    private var arguments: [String: [String]] = [:]
    /// Every kit opened on this stack: `stopAll` closes them, so that no kit of a finished
    /// (or failed) test goes on reconnecting to services that are gone.
    private let opened = Mutex<[ScreenTimeClient]>([])
    private static let executables = ["store": "screentime-stored", "pairing": "screentime-pairingd", "push": "screentime-pushd",
                                      "aggregator": "screentime-aggregatord"]

    static func start(_ services: [String] = ["store", "pairing"], arguments: [String: [String]] = [:]) async throws -> KitStack {
        let stack = KitStack()
        stack.arguments = arguments
        for service in services { try await stack.start(service) }
        return stack
    }

    func start(_ service: String) async throws {
        let arguments = (service == "pairing" ? ["--server-address", "home.example"] : []) + (self.arguments[service] ?? [])
        self.services[service] = try await ServiceProcess.start(Self.executables[service]!, service: service, in: self.directory,
                                                                stateDirectory: self.state, arguments: arguments)
    }

    /// Starts a service with options beyond the usual (kept for its restarts).
    func start(_ service: String, arguments: [String]) async throws {
        self.arguments[service] = arguments
        try await self.start(service)
    }

    /// Stops a service (SIGTERM) and waits for it to exit.
    func stop(_ service: String) async {
        await self.services[service]?.stop()
        self.services[service] = nil
    }

    func log(_ service: String) -> String { self.services[service]?.log ?? "" }

    /// Closes every kit opened on the stack and stops the services. Closing is asynchronous
    /// (it ends the kit's connection loop); it runs on its own so that a `defer` can call this.
    func stopAll() {
        let kits = self.opened.withLock { kits in
            defer { kits = [] }
            return kits
        }
        if !kits.isEmpty { Task { for kit in kits { await kit.close() } } }
        for service in self.services.values { service.stopNow() }
    }

    /// Keeps a kit opened elsewhere (over the gateway) to be closed by `stopAll`.
    @discardableResult
    func track(_ kit: ScreenTimeClient) -> ScreenTimeClient {
        self.opened.withLock { $0.append(kit) }
        return kit
    }

    /// The server's administrator (no credential) on a service's socket.
    func admin(_ service: String) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(socketPath: self.directory.file("\(service).sock"), callTimeout: .seconds(30), connectTimeout: .seconds(10)))
    }

    /// A kit on the local sockets, its database and credential in files named `name`.
    func kit(_ name: String, transport: (any Transport)? = nil, clock: @escaping @Sendable () -> Date = { Date() }) throws -> ScreenTimeClient {
        self.track(try ScreenTimeClient(
            transport: transport ?? UnixSocketTransport(runtimeDirectory: self.directory.path, backoff: Self.fast),
            credentials: FileCredentialStore(path: self.directory.file("\(name).credential")),
            databasePath: self.directory.file("\(name).sqlite"), backoff: Self.fast, clock: clock))
    }

    static let fast = Backoff(initial: .milliseconds(20), maximum: .milliseconds(300), attemptsBeforeOffline: 2)

    /// A family with its admin parent enrolled through the kit (`parent`), and a child
    /// device paired through the kit (`child`), confirmed.
    func family(timeZone: String = "UTC", childClock: @escaping @Sendable () -> Date = { Date() }) async throws -> (parent: ScreenTimeClient, child: ScreenTimeClient, childZone: String) {
        let code = try await self.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", displayName: "The Smiths", timeZone: timeZone))
        let parent = try self.kit("parent")
        try await parent.pairing.enroll(family: "smith", code: code.code, deviceId: "mum-phone", deviceName: "Mum's phone", displayName: "Mum")
        let invitation = try await parent.pairing.inviteChild(childId: "emma", childName: "Emma")
        let child = try self.kit("child", clock: childClock)
        let pending = try await child.pairing.accept(uri: invitation.uri, deviceId: "emma-ipad", deviceName: "Emma's iPad")
        let parentSees = try await parent.pairing.waitForAcceptance(of: invitation)
        #expect(parentSees == pending.shortCode)
        try await parent.pairing.confirm(invitation)
        try await pending.waitForConfirmation()
        return (parent, child, invitation.zone)
    }
}

/// Collects what a kit's queue did.
final class QueueLog: Sendable {
    /// What came of each attempt (applied, failed, will retry).
    let events = Arrivals<QueueEvent>()
    /// Each attempt as it starts.
    let sending = Arrivals<QueuedBatch>()
    private let task: Task<Void, Never>

    init(_ queue: SyncQueue) {
        let events = self.events, sending = self.sending
        let stream = queue.events()
        self.task = Task {
            for await event in stream {
                if case .sending(let batch) = event { sending.append(batch) } else { events.append(event) }
            }
        }
    }

    var applied: [(QueuedBatch, ModifyResult)] {
        self.events.all.compactMap { if case .applied(let batch, let result) = $0 { return (batch, result) } else { return nil } }
    }

    var failed: [(QueuedBatch, RPCError)] {
        self.events.all.compactMap { if case .failed(let batch, let error) = $0 { return (batch, error) } else { return nil } }
    }

    deinit { self.task.cancel() }
}

/// Today at `hour:minute` UTC.
func usageUTC(_ hour: Int, _ minute: Int) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(bySettingHour: hour, minute: minute, second: 0, of: usageDayUTC)!
}

/// The UTC day the tests' usage sessions go on (early in it, 00:00 to 01:00): today, or in
/// the first hours after midnight yesterday, since the store refuses a session that ends
/// in the future.
let usageDayUTC: Date = {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let now = Date()
    return calendar.component(.hour, from: now) < 2 ? now.addingTimeInterval(-86_400) : now
}()

/// Runs `body`, failing the test if it has not returned within `limit` (a ``WaitDeadline``:
/// a wait that would otherwise hang the run; the body is cancelled and left behind).
func within<T: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let settled = Flag()
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let settle: @Sendable (Result<T, any Error>) -> Void = { result in
        let first = outcome.withLock { outcome in
            guard outcome == nil else { return false }
            outcome = result
            return true
        }
        if first { settled.raise() }
    }
    let work = Task {
        do { settle(.success(try await body())) } catch { settle(.failure(error)) }
    }
    let deadline = WaitDeadline(limit)
    let timer = Task {
        var clock = deadline
        while !clock.expired() {
            do { try await Task.sleep(for: .milliseconds(50)) } catch { return }
        }
        settle(.failure(TestFailure("\(what) did not happen within \(limit)")))
        work.cancel()
    }
    await settled.wait()
    timer.cancel()
    let result = outcome.withLock { $0! }
    if case .success = result { deadline.noteIfSlow(what) } else { deadline.noteIfSlow(what, outcome: "failed") }
    return try result.get()
}
