import Foundation
import Glibc
import RecordStore
import RPCClient
import RPCCore
import ServiceHarness
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// The store for a test: either its engine in the test's own process, on a real socket in
/// a temporary directory (``inProcess(_:_:)``: for tests of its logic), or a real
/// `screentime-stored` process with its state directory (``start(activated:arguments:)``:
/// for what needs the binary: activation, restarts, kill -9), which can be restarted
/// (gracefully or with kill -9) on the same data.
final class StoreHarness: @unchecked Sendable {
    /// The test's directory, removed with the harness: for a process, its runtime directory
    /// (sockets, logs); in process, the parent of `run/` and `state/`.
    let directory: TemporaryDirectory
    let state: String
    let socketPath: String
    private var backing: ServiceProcess?
    private let clients = Mutex<[RPCClient]>([])

    private init(directory: TemporaryDirectory, state: String, socketPath: String, process: ServiceProcess?) {
        self.directory = directory
        self.state = state
        self.socketPath = socketPath
        self.backing = process
    }

    /// Runs `body` with the store's engine serving in this process, then stops it gracefully.
    static func inProcess<T: Sendable>(_ configuration: StoreConfiguration = StoreConfiguration(),
                                       _ body: @Sendable (StoreHarness) async throws -> T) async throws -> T {
        let directory = TemporaryDirectory()
        return try await withService("store", in: directory, setup: { try await .store(configuration, environment: $0) }) { service in
            let harness = StoreHarness(directory: directory, state: service.environment.paths.stateDirectory, socketPath: service.socketPath, process: nil)
            return try await withCleanup { try await body(harness) } afterwards: { await harness.closeClients() }
        }
    }

    static func start(activated: Bool = false, arguments: [String] = []) async throws -> StoreHarness {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let process = activated
            ? try await ServiceProcess.startSocketActivated("screentime-stored", service: "store", in: directory, stateDirectory: state, arguments: arguments)
            : try await ServiceProcess.start("screentime-stored", service: "store", in: directory, stateDirectory: state, arguments: arguments)
        return StoreHarness(directory: directory, state: state, socketPath: process.socketPath, process: process)
    }

    /// The store's process (only a harness made by ``start(activated:arguments:)`` has one).
    var process: ServiceProcess {
        guard let process = self.backing else { preconditionFailure("the store runs in the test's process: start it with StoreHarness.start to have a process") }
        return process
    }

    /// A client; with `token`, it acts for that device.
    func client(token: String? = nil) -> RPCClient {
        let client = RPCClient(configuration: ClientConfiguration(
            socketPath: self.socketPath, callTimeout: .seconds(60), connectTimeout: .seconds(10), auth: token.map(Auth.init(token:))))
        self.clients.withLock { $0.append(client) }
        return client
    }

    /// Stops the store (SIGTERM, or SIGKILL when `kill`) and starts it again on the same data.
    func restart(kill: Bool = false, arguments: [String] = []) async throws {
        if kill {
            self.process.signal(SIGKILL)
            _ = try await self.process.waitForExit()
        } else {
            await self.process.stop()
        }
        self.backing = try await ServiceProcess.start("screentime-stored", service: "store", in: self.directory, stateDirectory: self.state, arguments: arguments)
    }

    /// Stops the store before returning (for `defer`).
    func stopNow() {
        self.process.stopNow()
    }

    func stop() async {
        await self.closeClients()
        await self.process.stop()
    }

    private func closeClients() async {
        for client in self.clients.withLock({ $0 }) { await client.close() }
    }
}

/// A family with one parent and two paired children, each child with its own zone.
struct FamilyFixture {
    static let family = "fam-smith"
    static let parentToken = "parent-token-0123456789"
    static let child1Token = "child1-token-0123456789"
    static let child2Token = "child2-token-0123456789"
    static let zone1 = "ChildMonitoring-c1"
    static let zone2 = "ChildMonitoring-c2"

    let admin: RPCClient
    let parent: RPCClient
    let child1: RPCClient
    let child2: RPCClient

    static func sha256(_ token: String) -> String {
        SHA256Hex.of(token)
    }

    static func setUp(_ store: StoreHarness, child1Status: CredentialStatus = .active) async throws -> FamilyFixture {
        let admin = store.client()
        _ = try await admin.call(StoreMethods.createFamily, CreateFamilyParams(family: family))
        _ = try await admin.call(StoreMethods.putCredential, PutCredentialParams(family: family, deviceId: "p1", role: .admin, tokenSHA256: sha256(parentToken)))
        _ = try await admin.call(StoreMethods.putCredential, PutCredentialParams(family: family, deviceId: "c1", role: .child, tokenSHA256: sha256(child1Token), status: child1Status))
        _ = try await admin.call(StoreMethods.putCredential, PutCredentialParams(family: family, deviceId: "c2", role: .child, tokenSHA256: sha256(child2Token)))
        for (zone, device) in [(zone1, "c1"), (zone2, "c2")] {
            _ = try await admin.call(StoreMethods.createZone, ZoneParams(family: family, zone: zone))
            _ = try await admin.call(StoreMethods.share, ShareParams(family: family, zone: zone, participants: [ShareParticipant(deviceId: device, permission: .readWrite)]))
        }
        return FamilyFixture(
            admin: admin, parent: store.client(token: parentToken), child1: store.client(token: child1Token), child2: store.client(token: child2Token))
    }
}

/// A record of each type the schema defines, built with valid fields.
enum Make {
    static func usage(_ name: String, device: String = "c1", app: String = "org.khanacademy", start: Date, seconds: Int64, category: String = "learning") -> RecordSave {
        RecordSave(recordType: "UsageRecord", recordName: name, fields: [
            "logicalID": .string(app), "bundleId": .string(app), "deviceID": .string(device), "category": .string(category),
            "sessionStart": .date(start), "sessionEnd": .date(start.addingTimeInterval(Double(seconds))), "totalSeconds": .int(seconds),
        ])
    }

    static func appRule(_ bundle: String, classification: String = "learning", family: String = FamilyFixture.family) -> RecordSave {
        RecordSave(recordType: "AppRule", recordName: "rule-\(bundle)", fields: [
            "familyRef": .reference(family, zone: "default"), "bundleId": .string(bundle), "classification": .string(classification),
        ])
    }

    static func child(_ name: String, opaque: String, devices: [String] = []) -> RecordSave {
        RecordSave(recordType: "ChildContext", recordName: name, fields: [
            "familyRef": .reference(FamilyFixture.family, zone: "default"), "childOpaqueId": .string(opaque),
            "pairedDeviceIds": .array(devices.map(JSONValue.string)),
        ])
    }
}

extension RPCClient {
    /// `store.modify` of saves in one zone.
    @discardableResult
    func save(_ saves: [RecordSave], zone: String = "default", family: String = FamilyFixture.family, policy: SavePolicy? = nil,
              atomic: Bool? = nil, requestId: String? = nil, deviceClock: Date? = nil) async throws -> ModifyResult {
        try await self.call(StoreMethods.modify, ModifyParams(
            family: family, zone: zone, saves: saves, savePolicy: policy, atomic: atomic, requestId: requestId, deviceClock: deviceClock))
    }

    func fetch(_ names: [String], zone: String = "default", family: String = FamilyFixture.family) async throws -> FetchResult {
        try await self.call(StoreMethods.fetch, FetchParams(family: family, zone: zone, recordNames: names))
    }
}
