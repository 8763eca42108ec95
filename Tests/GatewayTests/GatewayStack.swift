import AggregatorEngine
import Foundation
import Gateway
import HTTPTypes
import Logging
import NIOCore
import NIOSSL
import NIOWebSocket
import PairingAPI
import ProcessSpawn
import PushEngine
import RPCClient
import RPCCore
import ServiceHarness
import ServiceKit
import StackSupport
import Synchronization
import TestSupport
import WSClient

/// The four services and the gateway in one directory, the gateway on a free loopback port
/// with its self-made certificate: what a family's phone reaches. Either as real processes
/// (``start(gatewayArguments:pairingArguments:)``: the binaries, their options, their
/// memory, signals), or every engine in the test's process, each on its real socket and
/// the gateway on its real TLS port (``inProcess(configure:_:)``: the gateway's logic).
final class GatewayStack: @unchecked Sendable {
    let harness: PairingHarness
    private let services: Services
    private(set) var gateway: RunningGateway
    private(set) var endpoint: GatewayEndpoint
    let gatewayArguments: [String]

    /// Push and the aggregator: processes, or engines in the test's process.
    private enum Services {
        case processes(push: ServiceProcess, aggregator: ServiceProcess)
        case engines(push: RestartableService, aggregator: RestartableService)
    }

    private init(harness: PairingHarness, services: Services, gateway: RunningGateway, endpoint: GatewayEndpoint, gatewayArguments: [String]) {
        self.harness = harness
        self.services = services
        self.gateway = gateway
        self.endpoint = endpoint
        self.gatewayArguments = gatewayArguments
    }

    /// What the aggregator logged so far.
    var aggregatorLog: String {
        switch self.services {
        case .processes(_, let aggregator): aggregator.log
        case .engines(_, let aggregator): aggregator.log
        }
    }

    /// Stops the aggregator (gracefully), as a service going down beside the gateway.
    func stopAggregator() async throws {
        switch self.services {
        case .processes(_, let aggregator): await aggregator.stop()
        case .engines(_, let aggregator): try await aggregator.stop()
        }
    }

    static func start(gatewayArguments: [String] = [], pairingArguments: [String] = []) async throws -> GatewayStack {
        let harness = try await PairingHarness.start(pairingArguments: pairingArguments)
        let push = try await ServiceProcess.start("screentime-pushd", service: "push", in: harness.directory, stateDirectory: harness.state)
        let aggregator = try await ServiceProcess.start("screentime-aggregatord", service: "aggregator", in: harness.directory, stateDirectory: harness.state)
        let (gateway, endpoint) = try await Self.startGateway(harness, arguments: gatewayArguments)
        return GatewayStack(harness: harness, services: .processes(push: push, aggregator: aggregator), gateway: .process(gateway), endpoint: endpoint,
                            gatewayArguments: gatewayArguments)
    }

    /// Runs `body` with the store, pairing, push, the aggregator and the gateway serving in
    /// this process (the gateway configured as `screentime-gatewayd --listen 127.0.0.1:0
    /// --host 127.0.0.1 --host localhost` would be, then by `configure`), then stops them
    /// gracefully.
    static func inProcess<T: Sendable>(configure: @escaping @Sendable (inout GatewayConfiguration) -> Void = { _ in },
                                       _ body: @Sendable (GatewayStack) async throws -> T) async throws -> T {
        try await PairingHarness.inProcess { harness in
            let storeSocket = harness.storeSocket
            let push = try await RestartableService("push", in: harness.directory, setup: { environment in
                try await .push(PushConfiguration(storeSocket: storeSocket, version: "0.0.0-test"), environment: environment)
            })
            let pushSocket = push.socketPath
            let aggregator: RestartableService
            do {
                aggregator = try await RestartableService("aggregator", in: harness.directory, setup: { environment in
                    try await .aggregator(AggregatorConfiguration(storeSocket: storeSocket, pushSocket: pushSocket), environment: environment)
                })
            } catch {
                try? await push.stop()
                throw error
            }
            let services = Services.engines(push: push, aggregator: aggregator)
            return try await withCleanup {
                try await withService("gateway", in: harness.directory, setup: { environment in
                    var configuration = GatewayConfiguration(
                        listen: "127.0.0.1:0", runtimeDirectory: environment.paths.runtimeDirectory, stateDirectory: environment.paths.stateDirectory,
                        certificate: CertificateSettings(hostNames: ["127.0.0.1", "localhost"]), serverName: "test-server", version: "0.0.0-test")
                    configure(&configuration)
                    return try .gateway(configuration, environment: environment)
                }) { gateway in
                    let endpointFile = GatewayEndpoint.path(stateDirectory: gateway.environment.paths.stateDirectory)
                    guard let endpoint = try GatewayEndpoint.read(from: endpointFile) else { throw TestFailure("no endpoint file") }
                    return try await body(GatewayStack(harness: harness, services: services, gateway: .inProcess(gateway.log), endpoint: endpoint, gatewayArguments: []))
                }
            } afterwards: {
                try? await aggregator.stop()
                try? await push.stop()
            }
        }
    }

