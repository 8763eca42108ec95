import APNs
import APNsStandIn
import ArgumentParser
import OptionChecks
import AsyncHTTPClient
import Crypto
import Foundation
import ProcessSpawn
import Logging
import NIOCore
import NIOSSL
import PushAPI
import RelayCore
import RPCClient
import RPCCore
import StoreAPI
import Synchronization

/// The wake path against the APNs stand-in (APNs cannot be reached from here): the relay
/// binary on one core (`taskset`), over TLS, taking signed wakes as fast as 64 senders give
/// them, beside the same pushes sent straight to the stand-in (the APNs leg alone, its
/// floor); then a store, push and the relay with 1,000 devices registered for wakes and
/// none listening: from a change they subscribed to, to the stand-in holding each one's
/// push, beside 1,000 wakes posted to the relay at once by this process (the relay's and
/// APNs's share of it).
struct WakeBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wake",
        abstract: "Benchmarks the wake path: wakes per second through one relay core and through three copies sharing PostgreSQL, what refusing bad wakes and connection floods costs the relay, and change → APNs latency with 1,000 sleeping devices."
    )

    @Option(help: "Wakes sent for the throughput figures.")
    var wakes = 20_000

    @Option(help: "Devices registered for wakes, none listening.")
    var devices = 1000

    @Option(help: "Changes timed with every device asleep.")
    var rounds = 10

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard self.wakes >= 100 else { throw ValidationError("--wakes must be at least 100") }
        try checkOption("--devices", self.devices, in: 1...10_000)
        guard (1...50).contains(self.rounds) else { throw ValidationError("--rounds must be between 1 and 50 (each device may be woken 60 times an hour)") }
    }

    func run() async throws {
        let services = try BenchServices(self.common, benchmark: "wake")
        defer { services.stop() }
        let work = services.work
        let wakes = self.common.quick ? 1000 : self.wakes
        let deviceCount = self.common.quick ? min(self.devices, 200) : self.devices
        let rounds = self.common.quick ? 2 : self.rounds

        let receipts = Receipts()
        // The handles the relay sends to the tokens, apart from the wakes counted.
        let delivered = DeliveredHandles()
        let apns = try await APNsStandIn(directory: work, keeping: false) { push in
            if let payload = try? JSONSerialization.jsonObject(with: Data(push.payload.utf8)) as? [String: Any],
               let handle = APNsPush.handle(inPayload: payload) {
                delivered.handles.withLock { $0[push.token] = handle }
            } else {
                receipts.arrived(push.token)
            }
        }
        defer { apns.stop() }
        let relay = try await LaunchedRelay(apns: apns, binDirectory: self.common.binDirectory, work: work)
        defer { relay.kill() }
        let http = try Self.httpClient(trusting: relay.caFile)
        // async-http-client traps on a client dropped without a shutdown: shut down on errors too.
        do {
            let server = P256.Signing.PrivateKey()
            var figures: [Figure] = []

            // Wakes per second: through the relay, and straight to the stand-in.
            say("sealing \(deviceCount) device tokens")
            let tokens = (0..<deviceCount).map { Self.token($0) }
            let pin = WakeSignature.pin(spki: server.publicKey.derRepresentation)
            let handles = Mutex<[String: String]>([:])
            try await concurrently(tokens, width: 32) { token in
                try await relay.seal(token: token, topic: apns.topic, pin: pin, http: http)
                let handle = try await delivered.handle(for: token)
                handles.withLock { $0[token] = handle }
            }
            let handleOf = handles.withLock { $0 }
            let serverKey = server.rawRepresentation
            say("\(wakes) wakes through the relay, 64 at a time")
            let throughRelay = try await Self.rate(wakes, receipts: receipts) { index in
                let token = tokens[index % tokens.count]
                try await relay.wake(handleOf[token]!, key: try P256.Signing.PrivateKey(rawRepresentation: serverKey), http: http)
            }
            say("\(wakes) pushes straight to the stand-in, 64 at a time")
            let direct = try Self.directClient(apns: apns, work: work)
            let registrations = tokens.map { WakeRegistration(token: $0, topic: apns.topic, environment: .production, pin: pin) }
            let straight = try await Self.rate(wakes, receipts: receipts) { index in
                let outcome = await direct.send(.background, to: registrations[index % registrations.count], collapseId: nil, ttlSeconds: nil)
                guard case .delivered = outcome else { throw BenchError("the stand-in refused a push: \(outcome)") }
            }
            try await direct.http.shutdown()
            figures.append(Figure(name: "wakes through one relay core", value: throughRelay, unit: "wakes/s",
                                  comparison: "the same pushes straight to APNs (stand-in)", comparisonValue: straight, ratio: throughRelay / straight))
            say("  relay \(Report.format(throughRelay))/s, straight \(Report.format(straight))/s")

            // Three copies sharing PostgreSQL, the client spreading the wakes over them (as a
            // balancer would), all three on the same core as the one copy was.
            if let missing = Postgres.missing {
                say("  three copies sharing PostgreSQL: not measured (\(missing))")
            } else {
                let postgres = try await Postgres.start(directory: work + "/relay-postgres")
                defer { postgres.stop() }
                let url = "postgres://\(Postgres.user)@/postgres?host=\(postgres.directory)"
                var launched: [LaunchedRelay] = []
                defer { for copy in launched { copy.kill() } }
                for index in 0..<3 {
                    launched.append(try await LaunchedRelay(apns: apns, binDirectory: self.common.binDirectory, work: work, name: "relay-copy\(index)",
                                                            extra: ["--state-database", url]))
                }
                let copies = launched
                let clients = try copies.map { try Self.httpClient(trusting: $0.caFile) }
                say("\(wakes) wakes through three copies sharing PostgreSQL \(postgres.version), 64 at a time")
                let throughCopies: Double
                do {
                    throughCopies = try await Self.rate(wakes, receipts: receipts) { index in
                        let token = tokens[index % tokens.count]
                        try await copies[index % 3].wake(handleOf[token]!, key: try P256.Signing.PrivateKey(rawRepresentation: serverKey), http: clients[index % 3])
                    }
                } catch {
                    say("  three copies: \(error)")
                    for client in clients { try? await client.shutdown() }
                    throw error
                }
                for client in clients { try await client.shutdown() }
                figures.append(Figure(name: "wakes through 3 copies + PostgreSQL", value: throughCopies, unit: "wakes/s",
                                      comparison: "the same pushes straight to APNs (stand-in)", comparisonValue: straight, ratio: throughCopies / straight))
                figures.append(Figure(name: "three copies vs one", value: throughCopies, unit: "wakes/s",
                                      comparison: "one copy, in memory", comparisonValue: throughRelay, ratio: throughCopies / throughRelay))
                say("  three copies \(Report.format(throughCopies))/s")
            }

            // What refusing costs the relay, in its CPU per request, beside the cheapest request
            // it serves (a health check on a kept-alive connection).
            let refusals = self.common.quick ? 500 : 5_000
            let pid = relay.process.processIdentifier
            let health = try await Self.cpuPerRequest(pid: pid, count: refusals) { _ in try await relay.get("/v1/health", http: http, expecting: 200) }
            let unsignedBody = Array(try JSONEncoder().encode(WakeRequest(handle: handleOf[tokens[0]]!, kind: .background)))
            let unsigned = try await Self.cpuPerRequest(pid: pid, count: refusals) { _ in
                try await relay.post("/v1/wake", unsignedBody, headers: [], http: http, expecting: 401)
            }
            let forger = P256.Signing.PrivateKey()
            let forged = try WakeSignature.headers(body: Array("another body".utf8), key: forger)
            let wronglySigned = try await Self.cpuPerRequest(pid: pid, count: refusals) { _ in
                try await relay.post("/v1/wake", unsignedBody, headers: forged, http: http, expecting: 401)
            }
            for (name, value) in [("unsigned wake refused", unsigned), ("wake refused, bad signature", wronglySigned)] {
                figures.append(Figure(name: "CPU per \(name)", value: value, unit: "µs", comparison: "per health check", comparisonValue: health,
                                      ratio: health / value))
            }
            say("  relay CPU: health check \(Report.format(health)) µs, unsigned wake \(Report.format(unsigned)) µs, wrongly signed \(Report.format(wronglySigned)) µs")
            let flood = try await Self.floodCost(apns: apns, binDirectory: self.common.binDirectory, work: work, count: refusals)
            figures.append(Figure(name: "CPU per connection refused over cap", value: flood.refused, unit: "µs",
                                  comparison: "per new TLS connection with one health check", comparisonValue: flood.served,
                                  ratio: flood.served / flood.refused))
            say("  relay CPU: connection refused \(Report.format(flood.refused)) µs, TLS connection served \(Report.format(flood.served)) µs")

            // The floor of the latency: every device's wake posted to the relay at once.
            let burst = try await Self.burstLatency(tokens, receipts: receipts) { token in
                try await relay.wake(handleOf[token]!, key: try P256.Signing.PrivateKey(rawRepresentation: serverKey), http: http)
            }

            // Change → APNs with every device asleep.
            let keyFile = work + "/gateway-key.pem"
            try server.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
            try services.launch("screentime-stored")
            let push = try services.launch("screentime-pushd", [
                "--wake-relay", relay.url, "--wake-relay-ca", relay.caFile, "--wake-key", keyFile, "--wakes-per-hour", "60", "--max-connections", "\(deviceCount + 100)",
            ])
            let storeClient = services.client("store")
            _ = try await storeClient.call(StoreMethods.createFamily, CreateFamilyParams(family: PushBenchmark.family))
            _ = try await storeClient.call(StoreMethods.createZone, ZoneParams(family: PushBenchmark.family, zone: PushBenchmark.zone))
            say("\(deviceCount) devices registered for wakes, none listening")
            let sleepers = tokens.enumerated().map { Sleeper(index: $0.offset, apnsToken: $0.element, socket: work + "/push.sock") }
            try await concurrently(sleepers, width: 32) { device in
                _ = try await storeClient.call(StoreMethods.putCredential, PutCredentialParams(
                    family: PushBenchmark.family, deviceId: device.deviceId, role: .coParent, tokenSHA256: SHA256Hex.of(device.token)))
                _ = try await device.client.call(PushMethods.subscribe, SubscribeParams(
                    subscriptionId: "bench", kind: .query, zone: PushBenchmark.zone, recordType: RecordTypes.usageRecord, firesOn: [.create, .update]))
                _ = try await device.client.call(PushMethods.registerWake, RegisterWakeParams(handle: handleOf[device.apnsToken]!, relay: relay.url))
            }
            let writer = ChangeWriter(store: storeClient)
            var samples = Samples()
            try await services.phase("changes to \(deviceCount) devices asleep", [push]) {
                for round in 0...rounds {
                    receipts.expect(Set(tokens))
                    _ = try await writer.change()
                    let returned = Monotonic.nanoseconds()
                    guard await receipts.wait(timeout: .seconds(60)) else {
                        throw BenchError("only \(receipts.count) of \(deviceCount) wakes reached the stand-in within 60 s of change \(round)")
                    }
                    // The first round warms the connections up; it is not counted.
                    if round > 0 { for arrived in receipts.times { samples.add(.nanoseconds(Int64(arrived) - Int64(min(arrived, returned)))) } }
                    // Each device woke and fetched: it acknowledges, so the next change wakes it at once.
                    try await concurrently(sleepers, width: 32) { device in _ = try await device.client.call(PushMethods.ack, AckParams(upTo: Int64.max / 2)) }
                }
            }
            figures.append(Figure(name: "change → APNs, \(deviceCount) asleep, p50", value: samples.p50 / 1000, unit: "ms",
                                  comparison: "\(deviceCount) wakes posted to the relay at once, p50", comparisonValue: burst.p50 / 1000,
                                  ratio: burst.p50 / samples.p50))
            figures.append(Figure(name: "change → APNs, \(deviceCount) asleep, p99", value: samples.p99 / 1000, unit: "ms",
                                  comparison: "\(deviceCount) wakes posted to the relay at once, p99", comparisonValue: burst.p99 / 1000,
                                  ratio: burst.p99 / samples.p99))
            say("  change → APNs: p50 \(Report.format(samples.p50 / 1000)) ms, p99 \(Report.format(samples.p99 / 1000)) ms; posted at once: p99 \(Report.format(burst.p99 / 1000)) ms")

            Report.print("wakes (relay on one core\(relay.pinned ? "" : ": taskset missing, not pinned"), \(deviceCount) devices\(self.common.quick ? ", quick mode" : ""))", figures)
            if let json = self.common.json { try Report.writeJSON(figures, to: json) }
            for device in sleepers { await device.client.close() }
            await storeClient.close()
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    /// Sends `count` with 64 in flight; the rate at which the stand-in took them.
    static func rate(_ count: Int, receipts: Receipts, _ send: @escaping @Sendable (Int) async throws -> Void) async throws -> Double {
        receipts.expectCount(count)
        let started = Monotonic.nanoseconds()
        try await concurrently(Array(0..<count), width: 64, send)
        guard await receipts.wait(timeout: .seconds(120)) else { throw BenchError("only \(receipts.count) of \(count) pushes arrived within 2 minutes") }
        return Double(count) / (Double(receipts.last - started) / 1e9)
    }

    /// One wake per token, all posted at once (64 in flight); each one's time to the stand-in.
    static func burstLatency(_ tokens: [String], receipts: Receipts, _ send: @escaping @Sendable (String) async throws -> Void) async throws -> Samples {
        var samples = Samples()
        for _ in 0..<3 {
            receipts.expect(Set(tokens))
            let started = Monotonic.nanoseconds()
            try await concurrently(tokens, width: 64, send)
            guard await receipts.wait(timeout: .seconds(60)) else { throw BenchError("only \(receipts.count) of \(tokens.count) wakes arrived within 60 s") }
            for arrived in receipts.times { samples.add(.nanoseconds(Int64(arrived - started))) }
        }
        return samples
    }

    /// The relay's CPU (µs) per request over `count` requests, 64 in flight.
    static func cpuPerRequest(pid: Int32, count: Int, _ send: @escaping @Sendable (Int) async throws -> Void) async throws -> Double {
        try await concurrently(Array(0..<64), width: 64, send)  // connections made before counting
        let before = ProcessCPU.nanoseconds(pid)
        try await concurrently(Array(0..<count), width: 64, send)
        return Double(ProcessCPU.nanoseconds(pid) - before) / 1000 / Double(count)
    }

    /// A relay of its own with the usual cap of 32 connections an address: its CPU per
    /// connection refused at accept once 32 are held, and per new TLS connection that asks
    /// for one health check and closes.
    static func floodCost(apns: APNsStandIn, binDirectory: String?, work: String, count: Int) async throws -> (refused: Double, served: Double) {
        let relay = try await LaunchedRelay(apns: apns, binDirectory: binDirectory, work: work, name: "relay-capped",
                                            extra: ["--max-connections-per-address", "32", "--request-timeout", "600"])
        defer { relay.kill() }
        let pid = relay.process.processIdentifier
        let port = relay.port
        // Served: each a new connection (curl opens one per run; 8 at a time).
        let servedCount = max(50, count / 50)
        let servedBefore = ProcessCPU.nanoseconds(pid)
        try await concurrently(Array(0..<servedCount), width: 8) { _ in
            let run = try await runCommand("/usr/bin/curl", ["-sf", "-o", "/dev/null", "--cacert", relay.caFile, "--resolve", "localhost:\(port):127.0.0.1",
                                                         "https://localhost:\(port)/v1/health"])
            guard run.status == 0 else { throw BenchError("a health check on a new connection failed: \(run.stderr)") }
        }
        let served = Double(ProcessCPU.nanoseconds(pid) - servedBefore) / 1000 / Double(servedCount)
        // Refused: 32 held open, then `count` more opened and closed by the relay at accept.
        // (Its connection deadline is raised so that the 32 stay held; the blocking sockets
        // are worked off the cooperative pool.)
        let refused: Double = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    var held = try (0..<32).map { _ in try RawTCP.open(port: port) }
                    defer { held.forEach { close($0) } }
                    // The kernel completes a connect before the relay accepts it: until the
                    // relay has taken 32, one more may be admitted. Held too, until one is refused.
                    while true {
                        let probe = try RawTCP.open(port: port)
                        if RawTCP.waitForClose(probe, seconds: 2) {
                            close(probe)
                            break
                        }
                        held.append(probe)
                        guard held.count < 64 else { throw BenchError("the relay admits connections past its per-address cap of 32") }
                    }
                    let before = ProcessCPU.nanoseconds(pid)
                    for _ in 0..<count {
                        let socket = try RawTCP.open(port: port)
                        defer { close(socket) }
                        guard RawTCP.waitForClose(socket, seconds: 5) else {
                            throw BenchError("the relay held a connection over its per-address cap of 32 instead of refusing it")
                        }
                    }
                    continuation.resume(returning: Double(ProcessCPU.nanoseconds(pid) - before) / 1000 / Double(count))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
        return (refused, served)
    }

    static func token(_ index: Int) -> String {
        String(format: "%08x", index) + String(repeating: "ab", count: 28)
    }

    static func httpClient(trusting caFile: String) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caFile)
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// APNs's client as the relay runs it, pointed at the stand-in.
    static func directClient(apns: APNsStandIn, work: String) throws -> APNsClient {
        let url = apns.url
        return APNsClient(http: APNsClient.makeHTTPClient(trusting: apns.certificateFile),
                          providerToken: try ProviderToken(keyId: apns.keyId, teamId: apns.teamId, p8: apns.p8),
                          baseURL: { _ in url }, attempts: 1, logger: Logger(label: "bench-apns"))
    }
}

