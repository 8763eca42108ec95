import Foundation
import ProcessSpawn
import Glibc
import PairingAPI
import StackSupport
import Testing
import TestSupport

/// The gateway handed its TCP socket as systemd does (systemd-socket-activate): started by
/// the first HTTPS connection, serving on the inherited descriptor.
@Suite("Gateway: socket activation", .serialized, .timeLimit(.minutes(3)))
struct ActivationTests {
    @Test("the first HTTPS connection starts it on the inherited socket; it answers and stops on SIGTERM")
    func activatedByFirstConnection() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let port = try FreePort.pick()
        let gateway = try ServiceProcess(
            executable: "/usr/bin/systemd-socket-activate",
            arguments: ["-l", "127.0.0.1:\(port)", "--fdname=gateway", Binaries.path("screentime-gatewayd"),
                        "--runtime-dir", harness.directory.path, "--state-dir", harness.state, "--log-level", "debug", "--host", "127.0.0.1"],
            socketPath: "", logPath: harness.directory.file("gateway-activated.log"), environment: [:])
        defer { gateway.stopNow() }
        try await waitUntil("systemd-socket-activate listens", detail: gateway.log) { gateway.log.contains("Listening on") }
        #expect(!FileManager.default.fileExists(atPath: GatewayEndpoint.path(stateDirectory: harness.state)), "nothing ran before the first connection")
        // curl -k: the first connection is what starts it; its pin is only known after.
        let info = try await curl("https://127.0.0.1:\(port)/v1/info", pin: nil, caFile: nil, arguments: ["-k"])
        #expect(info.status == 200, "\(info.stderr)\n\(gateway.log)")
        #expect(gateway.log.contains("using sockets passed by systemd"))
        let endpoint = try #require(try GatewayEndpoint.read(from: GatewayEndpoint.path(stateDirectory: harness.state)))
        #expect(endpoint.urls == ["https://127.0.0.1:\(port)"])
        let pinned = try await curl("https://127.0.0.1:\(port)/healthz", pin: endpoint.pin, caFile: endpoint.certificate)
        #expect(pinned.json?["services"]?["store"] == "ok" && pinned.json?["services"]?["pairing"] == "ok", "\(pinned.body)")
        gateway.signal(SIGTERM)
        #expect(try await gateway.waitForExit() == 0)
        #expect(gateway.log.contains("stopped"))
    }
}

@Suite("Gateway: stopping", .serialized, .timeLimit(.minutes(3)))
struct StoppingTests {
    @Test("SIGTERM: an open WebSocket is closed cleanly, the gateway exits 0 and logs stopped")
    func drainsOnSigterm() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let socket = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
        socket.request(1, "push.listen")
        socket.request(2, "rpc.ping")
        #expect(try await socket.reply(to: 2)["result"]?["service"] == "gateway")
        stack.gateway.process.signal(SIGTERM)
        let code = try await socket.waitForClose()
        #expect(code == 1000 || code == 1001, "close code \(String(describing: code))")
        #expect(try await stack.gateway.process.waitForExit() == 0)
        #expect(stack.gateway.log.contains("stopping") && stack.gateway.log.contains("stopped"))
    }
}
