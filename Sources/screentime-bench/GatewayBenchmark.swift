import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PairingAPI
import PushAPI
import RPCClient
import RPCCore
import ServiceKit
import StoreAPI
import Synchronization

/// A store, a push service and the gateway on loopback; devices on TLS WebSockets through
/// the gateway (round trips: SwiftNIO clients in this process, ``BenchWebSocket``; the
/// listening devices: C clients, ``CWebSocketDevices``, unless `--swift-devices`). Timed: `rpc.ping`
/// and `store.fetch` round trips through the gateway beside the same calls on the Unix
/// socket; TLS handshakes per second; the gateway's memory per idle TLS WebSocket; modify →
/// notification with 1,000 and 10,000 devices listening through the gateway, beside a
/// device listening on the push service's Unix socket in the same rounds. The framework
/// floor, measured in the same run: a bare SwiftNIO TLS WebSocket echo server
/// (``NIOWebSocketEchoServer``) with the gateway's key and TLS settings.
struct GatewayBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Benchmarks screentime-gatewayd: round trips over TLS WebSocket vs the Unix socket, handshakes, memory per WebSocket, notifications to 1,000 and 10,000 devices.",
        discussion: """
            10,000 devices hold about 10,200 open files in the gateway (a TLS socket each, and \
            a connection to the push service per 64 of them) and 10,000 in their clients: the \
            hard limit (ulimit -Hn) is raised when run as root; otherwise the run measures \
            as many devices as fit, and says so.

            The listening devices are C clients (Benchmarks/floor/wsclients.c: OpenSSL, \
            epoll, one thread; compiled with cc, linked with libssl-dev), in both the \
            gateway's figures and the floor's: the devices share the machine's cores with the \
            servers they measure, and a phone spends its own CPU, so they cost as little as a \
            client can. --swift-devices uses SwiftNIO clients in this process instead (about \
            1.5 times the CPU per notification), for comparison.
            """
    )

    @Option(parsing: .upToNextOption, help: "Device counts listening through the gateway, ascending.")
    var devices: [Int] = [1000, 10_000]

    @Option(help: "Round trips timed for each latency figure.")
    var iterations: Int = 3000

    @Option(help: "Changes timed at the smallest device count (fewer as devices grow, at least 20).")
    var rounds: Int = 100

    @Option(help: "Idle WebSockets opened for the memory figure (after 200 to warm up).")
    var idle: Int = 2000

    @Option(help: "Seconds of each handshake run.")
    var seconds: Double = 5

    @Flag(help: "Listening devices on SwiftNIO clients in this process instead of the C clients.")
    var swiftDevices = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard !self.devices.isEmpty, self.devices.allSatisfy({ $0 >= 1 }), self.devices == self.devices.sorted() else {
            throw ValidationError("--devices takes counts of at least 1, ascending")
        }
        guard self.rounds >= 20 else { throw ValidationError("--rounds must be at least 20") }
        guard self.iterations >= 100, self.idle >= 10 else { throw ValidationError("--iterations must be at least 100 and --idle at least 10") }
    }

    func run() async throws {
        let quick = self.common.quick
        var levels = quick ? [200] : self.devices
        let iterations = quick ? 500 : self.iterations
        let idle = quick ? 300 : self.idle
        let seconds = quick ? 1 : self.seconds
        // The gateway holds a descriptor per listening device (its TLS socket) and one per
        // 64 (their shared connection to the push service): the most demanding process.
        let needed = { (devices: Int) in devices + (devices + 63) / 64 + Self.spareFiles }
        let openFiles = OpenFiles.raise(to: needed(levels.last!))
        say("open files: \(openFiles) a process (ulimit -n; the services inherit it)")
        let fitting = (openFiles - Self.spareFiles) * 64 / 65
        if levels.last! > fitting {
            say("  \(levels.last!) devices need \(needed(levels.last!)) open files in the gateway; the hard limit is \(openFiles) and cannot be raised here (ulimit -Hn as root, LimitNOFILE=): measuring \(fitting) instead")
            levels = levels.filter { $0 < fitting } + [fitting]
        }
        let most = levels.last!

        let services = try BenchServices(self.common, benchmark: "gateway")
        defer { services.stop() }
        let work = services.work
        let devicesBinary = self.swiftDevices ? nil : try CWebSocketDevices.binary(workDirectory: work)
        let store = try services.launch("screentime-stored")
        let push = try services.launch("screentime-pushd", ["--max-connections", "\(most + 500)"])
        // Loopback is one address: the per-address limit must admit every device.
        let gateway = try services.launch("screentime-gatewayd", [
            "--listen", "127.0.0.1:0", "--host", "localhost", "--host", "127.0.0.1",
            "--max-connections", "\(most + idle + 1000)", "--max-connections-per-address", "\(most + idle + 1000)",
        ])
        let endpoint = try await Self.endpoint(work: work, gateway: gateway)
        let port = try Self.port(endpoint)
        say("gateway on port \(port), pin sha256//\(endpoint.pin)")

        let storeClient = services.client("store")
        _ = try await storeClient.call(StoreMethods.createFamily, CreateFamilyParams(family: PushBenchmark.family))
        _ = try await storeClient.call(StoreMethods.createZone, ZoneParams(family: PushBenchmark.family, zone: PushBenchmark.zone))
        // Device 0 makes the round trips and listens directly; the others listen through the gateway.
        let tokens = (0...max(most, idle + 200)).map { "gateway-bench-\($0)-\(UUID().uuidString)" }
        say("\(tokens.count) device credentials")
        try await concurrently(Array(tokens.enumerated()), width: 32) { index, token in
            _ = try await storeClient.call(StoreMethods.putCredential, PutCredentialParams(
                family: PushBenchmark.family, deviceId: "device-\(index)", role: .coParent, tokenSHA256: SHA256Hex.of(token)))
        }
        let writer = ChangeWriter(store: storeClient)
        _ = try await writer.change()  // the record the fetches read

        let group = MultiThreadedEventLoopGroup.singleton
        let context = try BenchWebSocket.clientContext()
        var figures: [Figure] = []

        // Round trips, one at a time on one connection: the Unix socket (the Swift client),
        // the gateway (a TLS WebSocket), the bare NIO TLS WebSocket echo.
        let fetchParams = FetchParams(family: PushBenchmark.family, zone: PushBenchmark.zone, recordNames: ["session"])
        let ping = #"{"id":1,"method":"rpc.ping"}"#
        let fetch = String(decoding: try RPCJSON.makeEncoder().encode(
            ["id": JSONValue.int(1), "method": "store.fetch", "params": try JSONValue(encoding: fetchParams)]), as: UTF8.self)
        let unix = RPCClient(configuration: ClientConfiguration(socketPath: work + "/store.sock", auth: Auth(token: tokens[0])))
        let unixPing = try await Self.timed(iterations) { _ = try await unix.call("rpc.ping") }
        let unixFetch = try await Self.timed(iterations) { _ = try await unix.call(StoreMethods.fetch, fetchParams) }
        await unix.close()
        let socket = try await BenchWebSocket.connect(group: group, port: port, token: tokens[0], context: context)
        let reply = try await socket.call(fetch)
        guard String(buffer: reply).contains("\"result\"") else { throw BenchError("store.fetch through the gateway failed: \(String(buffer: reply))") }
        let gatewayPing = try await Self.timed(iterations) { _ = try await socket.call(ping) }
        let gatewayFetch = try await Self.timed(iterations) { _ = try await socket.call(fetch) }
        await socket.close()
        let certificate = endpoint.certificate
        let key = (certificate as NSString).deletingLastPathComponent + "/key.pem"
        let rounds = { (level: Int) in max(4, max(20, level >= 10_000 ? self.rounds / 4 : level >= 1000 ? self.rounds / 2 : self.rounds) / (quick ? 5 : 1)) }
        let (echo, echoMemory, echoHandshakes, fanOutFloor) = try await NIOWebSocketEchoServer.with(certificate: certificate, key: key) { server, echoPort in
            let client = try await BenchWebSocket.connect(group: group, port: echoPort, path: "/", token: nil, context: context)
            let echo = try await Self.timed(iterations) { _ = try await client.call(ping) }
            await client.close()
            let handshakes = try await TLSHandshakes.perSecond(group: group, port: echoPort, concurrency: 16, seconds: seconds)
            let memory = try await Self.memoryPerSocket(pid: server.processIdentifier, count: idle, tokens: nil) { token in
                try await BenchWebSocket.connect(group: group, port: echoPort, path: "/", token: token, context: context)
            }
            let fanOut = try await Self.fanOutFloor(levels: levels, rounds: rounds, port: echoPort, server: server.processIdentifier, group: group,
                                                    context: context, devices: devicesBinary, work: work, messageSize: try Self.notificationSize())
            return (echo, memory, handshakes, fanOut)
        }
        for (name, through, direct) in [("rpc.ping", gatewayPing, unixPing), ("store.fetch", gatewayFetch, unixFetch)] {
            let bound = 2 * direct.p50 + 50
            figures.append(Figure(name: "\(name), gateway TLS WebSocket, p50", value: through.p50, unit: "µs",
                                  comparison: "Unix socket p50", comparisonValue: direct.p50, ratio: through.p50 / direct.p50,
                                  target: "≤ 2x + 50 µs (\(Report.format(bound)) µs)", met: through.p50 <= bound))
            figures.append(Figure(name: "\(name), gateway TLS WebSocket, p99", value: through.p99, unit: "µs",
                                  comparison: "Unix socket p99", comparisonValue: direct.p99, ratio: through.p99 / direct.p99))
        }
        figures.append(Figure(name: "rpc.ping, gateway vs framework floor, p50", value: gatewayPing.p50, unit: "µs",
                              comparison: "bare NIO TLS WebSocket echo p50", comparisonValue: echo.p50, ratio: gatewayPing.p50 / echo.p50))
        say("  round trips: ping \(Report.format(gatewayPing.p50)) µs via the gateway, \(Report.format(unixPing.p50)) µs on the Unix socket, echo floor \(Report.format(echo.p50)) µs")

        // Full TLS handshakes (connect, handshake, close), 16 at a time.
        let handshakes = try await TLSHandshakes.perSecond(group: group, port: port, concurrency: 16, seconds: seconds)
        figures.append(Figure(name: "TLS handshakes, 16 at a time", value: handshakes, unit: "handshakes/s (full, no resumption)",
                              comparison: "bare NIO TLS server", comparisonValue: echoHandshakes, ratio: handshakes / echoHandshakes))
        say("  handshakes: \(Report.format(handshakes))/s, floor \(Report.format(echoHandshakes))/s")

        // Memory: what idle, authenticated WebSockets add to the gateway's resident memory.
        let perSocket = try await Self.memoryPerSocket(pid: gateway.process.processIdentifier, count: idle, tokens: Array(tokens[1...])) { token in
            try await BenchWebSocket.connect(group: group, port: port, token: token, context: context)
        }
        figures.append(Figure(name: "memory per idle TLS WebSocket", value: perSocket, unit: "KiB (\(idle) opened)",
                              comparison: "bare NIO TLS WebSocket", comparisonValue: echoMemory, ratio: perSocket / echoMemory,
                              target: "≤ 36 KiB", met: perSocket <= 36))
        say("  memory per idle WebSocket: \(Report.format(perSocket)) KiB, floor \(Report.format(echoMemory)) KiB")

        // Notifications: devices subscribe and listen through the gateway; device 0 listens
        // on the push service's Unix socket, for the same changes.
        let arrivals = Arrivals()
        let direct = Arrivals()
        let directClient = services.client("push", auth: Auth(token: tokens[0]))
        _ = try await directClient.call(PushMethods.subscribe, Self.subscription)
        let directListener = Task {
            do {
                for try await event in directClient.stream(PushMethods.listen, ListenParams()) {
                    guard case .item(let notification) = event, case .int(let round)? = notification.fields?["totalSeconds"] else { continue }
                    direct.arrived(round: round, at: Monotonic.nanoseconds())
                }
            } catch {
                say("  the direct listener ended: \(error)")
            }
        }
        defer { directListener.cancel() }
        let subscribe = String(decoding: try RPCJSON.makeEncoder().encode(
            ["id": JSONValue.int(1), "method": "push.subscribe", "params": try JSONValue(encoding: Self.subscription)]), as: UTF8.self)
        let listen = #"{"id":2,"method":"push.listen","params":{}}"#
        let listeners = Listeners()
        var cDevices: [CWebSocketDevices] = []
        defer { for devices in cDevices { devices.stop() } }
        var connected = 0
        for level in levels {
            let joining = Array(tokens[(connected + 1)...level])
            let opened = ContinuousClock.now
            if let devicesBinary {
                cDevices.append(try await CWebSocketDevices.start(binary: devicesBinary, port: port, path: "/v1/ws", tokens: joining, count: joining.count,
                                                                   work: work, call: subscribe, send: listen, arrivals: arrivals))
            } else {
                try await concurrently(joining, width: 64) { token in
                    let socket = try await BenchWebSocket.connect(group: group, port: port, token: token, context: context) { message in
                        if let round = Self.round(in: message) { arrivals.arrived(round: round, at: Monotonic.nanoseconds()) }
                    }
                    let subscribed = try await socket.call(subscribe)
                    guard String(buffer: subscribed).contains("\"result\"") else { throw BenchError("push.subscribe through the gateway failed: \(String(buffer: subscribed))") }
                    socket.send(listen)
                    listeners.add(socket)
                }
            }
            connected = level
            var processes = ["gateway": [gateway.process.processIdentifier], "push": [push.process.processIdentifier],
                             "store": [store.process.processIdentifier]]
            if cDevices.isEmpty {
                processes["bench client"] = [getpid()]
            } else {
                processes["devices (C)"] = cDevices.map(\.process.processIdentifier)
                processes["bench"] = [getpid()]
            }
            let cpu = CPUTime(pids: processes)
            say("  \(level) devices listening through the gateway (\(Report.format((ContinuousClock.now - opened).seconds)) s to connect)")
            try await PushBenchmark.settle(level, writer: writer, arrivals: arrivals)
            let before = cpu.sample()
            let (through, unixListener) = level == most
                ? try await services.phase("notifications to \(level) devices", [gateway, push]) {
                    try await Self.latency(level, rounds: rounds(level), writer: writer, arrivals: arrivals, direct: direct)
                }
                : try await Self.latency(level, rounds: rounds(level), writer: writer, arrivals: arrivals, direct: direct)
            let spent = cpu.since(before, per: rounds(level))
            // The 10,000-device target also holds for a run capped a little below it by the open-files limit.
            let target: Double? = level == 1000 ? 30 : level >= 9000 ? 250 : nil
            let (floor, floorCPU) = fanOutFloor[level]!
            figures.append(Figure(name: "notification, \(level) via gateway, p50", value: through.p50 / 1000, unit: "ms",
                                  comparison: "bare NIO TLS WebSocket fan-out p50", comparisonValue: floor.p50 / 1000, ratio: through.p50 / floor.p50))
            figures.append(Figure(name: "notification, \(level) via gateway, p99", value: through.p99 / 1000, unit: "ms",
                                  comparison: "bare NIO TLS WebSocket fan-out p99", comparisonValue: floor.p99 / 1000, ratio: through.p99 / floor.p99,
                                  target: target.map { "< \(Int($0)) ms" }, met: target.map { through.p99 / 1000 < $0 }))
            figures.append(Figure(name: "  the same change, \(level) devices, 1 on push's Unix socket, p50 / p99", value: unixListener.p50 / 1000, unit: "ms / \(Report.format(unixListener.p99 / 1000)) ms"))
            figures.append(Figure(name: "  CPU per change, \(level) devices", value: spent.values.reduce(0, +), unit: "ms (" + spent.sorted { $0.value > $1.value }
                .map { "\($0.key) \(Report.format($0.value))" }.joined(separator: ", ") + ")"))
            if level >= 9000 {
                // What one device's notification costs each service (ms per change over the devices, in µs).
                for (service, bound) in [("gateway", 15.0), ("push", 8.0)] {
                    let perNotification = (spent[service] ?? .nan) * 1000 / Double(level)
                    // The gateway's beside the bare server's: a TLS record written to each socket.
                    let floor = service == "gateway" ? floorCPU : nil
                    figures.append(Figure(name: "  CPU per notification, \(level) devices, \(service)", value: perNotification, unit: "µs",
                                          comparison: floor.map { _ in "bare NIO TLS WebSocket fan-out" }, comparisonValue: floor,
                                          ratio: floor.map { perNotification / $0 }, target: "≤ \(Int(bound)) µs", met: perNotification <= bound))
                }
            }
            say("  \(level) devices: p50 \(Report.format(through.p50 / 1000)) ms, p99 \(Report.format(through.p99 / 1000)) ms; fan-out floor p99 \(Report.format(floor.p99 / 1000)) ms; direct p99 \(Report.format(unixListener.p99 / 1000)) ms; CPU per change \(spent.map { "\($0.key) \(Report.format($0.value)) ms" }.joined(separator: ", "))")
        }
        let averages = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).compactMap { Double($0) }
        let load = averages.map { String(format: "%.2f", $0) }.joined(separator: " ")
        // The machine may be shared: how busy it was belongs beside the figures.
        figures.append(Figure(name: "load average at the end", value: averages.first ?? .nan,
                              unit: "(1 min; 5 and 15 min: \(averages.dropFirst().map { String(format: "%.2f", $0) }.joined(separator: ", ")); \(ProcessInfo.processInfo.activeProcessorCount) cores)"))
        Report.print("screentime-gatewayd (\(levels.map(String.init).joined(separator: "/")) devices, load average \(load)\(quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
        directListener.cancel()
        await listeners.closeAll()
        await directClient.close()
        await storeClient.close()
    }

    /// Descriptors of the gateway's own beside its devices' (listening socket, event loops,
    /// its connections to the services, logs).
    static let spareFiles = 64

    static let subscription = SubscribeParams(
        subscriptionId: "bench", kind: .query, zone: PushBenchmark.zone, recordType: RecordTypes.usageRecord, firesOn: [.create, .update],
        notification: NotificationSpec(includeKeys: ["totalSeconds"], collapseKey: "bench"))

    /// The gateway's endpoint file, once it has written it (it is listening then).
    static func endpoint(work: String, gateway: LaunchedService) async throws -> GatewayEndpoint {
        let path = GatewayEndpoint.path(stateDirectory: work + "/state")
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            guard gateway.process.isRunning else { throw BenchError("screentime-gatewayd exited (status \(gateway.process.terminationStatus))") }
            if let endpoint = try? GatewayEndpoint.read(from: path) { return endpoint }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchError("screentime-gatewayd wrote no \(path) within 60 s")
    }

    static func port(_ endpoint: GatewayEndpoint) throws -> Int {
        guard let url = endpoint.urls.first, let port = Int(url.split(separator: ":").last ?? "") else { throw BenchError("no port in \(endpoint.urls)") }
        return port
    }

    /// The size of a notification as the gateway writes it to a device here: the reply
    /// around one of this benchmark's notifications.
    static func notificationSize() throws -> Int {
        let now = Date()
        let notification = PushNotification(
            seq: 10_000, family: PushBenchmark.family, reason: .recordUpdated, subscriptionId: Self.subscription.subscriptionId,
            zone: PushBenchmark.zone, recordType: RecordTypes.usageRecord, recordName: "session", changeSeq: 100_000,
            fields: ["totalSeconds": .int(100)], collapseKey: "bench", createdAt: now, expiresAt: now.addingTimeInterval(86_400))
        return try ReplyEncoding.resultBytes(id: .int(2), notification, continues: true).count
    }

    /// The floor of a notification's fan-out: the bare NIO TLS WebSocket server writes one
    /// message of `messageSize` bytes (a notification's, padded) to every open socket
    /// (``NIOWebSocketEchoServer``'s broadcast), timed from the request to each arrival;
    /// `rounds(level)` times at each level. With each level's latencies, the server's CPU
    /// per message written (µs).
    static func fanOutFloor(levels: [Int], rounds: (Int) -> Int, port: Int, server: Int32, group: any EventLoopGroup, context: NIOSSLContext,
                            devices devicesBinary: String?, work: String, messageSize: Int) async throws -> [Int: (Samples, Double)] {
        let arrivals = Arrivals()
        let sockets = Listeners()
        var cDevices: [CWebSocketDevices] = []
        defer { for devices in cDevices { devices.stop() } }
        let trigger = try await BenchWebSocket.connect(group: group, port: port, path: "/", token: nil, context: context)
        var floors: [Int: (Samples, Double)] = [:]
        let cpu = CPUTime(pids: ["floor": [server]])
        var connected = 0
        var round: Int64 = 0
        for level in levels {
            if let devicesBinary {
                cDevices.append(try await CWebSocketDevices.start(binary: devicesBinary, port: port, path: "/", tokens: nil, count: level - connected,
                                                                   work: work, arrivals: arrivals))
            } else {
                try await concurrently(Array(connected..<level), width: 64) { _ in
                    sockets.add(try await BenchWebSocket.connect(group: group, port: port, path: "/", token: nil, context: context) { message in
                        if let round = Self.round(in: message) { arrivals.arrived(round: round, at: Monotonic.nanoseconds()) }
                    })
                }
            }
            connected = level
            var samples = Samples()
            let before = cpu.sample()
            for _ in 0..<rounds(level) {
                round += 1
                arrivals.expect(round: round)
                let sent = Monotonic.nanoseconds()
                let message = #"{"totalSeconds":\#(round),"padding":""}"#
                let padding = String(repeating: "x", count: max(0, messageSize - message.utf8.count))
                trigger.send("broadcast:" + #"{"totalSeconds":\#(round),"padding":"\#(padding)"}"#)
                guard await arrivals.wait(for: level, timeout: .seconds(30)) else {
                    throw BenchError("only \(arrivals.count) of \(level) sockets of the bare NIO server received broadcast \(round) within 30 s")
                }
                for arrived in arrivals.times { samples.add(.nanoseconds(Int64(arrived) - Int64(min(arrived, sent)))) }
            }
            let perMessage = (cpu.since(before, per: rounds(level))["floor"] ?? .nan) * 1000 / Double(level)
            floors[level] = (samples, perMessage)
            say("  fan-out floor, \(level) sockets: p50 \(Report.format(samples.p50 / 1000)) ms, p99 \(Report.format(samples.p99 / 1000)) ms, \(Report.format(perMessage)) µs of CPU per message")
        }
        await trigger.close()
        await sockets.closeAll()
        return floors
    }

    /// `count` calls, one at a time; the first tenth warms up.
    static func timed(_ count: Int, _ body: () async throws -> Void) async throws -> Samples {
        var samples = Samples()
        for i in 0..<count {
            let started = ContinuousClock.now
            try await body()
            if i >= count / 10 { samples.add(ContinuousClock.now - started) }
        }
        return samples
    }

    /// KiB of resident memory that `count` open, idle WebSockets add to process `pid`
    /// (after 200 more, opened first, which also grow the allocator's arenas).
    static func memoryPerSocket(pid: Int32, count: Int, tokens: [String]?, _ open: @escaping @Sendable (String?) async throws -> BenchWebSocket) async throws -> Double {
        let sockets = Listeners()
        defer { Task { await sockets.closeAll() } }
        let warm = (0..<200).map { tokens?[$0] }
        try await concurrently(warm, width: 32) { sockets.add(try await open($0)) }
        try await Task.sleep(for: .seconds(1))
        let before = try ProcessMemory.residentBytes(pid: pid)
        let measured = (200..<(200 + count)).map { tokens?[$0] }
        try await concurrently(measured, width: 32) { sockets.add(try await open($0)) }
        try await Task.sleep(for: .seconds(2))
        let after = try ProcessMemory.residentBytes(pid: pid)
        await sockets.closeAll()
        return Double(after - before) / Double(count) / 1024
    }

    /// Each round: a change, then its arrival at every device through the gateway and at
    /// the one on the Unix socket; both timed from `store.modify` returning.
    static func latency(_ listening: Int, rounds: Int, writer: ChangeWriter, arrivals: Arrivals, direct: Arrivals) async throws -> (Samples, Samples) {
        var through = Samples()
        var unix = Samples()
        for _ in 0..<rounds {
            let round = writer.next
            arrivals.expect(round: round)
            direct.expect(round: round)
            _ = try await writer.change()
            let returned = Monotonic.nanoseconds()
            guard await arrivals.wait(for: listening, timeout: .seconds(30)), await direct.wait(for: 1, timeout: .seconds(30)) else {
                throw BenchError("only \(arrivals.count) of \(listening) devices received change \(round) within 30 s")
            }
            for arrived in arrivals.times { through.add(.nanoseconds(Int64(arrived) - Int64(min(arrived, returned)))) }
            for arrived in direct.times { unix.add(.nanoseconds(Int64(arrived) - Int64(min(arrived, returned)))) }
        }
        return (through, unix)
    }

    /// The number after `"totalSeconds":` in a notification, found in the bytes.
    static func round(in message: ByteBuffer) -> Int64? {
        let key = Array(#""totalSeconds":"#.utf8)
        return message.withUnsafeReadableBytes { bytes -> Int64? in
            guard bytes.count > key.count else { return nil }
            var index = 0
            outer: while index + key.count < bytes.count {
                for offset in 0..<key.count where bytes[index + offset] != key[offset] {
                    index += 1
                    continue outer
                }
                var value: Int64 = 0
                var cursor = index + key.count
                var digits = 0
                while cursor < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[cursor]) {
                    value = value * 10 + Int64(bytes[cursor] - UInt8(ascii: "0"))
                    cursor += 1
                    digits += 1
                }
                return digits > 0 ? value : nil
            }
            return nil
        }
    }
}

/// Open WebSockets, closed together.
final class Listeners: Sendable {
    private let sockets = Mutex<[BenchWebSocket]>([])
    func add(_ socket: BenchWebSocket) { self.sockets.withLock { $0.append(socket) } }
    func closeAll() async {
        let all = self.sockets.withLock { sockets in
            defer { sockets = [] }
            return sockets
        }
        try? await concurrently(all, width: 256) { await $0.close() }
    }
}

/// The open files limit of a process, raised for the connections a benchmark holds.
enum OpenFiles {
    /// Raises the soft limit to at least `needed`, and the hard one if it is lower (which
    /// needs CAP_SYS_RESOURCE: root, outside a container that drops it); the limit now in
    /// force, which may be less than `needed`.
    static func raise(to needed: Int) -> Int {
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_max < rlim_t(needed) {
            var raised = limit
            raised.rlim_max = rlim_t(needed)
            raised.rlim_cur = rlim_t(needed)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 {
                say("raised the hard open files limit from \(limit.rlim_max) to \(needed)")
            }
        }
        return OpenFileLimit.raiseToHard()
    }
}