    static func startGateway(_ harness: PairingHarness, arguments: [String]) async throws -> (ServiceProcess, GatewayEndpoint) {
        let endpointFile = GatewayEndpoint.path(stateDirectory: harness.state)
        try? FileManager.default.removeItem(atPath: endpointFile)
        let gateway = try ServiceProcess(
            executable: Binaries.path("screentime-gatewayd"),
            arguments: ["--runtime-dir", harness.directory.path, "--state-dir", harness.state, "--log-level", "trace",
                        "--listen", "127.0.0.1:0", "--host", "127.0.0.1", "--host", "localhost"] + arguments,
            socketPath: endpointFile, logPath: harness.directory.file("gateway-\(UUID().uuidString.prefix(4)).log"), environment: [:])
        // Ready once it has published where it listens.
        try await waitUntil("the gateway publishes its endpoint", detail: gateway.log) {
            if let status = gateway.exitStatus { throw TestFailure("the gateway exited (\(status)):\n\(gateway.log)") }
            return gateway.log.contains("ready") && FileManager.default.fileExists(atPath: endpointFile)
        }
        guard let endpoint = try GatewayEndpoint.read(from: endpointFile) else { throw TestFailure("no endpoint file") }
        return (gateway, endpoint)
    }

    /// Stops the gateway (SIGTERM) and starts it again with `arguments` (the same state).
    func restartGateway(arguments: [String]? = nil) async throws {
        await self.gateway.process.stop()
        let (gateway, endpoint) = try await Self.startGateway(self.harness, arguments: arguments ?? self.gatewayArguments)
        (self.gateway, self.endpoint) = (.process(gateway), endpoint)
    }

    var url: String { self.endpoint.urls.first { $0.contains("127.0.0.1") }! }
    var port: Int { Int(self.url.split(separator: ":").last!)! }

    /// Stops the processes before returning (for `defer`); in process, the stack stops when
    /// its body returns.
    func stopNow() {
        guard case .processes(let push, let aggregator) = self.services else { return }
        self.gateway.process.stopNow()
        aggregator.stopNow()
        push.stopNow()
        self.harness.stopNow()
    }
}

/// The gateway of a ``GatewayStack``: its process, or its engine in the test's process.
enum RunningGateway: Sendable {
    case process(ServiceProcess)
    case inProcess(CapturedLog)

    /// What it logged so far.
    var log: String {
        switch self {
        case .process(let process): process.log
        case .inProcess(let log): log.text
        }
    }

    /// Still serving (in process: until the stack's body returns).
    var isRunning: Bool {
        switch self {
        case .process(let process): process.isRunning
        case .inProcess: true
        }
    }

    /// Its process (its memory, signals, exit): a stack made by `GatewayStack.start` only.
    var process: ServiceProcess {
        guard case .process(let process) = self else { preconditionFailure("the gateway runs in the test's process: start the stack with GatewayStack.start") }
        return process
    }

    func residentBytes() throws -> Int { try self.process.residentBytes() }
}

// MARK: curl

/// What `curl` got: the HTTP status (0 when no HTTP response came), the body, its exit code.
struct CurlResult {
    var status: Int
    var body: String
    var exitCode: Int32
    var stderr: String

    var json: JSONValue? { try? JSONParser.parse(self.body) }
    var errorCode: String? { self.json?["error"]?["code"]?.stringValue }
}

