import Foundation
import Glibc
import NIOCore
import NIOWebSocket
import RPCCore
import StackSupport
import Testing
import TestSupport
import WSClient

/// What a hostile network sends: each gets a clear error or a closed connection, and the
/// gateway keeps serving.
@Suite("Gateway: hostile input", .serialized, .timeLimit(.minutes(3)))
struct HostileInputTests {
    @Test("plain HTTP, garbage, oversized heads and bodies, unknown paths, slow clients, binary frames, invalid UTF-8")
    func badInput() async throws {
        // A request timeout short enough for the slow client below, long enough for a TLS
        // handshake and an upgrade on a loaded two-core machine (1 s was not).
        let stack = try await GatewayStack.start(gatewayArguments: ["--request-timeout", "3", "--max-body-size", "4096", "--max-header-size", "4096", "--max-message-size", "4096"])
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let token = family.parentCredential.token

        func stillServing() async throws {
            let info = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
            #expect(info.status == 200, "the gateway stopped serving: \(info.stderr)\n\(stack.gateway.log.suffix(2000))")
            #expect(stack.gateway.isRunning)
        }

        // Plain HTTP on the TLS port: no HTTP answer, the connection closed.
        let plain = try await curl("http://127.0.0.1:\(stack.port)/v1/info", pin: nil, caFile: nil)
        #expect(plain.status == 0 && plain.exitCode != 0)
        try await stillServing()

        // Garbage bytes: closed.
        #expect(try RawTCP.closesAfter(sending: Array(repeating: 0x16, count: 5) + Array("garbage\r\n\r\n".utf8), port: stack.port))
        try await stillServing()

        // A slow client (connects, sends a byte, then nothing): closed at the request timeout.
        #expect(try RawTCP.closesAfter(sending: [0x16], port: stack.port))
        try await stillServing()

        // Oversized head: 400 and closed; oversized body: 413 with the wire's code.
        let bigHeader = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate,
                                 arguments: ["-H", "X-Padding: \(String(repeating: "a", count: 8192))"])
        #expect(bigHeader.status == 400 || bigHeader.status == 431 || bigHeader.status == 0)
        try await stillServing()
        let bigBody = try await curl(stack.url + "/v1/rpc", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: [
            "-H", "Authorization: Bearer \(token)", "--data-binary", envelope(id: 1, method: "store.whoami", params: ["pad": .string(String(repeating: "b", count: 8192))]),
        ])
        #expect(bigBody.status == 413 && bigBody.errorCode == "frame_too_large", "\(bigBody.status) \(bigBody.body)")
        try await stillServing()

        // Not JSON, not a request: 400 with the wire's codes.
        let notJSON = try await curl(stack.url + "/v1/rpc", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: ["--data-binary", "{nope"])
        #expect(notJSON.status == 400 && notJSON.errorCode == "invalid_json")
        let notRequest = try await curl(stack.url + "/v1/rpc", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: ["--data-binary", "[1,2]"])
        #expect(notRequest.status == 400 && notRequest.errorCode == "invalid_request")

        // Unknown path: 404 JSON, HSTS on it, nothing naming the server.
        let unknown = try await curl(stack.url + "/admin", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: ["-D", "/dev/stderr"])
        #expect(unknown.status == 404 && unknown.errorCode == "not_found")
        #expect(unknown.stderr.lowercased().contains("strict-transport-security: max-age="))
        #expect(!unknown.stderr.lowercased().contains("server:"))

        // A WebSocket binary frame: an error message, then closed (1003).
        let binary = try await DeviceWebSocket(stack: stack, token: token)
        binary.send(frame: .binary(ByteBuffer(bytes: [1, 2, 3])))
        #expect(try await binary.next()["error"]?["code"] == "invalid_frame")
        #expect(try await binary.waitForClose() == 1003)