/// `screentime-relayd` for the benchmark: TLS with a certificate of a local CA, on one core
/// when `taskset` is there, pushing to the stand-in, its limits out of the way.
private final class LaunchedRelay: Sendable {
    let process: Process
    let url: String
    let port: Int
    let caFile: String
    let pinned: Bool

    /// `extra`: options beyond the benchmark's (they come last, and win).
    /// `name`: its files' (its CA and certificate) in `work`.
    init(apns: APNsStandIn, binDirectory: String?, work: String, name: String = "relay", extra: [String] = []) async throws {
        let binary = (binDirectory ?? Locations.binDirectory) + "/screentime-relayd"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("\(binary) not found; build with deploy/build-release.sh screentime-bench first, or pass --bin-dir")
        }
        let authority = try LocalCA(in: work, name: name)
        try apns.p8.write(toFile: work + "/apns.p8", atomically: true, encoding: .utf8)
        let port = try FreePort.pick()
        let arguments = [
            "--host", "127.0.0.1", "--port", "\(port)", "--tls-certificate", authority.certificateFile, "--tls-key", authority.keyFile,
            "--sealing-key-file", work + "/relay-sealing.key", "--apns-key-file", work + "/apns.p8", "--apns-key-id", apns.keyId,
            "--apns-team-id", apns.teamId, "--topic", apns.topic, "--apns-url", apns.url, "--apns-ca-file", apns.certificateFile,
            "--wakes-per-minute", "10000000", "--seals-per-minute", "10000000", "--wakes-per-minute-per-address", "10000000",
            "--max-connections-per-address", "100000", "--apns-pushes-per-second", "10000000", "--alerts-per-hour", "100000", "--seals-per-hour", "100000",
            "--log-level", "warning",
        ] + extra
        let taskset = ["/usr/bin/taskset", "/bin/taskset"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let process = Process()
        if let taskset {
            process.executableURL = URL(fileURLWithPath: taskset)
            process.arguments = ["-c", "0", binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
        }
        try Interruption.run(process)
        say("screentime-relayd \(binary), pid \(process.processIdentifier)\(taskset == nil ? " (taskset not found: not pinned to one core)" : ", on core 0")")
        self.process = process
        self.url = "https://localhost:\(port)"
        self.port = port
        self.caFile = authority.caFile
        self.pinned = taskset != nil
        let http = try WakeBenchmark.httpClient(trusting: authority.caFile)
        let deadline = ContinuousClock.now + .seconds(30)
        var ready = false
        while !ready, ContinuousClock.now < deadline, process.isRunning {
            if let response = try? await http.execute(HTTPClientRequest(url: self.url + "/v1/health"), timeout: .seconds(2)), response.status == .ok {
                ready = true
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await http.shutdown()
        guard ready else { throw BenchError("screentime-relayd did not answer /v1/health within 30 s (running: \(process.isRunning))") }
    }

    /// Asks for the token's handle, which the relay sends to the token (the stand-in).
    func seal(token: String, topic: String, pin: String, http: HTTPClient) async throws {
        let body = try JSONEncoder().encode(SealRequest(token: token, topic: topic, environment: .production, pin: pin))
        let (status, data) = try await self.post("/v1/seal", Array(body), headers: [], http: http)
        guard status == 202 else { throw BenchError("the relay did not seal: HTTP \(status) \(String(decoding: data, as: UTF8.self))") }
    }

    func wake(_ handle: String, key: P256.Signing.PrivateKey, http: HTTPClient) async throws {
        let body = Array(try JSONEncoder().encode(WakeRequest(handle: handle, kind: .background)))
        let (status, data) = try await self.post("/v1/wake", body, headers: try WakeSignature.headers(body: body, key: key), http: http)
        guard status == 200 else { throw BenchError("the relay refused a wake: HTTP \(status) \(String(decoding: data, as: UTF8.self))") }
    }

    /// A request that must be answered with `status`.
    func post(_ path: String, _ body: [UInt8], headers: [(String, String)], http: HTTPClient, expecting status: Int) async throws {
        let (answered, data) = try await self.post(path, body, headers: headers, http: http)
        guard answered == status else { throw BenchError("POST \(path): HTTP \(answered) where \(status) was expected: \(String(decoding: data, as: UTF8.self))") }
    }

    func get(_ path: String, http: HTTPClient, expecting status: Int) async throws {
        let response = try await http.execute(HTTPClientRequest(url: self.url + path), timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 64 * 1024)
        guard Int(response.status.code) == status else { throw BenchError("GET \(path): HTTP \(response.status.code) where \(status) was expected") }
    }

    private func post(_ path: String, _ body: [UInt8], headers: [(String, String)], http: HTTPClient) async throws -> (Int, [UInt8]) {
        var request = HTTPClientRequest(url: self.url + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await http.execute(request, timeout: .seconds(30))
        return (Int(response.status.code), Array(buffer: try await response.body.collect(upTo: 64 * 1024)))
    }

    func kill() { Interruption.kill(self.process) }
}

/// A device registered for wakes that never listens.
private struct Sleeper: Sendable {
    let deviceId: String
    let token: String
    let apnsToken: String
    let client: RPCClient

    init(index: Int, apnsToken: String, socket: String) {
        self.deviceId = "sleeper-\(index)"
        self.token = "bench-token-\(index)-\(UUID().uuidString)"
        self.apnsToken = apnsToken
        self.client = RPCClient(configuration: ClientConfiguration(socketPath: socket, callTimeout: .seconds(120), connectTimeout: .seconds(30), auth: Auth(token: self.token)))
    }
}

/// When the stand-in took pushes (CLOCK_MONOTONIC nanoseconds): one per expected token, or
/// a count of any.
final class Receipts: Sendable {
    private struct State {
        var expected: Set<String>?
        var count = 0
        var target = 0
        var times: [UInt64] = []
        var waiter: CheckedContinuation<Bool, Never>?
    }

    private let state = Mutex(State())

    var count: Int { self.state.withLock { $0.count } }
    var times: [UInt64] { self.state.withLock { $0.times } }
    var last: UInt64 { self.state.withLock { $0.times.max() ?? 0 } }

    func expect(_ tokens: Set<String>) { self.reset(tokens, target: tokens.count) }
    func expectCount(_ count: Int) { self.reset(nil, target: count) }

    private func reset(_ tokens: Set<String>?, target: Int) {
        self.state.withLock { state in
            state = State(expected: tokens, target: target)
            state.times.reserveCapacity(target)
        }
    }

    func arrived(_ token: String) {
        let now = Monotonic.nanoseconds()
        let done: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
            if var expected = state.expected {
                guard expected.remove(token) != nil else { return nil }
                state.expected = expected
            }
            state.count += 1
            state.times.append(now)
            guard state.count >= state.target else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        done?.resume(returning: true)
    }

    /// Waits until what was expected arrived; false after `timeout`.
    func wait(timeout: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let ready = self.state.withLock { state -> Bool in
                        if state.count >= state.target { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume(returning: true) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let waiter = self.state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: false)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first || self.state.withLock { $0.count >= $0.target }
        }
    }
}

/// The handles the relay sent to the stand-in's tokens.
final class DeliveredHandles: Sendable {
    let handles = Mutex<[String: String]>([:])

    /// The handle sent to `token` (it comes with the relay's answer or just after).
    func handle(for token: String) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let handle = self.handles.withLock({ $0[token] }) { return handle }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw BenchError("the relay's push with the handle for \(token.prefix(8))… did not reach the stand-in within 30 s")
    }
}
