import Foundation
import Glibc
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import RPCCore
import StackSupport
import Testing
import TestSupport

/// Limits that protect the gateway from one client: connections per address, and a
/// WebSocket client that stops reading its replies.
@Suite("Gateway: limits", .serialized, .timeLimit(.minutes(3)))
struct LimitTests {
    @Test("an address over its connection limit is refused with a clear error while other addresses still connect")
    func perAddressLimit() async throws {
        // Connections that send nothing are held for the test's length (--request-timeout).
        try await GatewayStack.inProcess(configure: { $0.limits.maximumConnectionsPerAddress = 2; $0.limits.requestTimeout = .seconds(120) }) { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let socket = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            socket.request(1, "store.whoami")
            #expect(try await socket.reply(to: 1)["result"]?["deviceId"] == "mum-phone")
            // The second connection from 127.0.0.1: plain TCP, counted at accept.
            let held = try RawTCP.open(port: stack.port)

            // A third from 127.0.0.1 is served only to be told why it is refused.
            let refused = try await eventually("a connection from 127.0.0.1 is refused", detail: String(stack.gateway.log.suffix(3000))) { lastSeen in
                let reply = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
                lastSeen = "HTTP \(reply.status) \(reply.body)"
                return reply.status == 429 ? reply : nil
            }
            #expect(refused.errorCode == "limit_exceeded")
            #expect(refused.json?["error"]?["message"]?.stringValue?.contains("too many connections from your address") == true, "\(refused.body)")
            // A WebSocket from 127.0.0.1 is not upgraded either.
            let refusedSocket = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            if case .message(let text) = try await refusedSocket.nextEvent() { Issue.record("a WebSocket over the limit got a message: \(text)") }
            #expect(stack.gateway.log.contains("connection refused: too many connections"))

            // Another address connects, and the connections already open keep being served.
            let other = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: ["--interface", "127.0.0.2"])
            #expect(other.status == 200, "from 127.0.0.2: HTTP \(other.status) \(other.stderr)")
            socket.request(2, "store.whoami")
            #expect(try await socket.reply(to: 2)["result"]?["deviceId"] == "mum-phone")

            // A connection closed frees its place.
            RawTCP.reset(held)
            _ = try await eventually("127.0.0.1 connects again once one of its connections closed", detail: String(stack.gateway.log.suffix(3000))) { lastSeen in
                let reply = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
                lastSeen = "HTTP \(reply.status) \(reply.body)"
                return reply.status == 200 ? true : nil
            }
            await socket.close()
            #expect(stack.gateway.isRunning)
        }
    }

    @Test("pings keep a WebSocket that answers them open, and close one whose peer has gone quiet")
    func pingsFindDeadPeers() async throws {
        try await GatewayStack.inProcess(configure: { $0.limits.pingInterval = .seconds(3) }) { stack in
            let family = try await Bootstrapped.make(stack.harness)
            // swift-websocket's client answers every ping with a pong, as a phone's would.
            let live = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            live.request(1, "store.whoami")
            #expect(try await live.reply(to: 1)["result"]?["deviceId"] == "mum-phone")

            // A peer that sends nothing more once upgraded, pongs included (a phone gone out of range).
            let quiet = try await StalledWebSocket.connect(group: MultiThreadedEventLoopGroup.singleton, port: stack.port, token: family.parentCredential.token)
            try await waitUntil("the gateway closes the WebSocket whose peer does not answer its ping", timeout: .seconds(30), detail: String(stack.gateway.log.suffix(3000))) {
                stack.gateway.log.split(separator: "\n").contains { $0.contains("websocket closed") && $0.contains("no answer to ping") }
            }

            // The answering one was opened first, so it was pinged at least as often, and is open.
            live.request(2, "store.whoami")
            #expect(try await live.reply(to: 2)["result"]?["deviceId"] == "mum-phone")
            #expect(stack.gateway.log.split(separator: "\n").filter { $0.contains("websocket peer gone") }.count == 1)
            await live.close()
            await quiet.close()
            #expect(stack.gateway.isRunning)
        }
    }

    @Test("a WebSocket client that stops reading is held back, not buffered for, and others are served meanwhile")
    func clientThatStopsReading() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let child = try await family.pairChild(stack.harness)

        // What one rpc.describe reply weighs.
        let reader = try await DeviceWebSocket(stack: stack, token: child.token)
        reader.request(1, "rpc.describe")
        let describe = try await reader.reply(to: 1)
        let replyBytes = try RPCJSON.makeEncoder().encode(describe).count
        #expect(replyBytes > 10_000)

        // A client that reads nothing once upgraded asks for far more replies than the
        // gateway may hold: each request a few dozen bytes, each reply replyBytes.
        let requests = 20_000
        let group = MultiThreadedEventLoopGroup.singleton
        let before = try stack.gateway.residentBytes()
        let stalled = try await StalledWebSocket.connect(group: group, port: stack.port, token: family.parentCredential.token)
        stalled.send((1...requests).map { #"{"id":\#($0),"method":"rpc.describe"}"# })

        // The replies back up: they fill the client's receive buffer, and the gateway, which
        // cannot send more, stops reading requests, so the client's own requests wait in
        // its send queue: both seen in the client's socket.
        let clientPort = try #require(stalled.localPort)
        try await waitUntil("replies unread at the stalled client, and its requests unread by the gateway", timeout: .seconds(120),
                            detail: TCPQueues.describe(clientPort: clientPort)) {
            guard let atClient = TCPQueues.of(localPort: clientPort, remotePort: stack.port) else { return false }
            // Its receive buffer full (it was made 16 KiB, which the kernel doubles).
            return atClient.received >= 16 * 1024 && atClient.sent > 0
        }

        // Meanwhile everyone else is served: a hundred round trips, in which a gateway that
        // kept reading the stalled client would keep making replies for it.
        for id in 2..<102 {
            reader.request(id, "store.whoami")
            #expect(try await reader.reply(to: id)["result"]?["deviceId"]?.stringValue == child.deviceId)
        }
        let info = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        #expect(info.status == 200)
        // Held back: what the gateway holds for the client is bounded (a few replies in
        // flight, NIO's buffers), far below what it asked for.
        let held = try stack.gateway.residentBytes()
        let asked = requests * replyBytes
        #expect(held - before < min(asked / 8, 64 << 20), "the gateway grew \((held - before) >> 20) MiB for a client asking for \(asked >> 20) MiB it does not read")

        // The client goes away: its socket's work ends with it.
        await stalled.close()
        // On a failure: the gateway's log, and what is left of the connection on both sides.
        // (Replies to the thousands of requests it had read go nowhere first: on a machine
        // loaded by every other suite that takes a while.)
        try await waitUntil("the gateway closes the stalled WebSocket", timeout: .seconds(120),
                            detail: String(stack.gateway.log.suffix(3000)) + "\n/proc/net/tcp:\n" + TCPQueues.describe(clientPort: clientPort)) {
            stack.gateway.log.split(separator: "\n").contains { $0.contains("websocket closed") && $0.contains("mum-phone") }
        }
        reader.request(200, "store.whoami")
        #expect(try await reader.reply(to: 200)["result"]?["deviceId"]?.stringValue == child.deviceId)
        await reader.close()
        #expect(stack.gateway.isRunning)
    }
}

