import Foundation
import GatewayAPI
import NIOCore
import NIOWebSocket
import PairingAPI
import RPCCore
import StackSupport
import Testing
import TestSupport

/// The gateway as the internet's edge sees it: every malformed or oversized request gets
/// its documented status at once and the connection closes, reading no more; the gateway
/// serves the next request as before. Each case over real TLS to the real binary.
@Suite("Gateway at the internet's edge", .serialized, .timeLimit(.minutes(5)))
struct EdgeTests {
    /// A request whose answer, if any, would take this long were it not refused at once.
    static let slowTimeout = ["--request-timeout", "30"]
    /// Room for the many requests without a credential these tests send from one address.
    static let manyRequests = ["--unauthenticated-burst", "1000"]

    struct Case: CustomStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var status: Int
        var description: String { self.name }

        init(_ name: String, _ text: String, _ status: Int) {
            self.name = name
            self.bytes = Array(text.utf8)
            self.status = status
        }

        init(_ name: String, bytes: [UInt8], _ status: Int) {
            self.name = name
            self.bytes = bytes
            self.status = status
        }
    }

    static let host = "Host: 127.0.0.1\r\n"
    static func post(_ headers: String, body: String = "hello") -> String {
        "POST /v1/rpc HTTP/1.1\r\n\(host)\(headers)\r\n\(body)"
    }

    static let malformed: [Case] = [
        Case("a 64 KiB header", "GET /v1/info HTTP/1.1\r\n\(host)X-Big: \(String(repeating: "a", count: 64 << 10))\r\n\r\n", 431),
        Case("a 100 KiB request line", "GET /v1/info?\(String(repeating: "q", count: 100 << 10)) HTTP/1.1\r\n\(host)\r\n", 431),
        Case("4,000 headers", "GET /v1/info HTTP/1.1\r\n\(host)" + (0..<4000).map { "X-\($0): v\r\n" }.joined() + "\r\n", 431),
        Case("Content-Length with Transfer-Encoding: chunked", post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400),
        Case("Transfer-Encoding with a space before chunked", post("Content-Length: 5\r\nTransfer-Encoding:  chunked\r\n"), 400),
        Case("Transfer-Encoding with a tab", post("Content-Length: 5\r\nTransfer-Encoding:\tchunked\r\n"), 400),
        Case("Transfer-Encoding in capitals", post("Content-Length: 5\r\nTRANSFER-ENCODING: CHUNKED\r\n"), 400),
        Case("a second Transfer-Encoding line", post("Content-Length: 5\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"), 400),
        Case("Content-Length with Transfer-Encoding: chunked, identity", post("Content-Length: 5\r\nTransfer-Encoding: chunked, identity\r\n"), 400),
        Case("Transfer-Encoding: gzip", post("Transfer-Encoding: gzip\r\n"), 501),
        Case("two different Content-Lengths", post("Content-Length: 5\r\nContent-Length: 6\r\n"), 400),
        Case("a Content-Length with a sign", post("Content-Length: +5\r\n"), 400),
        Case("a Content-Length with a space inside", post("Content-Length: 5 5\r\n"), 400),
        Case("a Content-Length that is not a number", post("Content-Length: five\r\n"), 400),
        Case("a NUL in a header", bytes: Array("GET /v1/info HTTP/1.1\r\n\(host)X-A: a".utf8) + [0] + Array("b\r\n\r\n".utf8), 400),
        Case("a bare CR", "GET /v1/info HTTP/1.1\r\n\(host)X-A: a\rb\r\n\r\n", 400),
        Case("an obs-fold header", "GET /v1/info HTTP/1.1\r\n\(host)X-A: a\r\n  folded\r\n\r\n", 400),
        Case("a space before a header's colon", "GET /v1/info HTTP/1.1\r\n\(host)X-A : a\r\n\r\n", 400),
        Case("method FOO", "FOO /v1/info HTTP/1.1\r\n\(host)\r\n", 501),
        Case("an HTTP/0.9 request", "GET /v1/info\r\n\r\n", 505),
        Case("the HTTP/2 connection preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        Case("HTTP/1.2", "GET /v1/info HTTP/1.2\r\n\(host)\r\n", 505),
        Case("Content-Length: 10000000000, no body sent", "POST /v1/rpc HTTP/1.1\r\n\(host)Content-Length: 10000000000\r\n\r\n", 413),
        Case("Content-Length over --max-body-size, no body sent", "POST /signin HTTP/1.1\r\n\(host)Content-Length: 2000000\r\n\r\n", 413),
        Case("no Host", "GET /v1/info HTTP/1.1\r\n\r\n", 400),
        Case("two Host headers", "GET /v1/info HTTP/1.1\r\n\(host)\(host)\r\n", 400),
        Case("a WebSocket upgrade with a key of 15 bytes",
             "GET /v1/ws HTTP/1.1\r\n\(host)Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: \(Data(count: 15).base64EncodedString())\r\n\r\n", 400),
        Case("a WebSocket upgrade with a key that is not base64",
             "GET /v1/ws HTTP/1.1\r\n\(host)Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: not base64 at all!!\r\n\r\n", 400),
        Case("a WebSocket upgrade over HTTP/1.0",
             "GET /v1/ws HTTP/1.0\r\n\(host)Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: \(Data(count: 16).base64EncodedString())\r\n\r\n", 400),
        Case("a WebSocket upgrade of another version",
             "GET /v1/ws HTTP/1.1\r\n\(host)Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: \(Data(count: 16).base64EncodedString())\r\n\r\n", 426),
    ]

    @Test("each malformed or oversized request, first on its connection or after a good one: its status at once with HSTS, closed within 1 s, nothing more read; logged at notice, never error; the gateway serves on")
    func malformedRequests() async throws {
        let stack = try await GatewayStack.start(gatewayArguments: Self.slowTimeout + Self.manyRequests)
        defer { stack.stopNow() }
        try await PinCheck.verify(stack)
        for order in ["first", "second"] {
            for request in Self.malformed {
                let connection = try await RawTLS.connect(stack)
                defer { connection.close() }
                var bytes = request.bytes
                if order == "second" {
                    // A good request first, kept alive, then the bad one.
                    await connection.send("GET /v1/info HTTP/1.1\r\n\(Self.host)\r\n")
                    try await connection.waitFor("the first answer") { String(decoding: $0, as: UTF8.self).contains("\"apiVersion\"") }
                    bytes = request.bytes
                }
                let before = connection.bytes.count
                let sent = ContinuousClock.now
                await connection.send(bytes)
                let closed = try await connection.waitForClose(timeout: .seconds(5))
                let answer = String(decoding: connection.bytes.dropFirst(before), as: UTF8.self)
                let status = Int(answer.dropFirst(9).prefix(3))
                #expect(status == request.status, "\(request) (\(order)): \(answer.prefix(300))")
                #expect(answer.lowercased().contains("strict-transport-security: max-age="), "\(request) (\(order)): no HSTS")
                // Closed with the answer: timed from the answer's arrival, so that the time a
                // loaded machine takes to carry the request there is not counted.
                let answered = connection.arrival(after: before) ?? sent
                #expect(closed.map { $0 - answered < .seconds(1) } == true,
                        "\(request) (\(order)): closed \(closed.map { "\($0 - answered)" } ?? "not at all") after the answer, \(closed.map { "\($0 - sent)" } ?? "-") after sending")
            }
        }

        // A malformed first request, then the client keeps sending: closed within 1 s,
        // having read no more than the socket's buffers hold.
        let flood = try await RawTLS.connect(stack)
        let sent = ContinuousClock.now
        await flood.send("POST /v1/rpc HTTP/1.1\r\n\(Self.host)Content-Length: 5\r\nContent-Length: 6\r\n\r\n")
        await flood.keepSending(Array(repeating: 0x61, count: 64 << 10), for: .seconds(5))
        let closed = try await flood.waitForClose(timeout: .seconds(5))
        let answered = flood.arrival(after: 0) ?? sent
        #expect(closed.map { $0 - answered < .seconds(1) } == true, "a flooding client was closed \(closed.map { "\($0 - answered)" } ?? "not at all") after its answer")
        #expect(flood.status == 400)

        let info = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        #expect(info.status == 200 && stack.gateway.isRunning)
        // Logged at notice, with the address; never at error.
        let log = stack.gateway.log
        let lines = log.split(separator: "\n")
        #expect(!lines.contains { $0.contains(" error screentime-gatewayd") }, "\(lines.filter { $0.contains(" error ") }.prefix(5))")
        let refused = lines.filter { $0.contains("malformed request refused") }
        #expect(refused.count == Self.malformed.count * 2 + 1, "one line per refusal: \(refused.count)")
        #expect(refused.allSatisfy { $0.contains(" notice ") && $0.contains("remote_address=127.0.0.1") })
    }

    @Test("HTTP/1.0 is answered and closed; a kept-alive HTTP/1.1 connection serves the next request")
    func httpVersions() async throws {
        let stack = try await GatewayStack.start(gatewayArguments: Self.slowTimeout)
        defer { stack.stopNow() }
        let old = try await RawTLS.connect(stack)
        let sent = ContinuousClock.now
        await old.send("GET /v1/info HTTP/1.0\r\n\r\n")
        let closed = try await old.waitForClose(timeout: .seconds(5))
        #expect(old.status == 200, "\(old.text.prefix(300))")
        #expect(old.head.contains("connection: close"))
        // Closed with the answer (timed from its arrival: a loaded machine's delay in
        // carrying the request there is not the gateway's).
        let answered = old.arrival(after: 0) ?? sent
        #expect(closed.map { $0 - answered < .seconds(1) } == true, "closed \(closed.map { "\($0 - answered)" } ?? "not at all") after the answer")

        let kept = try await RawTLS.connect(stack)
        defer { kept.close() }
        await kept.send("GET /v1/info HTTP/1.1\r\n\(Self.host)\r\nGET /healthz HTTP/1.1\r\n\(Self.host)\r\n")
        try await kept.waitFor("two answers on one connection") { String(decoding: $0, as: UTF8.self).components(separatedBy: "HTTP/1.1 200").count == 3 }
    }

    @Test("a refused WebSocket upgrade says why, with HSTS; an unmasked client frame, reserved bits and a close frame with a code or body a peer may not send close the socket with 1002; a socket with no credential is closed with 1008 after --auth-timeout")
    func webSocketEdges() async throws {
        // Six seconds to authenticate: under a full parallel run (browsers included), opening a
        // TLS WebSocket and a first round trip took more than one, and once more than three.
        let stack = try await GatewayStack.start(gatewayArguments: Self.slowTimeout + ["--auth-timeout", "6"])
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let key = Data((0..<16).map { UInt8($0) }).base64EncodedString()
        func upgrade(_ path: String, token: String?) -> String {
            "GET \(path) HTTP/1.1\r\n\(Self.host)Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: \(key)\r\n"
                + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "") + "\r\n"
        }

        // An upgrade anywhere but /v1/ws: refused with the reason and HSTS.
        let elsewhere = try await RawTLS.connect(stack)
        await elsewhere.send(upgrade("/v1/info", token: nil))
        try await elsewhere.waitForClose(timeout: .seconds(5))
        #expect(elsewhere.status == 404 && elsewhere.head.contains("strict-transport-security: max-age="), "\(elsewhere.text.prefix(300))")
        #expect(elsewhere.text.contains("\"code\":\"not_found\""))

        // An unmasked frame (a request a server would otherwise answer): closed with 1002.
        let unmasked = try await RawTLS.connect(stack)
        await unmasked.send(upgrade("/v1/ws", token: family.parentCredential.token))
        try await unmasked.waitFor("the upgrade") { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        #expect(unmasked.status == 101, "\(unmasked.text.prefix(300))")
        let upgraded = unmasked.bytes.count
        let ping = Array(#"{"id":1,"method":"rpc.ping"}"#.utf8)
        await unmasked.send([0x81, UInt8(ping.count)] + ping)
        try await unmasked.waitForClose(timeout: .seconds(5))
        let frames = Array(unmasked.bytes.dropFirst(upgraded))
        #expect(frames.count >= 4 && frames[0] == 0x88 && frames[2] == 0x03 && frames[3] == 0xEA, "expected a close frame with 1002, got \(frames.prefix(16))")
        #expect(!String(decoding: frames, as: UTF8.self).contains("\"result\""), "the unmasked request was not answered")

        // Masked frames (with a zero key, so the payload reads as sent) the gateway must refuse
        // or answer by the rules: reserved bits set, close frames with a code or body a peer
        // may not send (1002), and a good close (answered with 1000).
        func masked(_ first: UInt8, _ payload: [UInt8]) -> [UInt8] { [first, 0x80 | UInt8(payload.count), 0, 0, 0, 0] + payload }
        for (what, frame, code) in [
            ("a text frame with RSV1 set", masked(0xC1, ping), 1002),
            ("a close frame with 1005 (reserved for 'no code')", masked(0x88, [0x03, 0xED]), 1002),
            ("a close frame of one byte", masked(0x88, [0x03]), 1002),
            ("a close frame whose reason is not UTF-8", masked(0x88, [0x03, 0xE8, 0xFF]), 1002),
            ("a close frame with 1000", masked(0x88, [0x03, 0xE8]), 1000),
        ] as [(String, [UInt8], Int)] {
            let socket = try await RawTLS.connect(stack)
            await socket.send(upgrade("/v1/ws", token: family.parentCredential.token))
            try await socket.waitFor("the upgrade") { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
            let start = socket.bytes.count
            await socket.send(frame)
            try await socket.waitForClose(timeout: .seconds(5))
            let answer = Array(socket.bytes.dropFirst(start))
            #expect(answer.count >= 4 && answer[0] == 0x88 && Int(answer[2]) << 8 | Int(answer[3]) == code,
                    "\(what): expected a close frame with \(code), got \(answer.prefix(16))")
        }
        #expect(try await stack.result("rpc.ping")["service"] == "gateway", "the gateway still serves")

        // No credential at the upgrade and none given after: closed with 1008.
        let anonymous = try await DeviceWebSocket(stack: stack)
        anonymous.request(1, "rpc.ping")
        #expect(try await anonymous.reply(to: 1)["result"]?["service"] == "gateway", "it may ping while it has time")
        let timedOut = try await anonymous.next()
        #expect(timedOut["error"]?["code"] == "unauthorized", "\(timedOut)")
        // Nothing was under way: the reason says none of its requests will be carried out.
        let closed = try await anonymous.waitForCloseFrame()
        #expect(closed.code == 1008 && closed.reason == GatewayCloseReason.noCredential, "\(closed)")

        // A socket that authenticates in time stays open past the timeout.
        let authenticated = try await DeviceWebSocket(stack: stack)
        authenticated.request(1, "gateway.authenticate", ["token": .string(family.parentCredential.token)])
        #expect(try await authenticated.reply(to: 1)["result"] != nil)
        try await Task.sleep(for: .milliseconds(6500))  // past --auth-timeout: what must not happen is a close
        authenticated.request(2, "rpc.ping")
        #expect(try await authenticated.reply(to: 2)["result"]?["service"] == "gateway")
        await authenticated.close()
    }

    @Test("a request sent with no credential and still in flight at --auth-timeout is answered before the socket is closed with 1008")
    func requestInFlightAtTheCredentialDeadline() async throws {
        let stack = try await GatewayStack.start(gatewayArguments: Self.slowTimeout + ["--auth-timeout", "3"])
        defer { stack.stopNow() }
        // The pairing service stopped (SIGSTOP): an enrollment sent now waits for it.
        stack.harness.pairing.signal(SIGSTOP)
        defer { stack.harness.pairing.signal(SIGCONT) }
        let socket = try await DeviceWebSocket(stack: stack)
        socket.request(1, "pairing.enrollParent", ["family": "smith", "code": "ABCD-EFGH-IJKL", "deviceId": "dad-phone", "deviceName": "Dad's phone"])
        try await waitUntil("the deadline passed with the enrollment in flight", detail: String(stack.gateway.log.suffix(2000))) {
            stack.gateway.log.contains("no credential in time, but a request is in flight: waiting for it")
        }
        stack.harness.pairing.signal(SIGCONT)
        let answer = try await socket.reply(to: 1)
        #expect(answer["error"]?["code"] != nil && answer["error"]?["code"] != "unauthorized", "the pairing service's own answer: \(answer)")
        // Still no credential: the deadline moved once, and the socket is closed after it.
        let timedOut = try await socket.next()
        #expect(timedOut["error"]?["code"] == "unauthorized", "\(timedOut)")
        #expect(try await socket.waitForClose() == 1008)
    }

    @Test("a method name with a newline, CR, ANSI escapes or bytes that are not UTF-8, sent with no credential, stays on one log line")
    func forgedLogLines() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        let forged = ["probe.x\nFORGED-LINE level=error", "probe.y\rFORGED-CR", "probe.z\u{1B}[2J\u{1B}[31mFORGED-ANSI", "probe.w\u{2028}FORGED-LS"]
        for method in forged {
            _ = try await stack.rpc(method)
            let socket = try await DeviceWebSocket(stack: stack)
            await socket.send(envelope(id: 9, method: method, params: [:]))
            _ = try await socket.reply(to: 9)
            await socket.close()
        }
        // Bytes that are not UTF-8 inside the method's JSON string.
        let raw = try await RawTLS.connect(stack)
        let body: [UInt8] = Array(#"{"id":1,"method":"probe.v"#.utf8) + [0xFF, 0x0A, 0xFE] + Array(#"FORGED-BYTES"}"#.utf8)
        await raw.send(Array("POST /v1/rpc HTTP/1.1\r\n\(Self.host)Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8) + body)
        try await raw.waitForClose(timeout: .seconds(10))
        try await waitUntil("the requests are logged", detail: String(stack.gateway.log.suffix(3000))) {
            stack.gateway.log.components(separatedBy: "FORGED-").count >= 5
        }
        for line in stack.gateway.log.split(separator: "\n", omittingEmptySubsequences: false) where line.contains("FORGED") {
            // Every line is a log entry of its own: timestamp, level, the service.
            #expect(line.contains(" screentime-gatewayd: "), "a forged line: \(line)")
            #expect(!line.hasPrefix("FORGED"), "\(line)")
            #expect(!line.contains("\u{1B}") && !line.contains("\r") && !line.contains("\u{2028}"), "\(line.debugDescription)")
        }
    }

    @Test("nobody locks families out of pairing: 500 wrong guesses at other families' invitations from 25 addresses, then a family's right secret is accepted at once")
    func noPairingLockout() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        var others: [String] = []
        for index in 0..<5 {
            let family = "other\(index)"
            _ = try await Bootstrapped.make(stack.harness, family: family, parentDevice: "\(family)-phone")
            others.append(family)
        }
        let smith = try await Bootstrapped.make(stack.harness)
        let invitation = try await smith.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))

        var statuses: [Int: Int] = [:]
        for address in 0..<25 {
            // 20 guesses a connection (within the per-address burst of 30), each its own request.
            let connection = try await RawTLS.connect(stack, from: "127.0.0.\(address + 10)")
            defer { connection.close() }
            for guess in 0..<20 {
                let params: JSONValue = [
                    "family": .string(others[(address + guess) % others.count]), "invitationId": .string(String(format: "%016x", address * 100 + guess)),
                    "secret": "guess", "deviceId": "intruder", "deviceName": "Intruder",
                ]
                let body = await envelope(id: guess, method: PairingMethods.acceptInvitation.name, params: params)
                await connection.send("POST /v1/rpc HTTP/1.1\r\n\(Self.host)Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            }
            try await connection.waitFor("20 answers from 127.0.0.\(address + 10)") { String(decoding: $0, as: UTF8.self).components(separatedBy: "HTTP/1.1 ").count == 21 }
            for response in connection.text.components(separatedBy: "HTTP/1.1 ").dropFirst() {
                statuses[Int(response.prefix(3)) ?? 0, default: 0] += 1
            }
        }
        #expect(statuses.values.reduce(0, +) == 500)
        #expect(statuses[429] != nil || statuses[400] != nil, "the guesses were refused: \(statuses)")
        #expect(statuses[200] == nil, "\(statuses)")

        // The family's right secret, from the family's own address: accepted at once.
        let accepted = try await stack.rpc(PairingMethods.acceptInvitation.name, [
            "family": "smith", "invitationId": .string(invitation.invitationId), "secret": .string(invitation.secret),
            "deviceId": "emma-ipad", "deviceName": "Emma's iPad",
        ])
        #expect(accepted.status == 200, "\(accepted.body)")
        #expect(accepted.json?["result"]?["credential"]?["deviceId"] == "emma-ipad", "\(accepted.body)")
    }

    @Test("nobody locks a family out of its own pairing: 1,000 wrong guesses at the family from 20 addresses are counted per address, and the family's right secret from another address is accepted at once; a family that does not exist answers alike")
    func noLockoutOfOneFamily() async throws {
        // The gateway's own per-address limit raised: pairing's count is what is tried.
        let stack = try await GatewayStack.start(gatewayArguments: ["--unauthenticated-rate", "6000", "--unauthenticated-burst", "100"])
        defer { stack.stopNow() }
        let smith = try await Bootstrapped.make(stack.harness)
        let invitation = try await smith.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))

        /// `count` guesses at `family` on one connection from `address`, as one who knows
        /// the family's id and not its invitations'; the answers' statuses in order.
        func guesses(_ count: Int, at family: String, from address: String) async throws -> [Int] {
            let connection = try await RawTLS.connect(stack, from: address)
            defer { connection.close() }
            for guess in 0..<count {
                let params: JSONValue = [
                    "family": .string(family), "invitationId": .string(String(format: "%016x", guess)), "secret": .string("guess"),
                    "deviceId": "intruder", "deviceName": "Intruder",
                ]
                let body = await envelope(id: guess, method: PairingMethods.acceptInvitation.name, params: params)
                await connection.send("POST /v1/rpc HTTP/1.1\r\n\(Self.host)Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            }
            try await connection.waitFor("\(count) answers from \(address)", timeout: .seconds(60)) {
                String(decoding: $0, as: UTF8.self).components(separatedBy: "HTTP/1.1 ").count == count + 1
            }
            return connection.text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { Int($0.prefix(3)) ?? 0 }
        }

        var statuses: [Int: Int] = [:]
        for address in 0..<20 {
            let answered = try await guesses(50, at: "smith", from: "127.0.0.\(address + 10)")
            // Each address: its first ten guesses checked (and wrong), the rest refused unchecked.
            #expect(Array(answered.prefix(10)) == Array(repeating: 400, count: 10) && answered.dropFirst(10).allSatisfy { $0 == 429 }, "127.0.0.\(address + 10): \(answered)")
            for status in answered { statuses[status, default: 0] += 1 }
        }
        #expect(statuses == [400: 200, 429: 800], "\(statuses)")

        // The family's right secret, from an address of its own: accepted at once.
        let accepted = try await stack.rpc(PairingMethods.acceptInvitation.name, [
            "family": "smith", "invitationId": .string(invitation.invitationId), "secret": .string(invitation.secret),
            "deviceId": "emma-ipad", "deviceName": "Emma's iPad",
        ])
        #expect(accepted.status == 200 && accepted.json?["result"]?["credential"]?["deviceId"] == "emma-ipad", "\(accepted.body)")

        // A family that does not exist is refused exactly as one that does.
        let unknown = try await guesses(12, at: "nobody", from: "127.0.0.40")
        let known = try await guesses(12, at: "smith", from: "127.0.0.41")
        #expect(unknown == known && unknown.suffix(2) == [429, 429], "unknown \(unknown), known \(known)")
    }

    @Test("a request whose lines end in a bare LF is read as RFC 9112 allows (or refused with 400), never answered 505, and the gateway goes on serving")
    func bareLineFeeds() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        let connection = try await RawTLS.connect(stack)
        defer { connection.close() }
        await connection.send("GET /healthz HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n\n")
        _ = try await connection.waitForClose(timeout: .seconds(15))
        let status = Int(connection.text.dropFirst("HTTP/1.1 ".count).prefix(3)) ?? 0
        #expect(status == 200 || status == 400, "\(connection.text.prefix(300))")
        let again = try await curl(stack.url + "/healthz", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        #expect(again.status == 200)
    }
}