/// Debian's curl, pinning the gateway's key (and trusting its certificate as the CA).
func curl(_ url: String, pin: String?, caFile: String?, arguments: [String] = []) async throws -> CurlResult {
    var args = ["-sS", "--max-time", "20", "-o", "-", "-w", "\n%{http_code}"]
    if let pin { args += ["--pinnedpubkey", "sha256//\(pin)"] }
    if let caFile { args += ["--cacert", caFile] }
    args += arguments + [url]
    // posix_spawn through ProcessSpawn, not Foundation's Process: Process.run() is not safe
    // while other tests start processes at the same time (it crashed the test run).
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString.prefix(8))").path
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let pid = try Spawn(executable: "/usr/bin/curl", arguments: args, stdout: scratch + "/out", stderr: scratch + "/err").start()
    // Waited for without holding a thread: the services may run in this very process.
    let exitCode = try await ChildExit.wait(pid, timeout: .seconds(60))
    let output = (try? Data(contentsOf: URL(fileURLWithPath: scratch + "/out"))) ?? Data()
    let errors = (try? Data(contentsOf: URL(fileURLWithPath: scratch + "/err"))) ?? Data()
    var text = String(decoding: output, as: UTF8.self)
    var status = 0
    if let newline = text.lastIndex(of: "\n") {
        status = Int(text[text.index(after: newline)...]) ?? 0
        text = String(text[..<newline])
    }
    return CurlResult(status: status, body: text, exitCode: exitCode, stderr: String(decoding: errors, as: UTF8.self))
}

extension GatewayStack {
    /// `POST /v1/rpc` with one envelope, pinned as a phone would be.
    func rpc(_ method: String, _ params: JSONValue = [:], token: String? = nil, id: Int = 1) async throws -> CurlResult {
        let body = await envelope(id: id, method: method, params: params)
        var arguments = ["-H", "Content-Type: application/json", "--data-binary", body]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        return try await curl(self.url + "/v1/rpc", pin: self.endpoint.pin, caFile: self.endpoint.certificate, arguments: arguments)
    }

    /// The result of a call that must succeed.
    func result(_ method: String, _ params: JSONValue = [:], token: String? = nil) async throws -> JSONValue {
        let reply = try await self.rpc(method, params, token: token)
        guard reply.status == 200, let result = reply.json?["result"] else {
            throw TestFailure("\(method) through the gateway: HTTP \(reply.status) \(reply.body) \(reply.stderr)\n\(self.gateway.log.suffix(3000))")
        }
        return result
    }
}

func envelope(id: Int?, method: String, params: JSONValue) -> String {
    var members: [String: JSONValue] = ["method": .string(method), "params": params]
    if let id { members["id"] = .int(Int64(id)) }
    return String(decoding: try! RPCJSON.makeEncoder().encode(JSONValue.object(members)), as: UTF8.self)
}

/// Encodes any wire type as the JSON params of an envelope.
func json<T: Encodable>(_ value: T) -> JSONValue {
    try! JSONParser.parse(bytes: Array(try! RPCJSON.makeEncoder().encode(value)))
}

// MARK: WebSocket

/// A device's WebSocket through the gateway over TLS (swift-websocket's client), trusting
/// the gateway's certificate: messages in as an async sequence, out with `send`.
final class DeviceWebSocket: Sendable {
    enum Event: Sendable {
        case message(String)
        case closed(code: Int?, reason: String? = nil, error: String? = nil)
    }

    private let inbox = Inbox()
    private let gatewayLog: @Sendable () -> String
    private let outgoing: AsyncStream<WebSocketOutboundWriter.OutboundFrame>.Continuation
    private let task: Task<Void, Never>