        // Invalid UTF-8 in a text frame: closed (1007).
        let invalid = try await DeviceWebSocket(stack: stack, token: token)
        invalid.send(frame: .custom(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: [0x7B, 0xFF, 0xFE, 0x7D]))))
        #expect(try await invalid.waitForClose() == 1007)

        // A message over --max-message-size: closed (1009).
        let large = try await DeviceWebSocket(stack: stack, token: token)
        await large.send(envelope(id: 1, method: "store.whoami", params: ["pad": .string(String(repeating: "c", count: 8192))]))
        #expect(try await large.waitForClose() == 1009)

        // Garbage text on a WebSocket: an error reply, and the socket still serves.
        let garbage = try await DeviceWebSocket(stack: stack, token: token)
        garbage.send("not json")
        #expect(try await garbage.next()["error"]?["code"] == "invalid_json")
        garbage.request(7, "rpc.ping")
        #expect(try await garbage.reply(to: 7)["result"]?["service"] == "gateway")
        await garbage.close()
        try await stillServing()
    }

    @Test("a request sent in fragments is put together and answered; a continuation with no message begun (1002), fragments over --max-message-size together (1009) and fragments that are not UTF-8 together (1007) close the socket, and the gateway keeps serving")
    func fragmentedMessages() async throws {
        let stack = try await GatewayStack.start(gatewayArguments: ["--max-message-size", "4096"])
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let token = family.parentCredential.token
        func fragment(_ bytes: [UInt8], _ opcode: WebSocketOpcode, fin: Bool) -> WebSocketOutboundWriter.OutboundFrame {
            .custom(WebSocketFrame(fin: fin, opcode: opcode, data: ByteBuffer(bytes: bytes)))
        }

        // A request in three fragments, a character split between two of them: one reply.
        // Then a whole request on the same socket (taken on the event loop) still goes.
        let pieces = try await DeviceWebSocket(stack: stack, token: token)
        let request = Array(#"{"id":"é-3","method":"rpc.ping"}"#.utf8)
        let split = request.firstIndex(of: 0xC3)! + 1  // between the two bytes of "é"
        pieces.send(frame: fragment(Array(request[..<split]), .text, fin: false))
        pieces.send(frame: fragment(Array(request[split..<(split + 10)]), .continuation, fin: false))
        pieces.send(frame: fragment(Array(request[(split + 10)...]), .continuation, fin: true))
        let reply = try await pieces.next()
        #expect(reply["id"] == "é-3" && reply["result"]?["service"] == "gateway", "\(reply)")
        pieces.request(4, "rpc.ping")
        #expect(try await pieces.reply(to: 4)["result"]?["service"] == "gateway")
        await pieces.close()

        // A continuation frame with no message begun: closed (1002).
        let stray = try await DeviceWebSocket(stack: stack, token: token)
        stray.send(frame: fragment(Array("}".utf8), .continuation, fin: true))
        #expect(try await stray.waitForClose() == 1002)

        // Fragments each under the limit, over it together: closed (1009).
        let large = try await DeviceWebSocket(stack: stack, token: token)
        large.send(frame: fragment(Array(repeating: 0x61, count: 3000), .text, fin: false))
        large.send(frame: fragment(Array(repeating: 0x61, count: 3000), .continuation, fin: true))
        #expect(try await large.waitForClose() == 1009)

        // Fragments that are not UTF-8 together (a lead byte, then no continuation byte): closed (1007).
        let invalid = try await DeviceWebSocket(stack: stack, token: token)
        invalid.send(frame: fragment([0x7B, 0xC3], .text, fin: false))
        invalid.send(frame: fragment([0x28, 0x7D], .continuation, fin: true))
        #expect(try await invalid.waitForClose() == 1007)

        let info = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        #expect(info.status == 200 && stack.gateway.isRunning)
    }

    @Test("limits out of range are refused at start with a usage error that names the option", arguments: [
        ["--streams-per-connection", "0"], ["--max-queued-replies", "0"], ["--ping-interval", "0"], ["--credential-recheck", "-1"],
    ])
    func badOptions(_ arguments: [String]) async throws {
        let directory = TemporaryDirectory()
        let result = try await runCommand(Binaries.path("screentime-gatewayd"),
                                          ["--runtime-dir", directory.path, "--state-dir", directory.path, "--listen", "127.0.0.1:0"] + arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(arguments[0]), "\(result.stderr)")
    }

    @Test("requests without a credential are rate-limited per address")
    func rateLimited() async throws {
        let stack = try await GatewayStack.start(gatewayArguments: ["--unauthenticated-rate", "1", "--unauthenticated-burst", "3"])
        defer { stack.stopNow() }
        var statuses: [Int] = []
        for _ in 0..<5 {
            statuses.append(try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate).status)
        }
        #expect(statuses.prefix(3).allSatisfy { $0 == 200 })
        #expect(statuses.last == 429)
        let limited = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        #expect(limited.errorCode == "rate_limited")
    }
}

/// A bare TCP connection to the gateway's port.
extension RawTCP {
    /// Connects, sends `bytes`, and reads until the gateway closes; true when it does
    /// (within 30 s, a socket timeout, so a hang fails rather than blocks).
    static func closesAfter(sending bytes: [UInt8], port: Int) throws -> Bool {
        let fd = try RawTCP.open(port: port)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }
}
