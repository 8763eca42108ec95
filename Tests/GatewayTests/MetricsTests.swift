import Foundation
import Gateway
import Glibc
import PairingAPI
import ProcessSpawn
import PushAPI
import RPCClient
import RPCCore
import ServerStatus
import ServiceKit
import ServiceMetrics
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Metrics: the gateway's endpoint for Prometheus")
struct MetricsTests {
    /// The rows of docs/operations.md's table of metrics: name → type, with
    /// `screentime_<service>_…` for each of the four services.
    static func documented() throws -> [String: String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        var metrics: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `screentime_") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let name = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")), type = cells[1]
            if name.contains("<service>") {
                for service in ["store", "pairing", "push", "aggregator"] { metrics[name.replacingOccurrences(of: "<service>", with: service)] = type }
            } else {
                metrics[name] = type
            }
        }
        return metrics
    }

    /// Labels the metrics may carry: each takes a few values, never an id.
    static let boundedLabels: Set<String> = ["method", "code", "priority", "outcome", "kind", "route", "status", "limit", "service", "state", "version", "le"]

    @Test("after a family's activity every documented metric is served with its type; labels are bounded (a thousand more families and devices add no series); without the token a scrape gets 401")
    func documentedMetrics() async throws {
        let port = try FreePort.pick()
        let token = "token-\(UUID().uuidString)"
        try await GatewayStack.inProcess(configure: {
            $0.metricsListen = "127.0.0.1:\(port)"
            $0.metricsToken = token
        }) { stack in
            let url = "http://127.0.0.1:\(port)/metrics"
            let scrape = { () async throws -> Exposition in
                let got = try await curl(url, pin: nil, caFile: nil, arguments: ["-H", "Authorization: Bearer \(token)"])
                guard got.status == 200 else { throw TestFailure("scrape: \(got.status) \(got.body) \(got.stderr)") }
                return Exposition(got.body)
            }
            #expect(try await curl(url, pin: nil, caFile: nil).status == 401)
            #expect(try await curl(url, pin: nil, caFile: nil, arguments: ["-H", "Authorization: Bearer wrong"]).status == 401)
            #expect(try await curl("http://127.0.0.1:\(port)/other", pin: nil, caFile: nil).status == 404)
            let auth = ["-H", "Authorization: Bearer \(token)"]
            #expect(try await curl(url, pin: nil, caFile: nil, arguments: auth + ["-X", "POST", "--data", "x"]).status == 405)
            #expect(try await curl(url, pin: nil, caFile: nil, arguments: auth + ["-I"]).status == 200)
            #expect(try await curl(url + "?debug=1", pin: nil, caFile: nil, arguments: auth).status == 200, "a query is ignored")

            // A family's day: parents and a child paired (and a wrong code tried), usage saved
            // through the gateway, a notification heard on a WebSocket and acknowledged.
            let family = try await Bootstrapped.make(stack.harness)
            await expectError(.invitationInvalid) {
                _ = try await stack.harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(family: "smith", code: "wrong.code", deviceId: "intruder", deviceName: "?"))
            }
            let child = try await family.pairChild(stack.harness)
            let saved = try await stack.rpc("store.modify", json(ModifyParams(family: "smith", zone: child.zone, saves: [RecordSave(recordType: "UsageRecord", recordName: "u1", fields: [
                "logicalID": "org.khan", "deviceID": .string(child.deviceId), "category": "learning",
                "sessionStart": .date(Date().addingTimeInterval(-600)), "sessionEnd": .date(Date()), "totalSeconds": 600,
            ])], atomic: true)), token: child.token)
            #expect(saved.status == 200, "\(saved.body)")
            let parent = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            parent.request(1, "push.listen")
            let push = RPCClient(configuration: ClientConfiguration(socketPath: (stack.harness.storeSocket as NSString).deletingLastPathComponent + "/push.sock"))
            _ = try await push.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: family.parentCredential.deviceId, alert: Alert(title: "Hello")))
            let heard = try await parent.reply(to: 1)
            let seq = try #require(heard["result"]?["seq"]?.intValue, "\(heard)")
            parent.request(2, "push.ack", json(AckParams(upTo: seq)))
            _ = try await parent.reply(to: 2)
            await push.close()
            _ = try await stack.result("aggregator.status", token: family.parentCredential.token)

            let metrics = try await eventually("the aggregator applies the usage") { seen -> Exposition? in
                let metrics = try await scrape()
                seen = "\(metrics.value("screentime_aggregator_changes_applied_total") ?? -1)"
                return (metrics.value("screentime_aggregator_changes_applied_total") ?? 0) > 0 ? metrics : nil
            }
            for (name, type) in try Self.documented() {
                #expect(metrics.types[name] == type, "\(name) is served as a \(type), not \(metrics.types[name] ?? "missing")")
            }
            for service in ServerStatus.services { #expect(metrics.value("screentime_up", ["service": service]) == 1, "\(service) up") }
            #expect(metrics.value("screentime_pairing_attempts_total", ["outcome": "paired"]) ?? 0 >= 2)
            #expect(metrics.value("screentime_pairing_attempts_total", ["outcome": "wrong_secret"]) == 1)
            #expect(metrics.value("screentime_push_notifications_delivered_total") ?? 0 >= 1)
            #expect(metrics.value("screentime_push_acks_total") == 1)
            #expect(metrics.value("screentime_gateway_websockets_open") == 1)
            #expect(metrics.value("screentime_gateway_http_responses_total", ["route": "rpc", "status": "200"]) ?? 0 >= 1)
            #expect(metrics.value("screentime_gateway_tls_handshakes_total", ["outcome": "ok"]) ?? 0 >= 2)
            #expect(metrics.value("screentime_store_records_saved_total") ?? 0 >= 1)
            #expect(metrics.labelNames.isSubset(of: Self.boundedLabels), "labels: \(metrics.labelNames.subtracting(Self.boundedLabels))")

            // A thousand families, each with a device that writes: the same series, only
            // their values move.
            let store = stack.harness.storeClient()
            let write = { (index: Int) async throws in
                let name = "family-\(index)"
                _ = try await store.call(StoreMethods.createFamily, CreateFamilyParams(family: name))
                _ = try await store.call(StoreMethods.putCredential, PutCredentialParams(family: name, deviceId: "device-\(index)", role: .admin,
                                                                                         tokenSHA256: SHA256Hex.of("token-\(index)"), status: .active))
                let device = Auth(token: "token-\(index)")
                _ = try await store.call(StoreMethods.whoami, Empty(), actingFor: device)
                _ = try await store.call(StoreMethods.modify, ModifyParams(family: name, zone: "default", saves: [
                    RecordSave(recordType: "AuditEntry", recordName: "a-\(index)", fields: [
                        "familyRef": .reference(name, zone: "default"), "actorParentRef": .reference(name, zone: "default"), "action": "test", "timestamp": .date(Date()),
                    ]),
                ], atomic: true))
                _ = try await store.call(StoreMethods.fetch, FetchParams(family: name, zone: "default", recordNames: ["a-\(index)"]), actingFor: device)
            }
            for index in 0..<10 { try await write(index) }
            let few = Set(try await scrape().series.keys)
            for index in 10..<1000 { try await write(index) }
            let many = Set(try await scrape().series.keys)
            #expect(many == few, "new series: \(many.subtracting(few).sorted().prefix(10))")
            await parent.close()
        }
    }

    @Test("pairing counts a lockout once, when a family's wrong secrets reach the limit; the attempts refused after it are locked_out")
    func lockouts() async throws {
        try await PairingHarness.inProcess(configure: { $0.failuresPerFamily = 2 }) { harness in
            _ = try await Bootstrapped.make(harness)
            let guess = { _ = try await harness.pairingClient().call(PairingMethods.enrollParent, EnrollParentParams(family: "smith", code: "wrong.code", deviceId: "intruder", deviceName: "?")) }
            for _ in 0..<2 { await expectError(.invitationInvalid, guess) }
            for _ in 0..<2 { await expectError(.limitExceeded, guess) }
            let pairing = RPCClient(configuration: ClientConfiguration(socketPath: harness.pairingSocket))
            let metrics = Exposition(try await pairing.call(Builtin.metrics, Empty()).text)
            await pairing.close()
            #expect(metrics.value("screentime_pairing_lockouts_total") == 1)
            #expect(metrics.value("screentime_pairing_attempts_total", ["outcome": "wrong_secret"]) == 2)
            #expect(metrics.value("screentime_pairing_attempts_total", ["outcome": "locked_out"]) == 2)
            #expect(metrics.value("screentime_pairing_attempts_total", ["outcome": "paired"]) == 1)
        }
    }

    @Test("a scrape reports a resting service from its state file and never connects to its socket (which would start it); a service whose process is gone is failed")
    func restingServiceNotWoken() async throws {
        let directory = TemporaryDirectory()
        let runtime = directory.file("run")
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        // Pairing rests: its file says so, and its socket (systemd's, in life) counts connections.
        let resting = RunStateFile(service: "pairing", version: "1.0", runtimeDirectory: runtime)
        resting.ended(.idleExited)
        let listener = try UnixListener(path: runtime + "/pairing.sock")
        // Push "runs", but its process is gone (killed): failed, and not asked either.
        var gone = ServiceRunState(service: "push", version: "1.0", pid: Int32.max - 1, state: .running, startedAt: Date().timeIntervalSince1970, starts: 1, restarts: 0)
        gone.details = nil
        try FileManager.default.createDirectory(atPath: runtime + "/status", withIntermediateDirectories: true)
        try RPCJSON.makeEncoder().encode(gone).write(to: URL(fileURLWithPath: runtime + "/status/push.json"))

        let text = await ServerMetrics.scrape(runtimeDirectory: runtime, socketPath: { runtime + "/\($0).sock" })
        let metrics = Exposition(text)
        #expect(metrics.value("screentime_up", ["service": "pairing"]) == 0)
        #expect(metrics.value("screentime_service_state", ["service": "pairing", "state": "idle-exited"]) == 1)
        #expect(metrics.value("screentime_service_state", ["service": "push", "state": "failed"]) == 1)
        #expect(metrics.value("screentime_service_state", ["service": "store", "state": "not-started"]) == 1)
        #expect(listener.pendingConnections == 0, "the scrape connected to the resting service's socket")
        let status = ServerStatus.report(runtimeDirectory: runtime, stateDirectory: directory.path)
        #expect(status.services.first { $0.service == "push" }?.sentence(time: { _ in "then" }) == "Failed at then: the process ended without a word (killed or crashed).")
        #expect(status.services.first { $0.service == "pairing" }?.sentence(time: { _ in "then" }) == "Idle: starts again when needed (resting since then).")
    }

    @Test("the metrics endpoint is off unless asked for; --metrics-listen takes PORT or HOST:PORT and refuses anything else clearly")
    func offByDefault() throws {
        #expect(try MetricsEndpoint.configured(Self.configuration(nil), inherited: [], metrics: ServiceMetrics(service: "gateway"), logger: .init(label: "test")) == nil)
        guard case .address(let host, let port) = try MetricsEndpoint.Listen.parse("9464") else { Issue.record("9464"); return }
        #expect(host == "127.0.0.1" && port == 9464)
        guard case .address(let any, _) = try MetricsEndpoint.Listen.parse("0.0.0.0:9464") else { Issue.record("0.0.0.0:9464"); return }
        #expect(any == "0.0.0.0")
        for bad in ["", "nine", "70000", "host:", "127.0.0.1:99999"] {
            #expect(throws: GatewayError.self, "\(bad)") { _ = try MetricsEndpoint.Listen.parse(bad) }
        }
    }

    static func configuration(_ listen: String?) -> GatewayConfiguration {
        var configuration = GatewayConfiguration(listen: "127.0.0.1:0", runtimeDirectory: "/nonexistent", stateDirectory: "/nonexistent",
                                                 certificate: CertificateSettings(hostNames: ["127.0.0.1"]), serverName: "test", version: "0")
        configuration.metricsListen = listen
        return configuration
    }
}

/// A listening Unix socket that only counts the connections waiting on it.
final class UnixListener: Sendable {
    let fd: Int32

    init(path: String) throws {
        self.fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(self.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 } }
        guard bound, listen(self.fd, 8) == 0 else { throw TestFailure("cannot listen on \(path): \(errno)") }
        _ = fcntl(self.fd, F_SETFL, fcntl(self.fd, F_GETFL) | O_NONBLOCK)
    }

    /// Connections accepted now (each one closed), without waiting.
    var pendingConnections: Int {
        var count = 0
        while case let client = accept(self.fd, nil, nil), client >= 0 {
            close(client)
            count += 1
        }
        return count
    }

    deinit { close(self.fd) }
}