    init(stack: GatewayStack, token: String? = nil, headers: [(String, String)] = []) async throws {
        let (outgoingFrames, outgoing) = AsyncStream<WebSocketOutboundWriter.OutboundFrame>.makeStream()
        self.outgoing = outgoing
        let gateway = stack.gateway
        self.gatewayLog = { String(gateway.log.suffix(4000)) }
        let inbox = self.inbox
        // BoringSSL takes no self-signed end-entity certificate (CA:FALSE) as a trust root,
        // and swift-websocket's client has no verification callback to pin with; the key is
        // pinned by curl in every HTTP step, and checked here once per connection through
        // PinCheck before the WebSocket opens.
        try await PinCheck.verify(stack)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        // Closing, NIOSSL waits for the gateway's close_notify, by default up to 5 s; the
        // gateway has closed the connection by then, so the wait would only slow each test.
        tls.shutdownTimeout = .milliseconds(200)
        var configuration = WebSocketClientConfiguration(maxFrameSize: 4 << 20)
        if let token { configuration.additionalHeaders[.authorization] = "Bearer \(token)" }
        for (name, value) in headers { configuration.additionalHeaders[HTTPField.Name(name)!] = value }
        configuration.autoPing = .disabled
        configuration.sniHostname = "localhost"  // an IP address cannot be the SNI; the certificate names both
        let url = stack.url.replacingOccurrences(of: "https://", with: "wss://") + "/v1/ws"
        self.task = Task {
            var code: Int?
            var reason: String?
            var failure: String?
            do {
                let close = try await WebSocketClient.connect(url: url, configuration: configuration, tlsConfiguration: tls, logger: Logger(label: "test.ws")) { inbound, outbound, _ in
                    // Until the gateway closes the socket or the test does (`close()`).
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in outgoingFrames { try await outbound.write(frame) }
                        }
                        group.addTask {
                            for try await message in inbound.messages(maxSize: 4 << 20) {
                                if case .text(let text) = message { inbox.push(.message(text)) }
                            }
                        }
                        _ = try await group.next()
                        group.cancelAll()
                    }
                }
                code = close.map { Int(UInt16(webSocketErrorCode: $0.closeCode)) }
                reason = close?.reason
            } catch {
                failure = "\(error)"
            }
            inbox.push(.closed(code: code, reason: reason, error: failure))
        }
    }

    func send(_ text: String) { self.outgoing.yield(.text(text)) }
    func send(frame: WebSocketOutboundWriter.OutboundFrame) { self.outgoing.yield(frame) }
    func request(_ id: Int, _ method: String, _ params: JSONValue = [:]) { self.send(envelope(id: id, method: method, params: params)) }

    /// The next message, parsed; fails if the socket closes first or nothing comes in time.
    func next(timeout: Duration = .seconds(20)) async throws -> JSONValue {
        switch try await self.nextEvent(timeout: timeout) {
        case .message(let text): return try JSONParser.parse(text)
        case .closed(let code, _, let error): throw TestFailure("the WebSocket closed (code \(code.map(String.init) ?? "none"), \(error ?? "")) while a message was awaited")
        }
    }

    /// The next message with this id (others are dropped).
    func reply(to id: Int, timeout: Duration = .seconds(20)) async throws -> JSONValue {
        while true {
            let message = try await self.next(timeout: timeout)
            if message["id"] == .int(Int64(id)) { return message }
        }
    }

    func nextEvent(timeout: Duration = .seconds(20)) async throws -> Event {
        guard let event = await self.inbox.next(timeout: timeout) else { throw TestFailure("nothing came on the WebSocket within \(timeout); the gateway's log:\n\(self.gatewayLog())") }
        return event
    }

    /// Waits for the gateway to close the socket; its close code.
    func waitForClose(timeout: Duration = .seconds(20)) async throws -> Int? {
        try await self.waitForCloseFrame(timeout: timeout).code
    }

    /// The gateway's close frame: its code and reason.
    func waitForCloseFrame(timeout: Duration = .seconds(20)) async throws -> (code: Int?, reason: String?) {
        while true {
            if case .closed(let code, let reason, _) = try await self.nextEvent(timeout: timeout) { return (code, reason) }
        }
    }

    func close() async {
        self.outgoing.finish()
        await self.task.value
    }
}

/// Events as they arrive, taken one at a time, each wait bounded.
final class Inbox: Sendable {
    private let state = Mutex<(events: [DeviceWebSocket.Event], waiter: (id: UUID, continuation: CheckedContinuation<DeviceWebSocket.Event?, Never>)?)>(([], nil))

    func push(_ event: DeviceWebSocket.Event) {
        let waiter = self.state.withLock { state -> CheckedContinuation<DeviceWebSocket.Event?, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter.continuation
            }
            state.events.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    func next(timeout: Duration) async -> DeviceWebSocket.Event? {
        let id = UUID()
        let timer = Task {
            try? await Task.sleep(for: timeout)
            let waiter = self.state.withLock { state -> CheckedContinuation<DeviceWebSocket.Event?, Never>? in
                guard let waiter = state.waiter, waiter.id == id else { return nil }
                state.waiter = nil
                return waiter.continuation
            }
            waiter?.resume(returning: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = self.state.withLock { state -> DeviceWebSocket.Event? in
                if !state.events.isEmpty { return state.events.removeFirst() }
                state.waiter = (id, continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// The gateway's key checked against the published pin with curl (what a pinning client
/// does before trusting the connection).
enum PinCheck {
    static func verify(_ stack: GatewayStack) async throws {
        let reply = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        guard reply.exitCode == 0 else { throw TestFailure("the gateway's key does not match its pin: \(reply.stderr)") }
    }
}