/// A TLS WebSocket client (SwiftNIO) that stops reading once upgraded: what the gateway
/// sends it stays in the socket buffers.
final class StalledWebSocket: Sendable {
    let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    var localPort: Int? { self.channel.localAddress?.port }

    static func connect(group: any EventLoopGroup, port: Int, token: String) async throws -> StalledWebSocket {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none  // the pin is checked by curl in the other tests; here only the flow matters
        let context = try NIOSSLContext(configuration: tls)
        let upgraded: EventLoopFuture<StalledWebSocket> = try await ClientBootstrap(group: group)
            // A small receive buffer, set before connecting (which fixes the TCP window): the
            // replies back up after a few of them, not after megabytes a loaded machine
            // takes minutes to make.
            .channelOption(.socketOption(.so_rcvbuf), value: 16 * 1024)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    let upgrader = NIOTypedWebSocketClientUpgrader<StalledWebSocket> { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.syncOptions?.setOption(.autoRead, value: false)
                            return StalledWebSocket(channel: channel)
                        }
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "localhost")
                    headers.add(name: "Authorization", value: "Bearer \(token)")
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<StalledWebSocket>(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/v1/ws", headers: headers),
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in channel.eventLoop.makeFailedFuture(TestFailure("the WebSocket upgrade was refused")) })
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: .init(upgradeConfiguration: configuration))
                }
            }
        return try await upgraded.get()
    }

    /// Sends text messages (masked, as a client must), without waiting for them to go out.
    func send(_ messages: [String]) {
        let channel = self.channel
        channel.eventLoop.execute {
            for message in messages {
                channel.write(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: message)), promise: nil)
            }
            channel.flush()
        }
    }

    func close() async {
        try? await self.channel.close()
    }
}

/// The kernel's queues of a loopback TCP connection (/proc/net/tcp): bytes sent and not
/// yet acknowledged, bytes received and not yet read by the process.
enum TCPQueues {
    static func of(localPort: Int, remotePort: Int) -> (sent: Int, received: Int)? {
        for line in Self.table().dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 4, Self.port(fields[1]) == localPort, Self.port(fields[2]) == remotePort else { continue }
            let queues = fields[4].split(separator: ":")
            guard queues.count == 2, let sent = Int(queues[0], radix: 16), let received = Int(queues[1], radix: 16) else { continue }
            return (sent, received)
        }
        return nil
    }

    static func describe(clientPort: Int) -> String {
        let lines = Self.table()
        let hex = String(format: "%04X", clientPort)
        return lines.filter { $0.contains(":\(hex)") }.joined(separator: "\n")
    }

    /// The lines of /proc/net/tcp, read to its end: a procfs file says it is empty, and a
    /// read by its size gets only the start of a table that holds thousands of sockets
    /// while the whole suite runs.
    private static func table() -> [Substring] {
        guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return [] }
        defer { try? handle.close() }
        let data = (try? handle.readToEnd()) ?? Data()
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
    }

    private static func port(_ address: Substring) -> Int? {
        address.split(separator: ":").last.flatMap { Int($0, radix: 16) }
    }
}

extension RawTCP {
    /// Closes with a reset (SO_LINGER 0), which the gateway sees at once.
    static func reset(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
    }
}
