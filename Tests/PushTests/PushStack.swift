import DurableSQLite
import Foundation
import GRDB
import PushAPI
import PushEngine
import RPCClient
import RPCCore
import ServiceHarness
import ServiceKit
import StackSupport
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// A store, pairing and push service, a family with a confirmed child device: either
/// their engines in the test's own process (``inProcess(configure:_:)``: for tests of
/// push's logic), or the real binaries (``start(pushArguments:storeArguments:)``: for
/// what needs a process: kill -9, restarts, signals).
final class PushStack: @unchecked Sendable {
    let harness: PairingHarness
    let family: Bootstrapped
    let child: PairedChild
    let pushSocket: String
    private var process: ServiceProcess?
    private let inProcessLog: CapturedLog?
    private let pushArguments: [String]
    private let clients = Mutex<[String: RPCClient]>([:])

    private init(harness: PairingHarness, family: Bootstrapped, child: PairedChild, pushSocket: String,
                 process: ServiceProcess?, log: CapturedLog?, pushArguments: [String]) {
        self.harness = harness
        self.family = family
        self.child = child
        self.pushSocket = pushSocket
        self.process = process
        self.inProcessLog = log
        self.pushArguments = pushArguments
    }

    static func start(pushArguments: [String] = [], storeArguments: [String] = []) async throws -> PushStack {
        let harness = try await PairingHarness.start(storeArguments: storeArguments)
        let family = try await Bootstrapped.make(harness)
        let child = try await family.pairChild(harness)
        let push = try await ServiceProcess.start("screentime-pushd", service: "push", in: harness.directory, stateDirectory: harness.state, arguments: pushArguments)
        return PushStack(harness: harness, family: family, child: child, pushSocket: push.socketPath, process: push, log: nil, pushArguments: pushArguments)
    }

    /// Runs `body` with the store's, pairing's and push's engines serving in this process
    /// (`configure` changes push's configuration), then stops them gracefully.
    static func inProcess<T: Sendable>(configure: @escaping @Sendable (inout PushConfiguration) -> Void = { _ in },
                                       _ body: @Sendable (PushStack) async throws -> T) async throws -> T {
        try await PairingHarness.inProcess { harness in
            let family = try await Bootstrapped.make(harness)
            let child = try await family.pairChild(harness)
            let setup: @Sendable (ServiceEnvironment) async throws -> ServiceSetup = { environment in
                var configuration = PushConfiguration(storeSocket: harness.storeSocket, version: "0.0.0-test")
                configure(&configuration)
                return try await .push(configuration, environment: environment)
            }
            return try await withService("push", in: harness.directory, setup: setup) { push in
                let stack = PushStack(harness: harness, family: family, child: child, pushSocket: push.socketPath,
                                      process: nil, log: push.log, pushArguments: [])
                return try await withCleanup { try await body(stack) } afterwards: { await stack.closeClients() }
            }
        }
    }

    /// Push's process (a stack made by ``start(pushArguments:storeArguments:)`` only).
    var push: ServiceProcess {
        guard let process = self.process else { preconditionFailure("push runs in the test's process: start it with PushStack.start to have a process") }
        return process
    }

    /// What push logged so far.
    var pushLog: String { self.inProcessLog?.text ?? self.push.log }

    /// The push service as a device (its credential) or as a local service (none): one
    /// client per credential, kept for the stack's life (closed by ``inProcess(configure:_:)``).
    func client(token: String?) -> RPCClient {
        self.clients.withLock { clients in
            if let client = clients[token ?? ""] { return client }
            let client = RPCClient(configuration: ClientConfiguration(
                socketPath: self.pushSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10), auth: token.map(Auth.init(token:))))
            clients[token ?? ""] = client
            return client
        }
    }

    fileprivate func closeClients() async {
        for client in self.clients.withLock({ Array($0.values) }) { await client.close() }
    }

    var parent: RPCClient { self.client(token: self.family.parentCredential.token) }
    var local: RPCClient { self.client(token: nil) }

    func kill() async {
        self.push.signal(SIGKILL)
        _ = try? await self.push.waitForExit()
    }

    func startPush() async throws {
        self.process = try await ServiceProcess.start("screentime-pushd", service: "push", in: self.harness.directory, stateDirectory: self.harness.state,
                                                      arguments: self.pushArguments)
    }

    func stopNow() {
        self.push.stopNow()
        self.harness.stopNow()
    }

    /// A UsageRecord saved, changed or deleted by the child device.
    func saveUsage(_ name: String, seconds: Int64 = 600, category: String = "learning") async throws {
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        let result = try await self.child.store.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: self.child.zone, saves: [
            RecordSave(recordType: "UsageRecord", recordName: name, fields: [
                "logicalID": "org.khan", "deviceID": .string(self.child.deviceId), "category": .string(category),
                "sessionStart": .date(start), "sessionEnd": .date(start.addingTimeInterval(Double(seconds))), "totalSeconds": .int(seconds),
            ]),
        ], savePolicy: .allKeys))
        #expect(result.allSucceeded)
    }

    func deleteUsage(_ name: String) async throws {
        _ = try await self.child.store.call(StoreMethods.modify, ModifyParams(family: self.family.family, zone: self.child.zone, deletes: [RecordDelete(recordName: name)]))
    }
}

extension PushStack {
    /// Waits until `count` listens have registered with push's hub (each logs `listening`
    /// once registered, before it reads its backlog).
    func waitForListeners(_ count: Int) async throws {
        try await waitUntil("\(count) listener(s) registered", detail: self.pushLog) {
            self.pushLog.split(separator: "\n").count { $0.contains("listening") && $0.contains("device_id") } >= count
        }
    }

    /// Waits until push has queued every change the store has committed: its saved
    /// position (in push.sqlite, moved in the same transaction as the queue) reaches the
    /// store's head.
    func waitUntilCaughtUp() async throws {
        let head = try await self.harness.storeClient().call(StoreMethods.stats, Empty()).head
        let database = try DatabaseQueue(path: self.harness.state + "/push.sqlite", configuration: {
            var configuration = Configuration()
            configuration.readonly = true
            return configuration
        }())
        try await eventually("push queuing up to the store's head \(head)", detail: self.pushLog) { seen in
            let position = try await database.read { db in try StoreLogPosition.load(db) }
            seen = "position \(position)"
            return position >= head ? () : nil
        }
    }
}
