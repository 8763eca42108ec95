import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PushAPI
import RPCClient
import RPCCore
import ScreenTimeKit
import StoreAPI

/// ScreenTimeKit's WebSocket transport, as an app uses it, through the real gateway: a
/// round trip (`rpc.ping`, one at a time), and notifications received per second by one
/// device (a burst of `push.notify`, 16 at a time), each beside a bare SwiftNIO TLS WebSocket
/// client doing the same on the same gateway in the same run (the floor: what the kit's
/// own layers cost is the difference).
struct KitBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kit",
        abstract: "Benchmarks ScreenTimeKit's WebSocket transport through the gateway: round trip and notifications per second for one device, beside a bare NIO client."
    )

    @Option(help: "Round trips timed.")
    var iterations: Int = 3000

    @Option(help: "Notifications in each device's burst.")
    var burst: Int = 1000

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard self.iterations >= 100 else { throw ValidationError("--iterations must be at least 100") }
        guard (10...1000).contains(self.burst) else { throw ValidationError("--burst must be between 10 and 1000 (a listener is cut off 1024 behind)") }
    }

    func run() async throws {
        let iterations = self.common.quick ? 300 : self.iterations
        let burst = self.common.quick ? 100 : self.burst
        let services = try BenchServices(self.common, benchmark: "kit")
        defer { services.stop() }
        let work = services.work
        try services.launch("screentime-stored")
        let push = try services.launch("screentime-pushd")
        let gateway = try services.launch("screentime-gatewayd", [
            "--listen", "127.0.0.1:0", "--host", "localhost", "--host", "127.0.0.1",
        ])
        let endpoint = try await GatewayBenchmark.endpoint(work: work, gateway: gateway)
        let port = try GatewayBenchmark.port(endpoint)
        guard let pin = KeyPin(endpoint.pin) else { throw BenchError("the gateway's pin \(endpoint.pin) is not a pin") }

        let storeClient = services.client("store")
        _ = try await storeClient.call(StoreMethods.createFamily, CreateFamilyParams(family: PushBenchmark.family))
        _ = try await storeClient.call(StoreMethods.createZone, ZoneParams(family: PushBenchmark.family, zone: PushBenchmark.zone))
        let tokens = (0..<2).map { "kit-bench-\($0)-\(UUID().uuidString)" }
        for (index, token) in tokens.enumerated() {
            _ = try await storeClient.call(StoreMethods.putCredential, PutCredentialParams(
                family: PushBenchmark.family, deviceId: "device-\(index)", role: .coParent, tokenSHA256: SHA256Hex.of(token)))
        }
        var figures: [Figure] = []

        // The kit: device 0.
        let kitToken = tokens[0]
        let transport = WebSocketTransport(configuration: .init(urls: ["https://127.0.0.1:\(port)"], pin: pin, token: { kitToken }))
        let auth = Auth(token: kitToken)
        _ = try await transport.call(TransportRequest(method: "rpc.ping", auth: auth))
        let kitPing = try await GatewayBenchmark.timed(iterations) { _ = try await transport.call(TransportRequest(method: "rpc.ping", auth: auth)) }
        _ = try await transport.call(PushMethods.subscribe, GatewayBenchmark.subscription, auth: auth)
        let kitCount = Receipts()
        let kitListener = Task {
            for try await event in transport.stream(PushMethods.listen, ListenParams(), auth: auth) {
                if case .item = event { kitCount.arrived("") }
            }
        }
        defer { kitListener.cancel() }

        // The floor: device 1 on a bare NIO client.
        let group = MultiThreadedEventLoopGroup.singleton
        let context = try BenchWebSocket.clientContext()
        let floorCount = Receipts()
        let socket = try await BenchWebSocket.connect(group: group, port: port, token: tokens[1], context: context)
        let ping = #"{"id":1,"method":"rpc.ping"}"#
        let floorPing = try await GatewayBenchmark.timed(iterations) { _ = try await socket.call(ping) }
        await socket.close()
        let listener = try await BenchWebSocket.connect(group: group, port: port, token: tokens[1], context: context) { message in
            if String(buffer: message).contains("\"continues\":true") { floorCount.arrived("") }
        }
        let subscribe = String(decoding: try RPCJSON.makeEncoder().encode(
            ["id": JSONValue.int(1), "method": "push.subscribe", "params": try JSONValue(encoding: GatewayBenchmark.subscription)]), as: UTF8.self)
        listener.send(subscribe)
        listener.send(#"{"id":2,"method":"push.listen","params":{}}"#)

        // Each device in turn gets a burst of notifications, sent 16 at a time by a local
        // service: what one device receives per second.
        let pushClient = services.client("push")
        let rate = { @Sendable (deviceId: String, counter: Receipts) async throws -> Double in
            counter.expectCount(burst)
            let started = Monotonic.nanoseconds()
            try await concurrently(Array(0..<burst), width: 16) { index in
                _ = try await pushClient.call(PushMethods.notify, NotifyParams(family: PushBenchmark.family, deviceId: deviceId, data: ["n": .int(Int64(index))]))
            }
            guard await counter.wait(timeout: .seconds(120)) else {
                throw BenchError("\(deviceId) received \(counter.count) of \(burst) notifications within 2 minutes")
            }
            return Double(burst) / (Double(counter.last - started) / 1e9)
        }
        _ = try await rate("device-0", kitCount)  // warm up
        _ = try await rate("device-1", floorCount)
        let kitRate = try await services.phase("a burst of notifications to one device", [gateway, push]) { try await rate("device-0", kitCount) }
        let floorRate = try await rate("device-1", floorCount)
        await pushClient.close()
        await listener.close()
        await transport.close()
        await storeClient.close()

        figures.append(Figure(name: "rpc.ping through the kit, p50", value: kitPing.p50, unit: "µs",
                              comparison: "bare NIO TLS WebSocket client p50", comparisonValue: floorPing.p50, ratio: floorPing.p50 / kitPing.p50))
        figures.append(Figure(name: "rpc.ping through the kit, p99", value: kitPing.p99, unit: "µs",
                              comparison: "bare NIO TLS WebSocket client p99", comparisonValue: floorPing.p99, ratio: floorPing.p99 / kitPing.p99))
        figures.append(Figure(name: "notifications received by one device (kit)", value: kitRate, unit: "notifications/s",
                              comparison: "bare NIO TLS WebSocket client, same burst", comparisonValue: floorRate, ratio: kitRate / floorRate))
        say("  ping p50 \(Report.format(kitPing.p50)) µs (floor \(Report.format(floorPing.p50))); notifications \(Report.format(kitRate))/s (floor \(Report.format(floorRate))/s)")
        Report.print("ScreenTimeKit through the gateway\(self.common.quick ? " (quick mode)" : "")", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
    }
}
