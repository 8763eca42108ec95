import Crypto
import Foundation
import GatewayAPI
import ProcessSpawn
import NIOCore
import NIOPosix
import NIOSSL
import PairingAPI
import RPCCore
@testable import ScreenTimeKit
import Synchronization
import Testing
import TestSupport

@Suite("Transport pieces")
struct TransportUnitTests {
    @Test("backoff grows to its cap, each delay jittered between half the step and the step")
    func backoff() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        #expect(backoff.step(attempt: 0) == .milliseconds(100))
        #expect(backoff.step(attempt: 3) == .milliseconds(800))
        #expect(backoff.step(attempt: 20) == .seconds(5))
        #expect(backoff.step(attempt: 1_000) == .seconds(5))
        var delays = Set<Duration>()
        for _ in 0..<200 {
            let delay = backoff.delay(attempt: 4)
            #expect(delay >= .milliseconds(800) && delay <= .milliseconds(1600))
            delays.insert(delay)
        }
        #expect(delays.count > 20, "jittered, not one fixed delay")
    }

    @Test("pins read as curl takes them; anything else is refused")
    func pins() throws {
        let hash = Data(SHA256.hash(data: Data("key".utf8)))
        let text = hash.base64EncodedString()
        #expect(KeyPin(text)?.description == text)
        #expect(KeyPin("sha256//" + text) == KeyPin(text))
        #expect(KeyPin("not base64!") == nil)
        #expect(KeyPin(Data([1, 2, 3]).base64EncodedString()) == nil)
    }

    @Test("pairing links: version 1, and version 2 with the gateway's URLs and a pin holding + and /")
    func links() throws {
        let v1 = try #require(PairingURI("screentime://pair?v=1&server=home.example&family=smith&invitation=i1&secret=s3cret"))
        #expect(v1.family == "smith" && v1.invitationId == "i1" && v1.secret == "s3cret")
        #expect(v1.urls.isEmpty && v1.pin == nil)
        let pin = "ab+/cd=="
        let v2 = try #require(PairingURI("screentime://pair?v=2&server=home.example&family=smith&invitation=i1&secret=s&url=https://home.example:8443&url=https://192.168.1.20:8443&pin=ab%2B/cd%3D%3D"))
        #expect(v2.urls == ["https://home.example:8443", "https://192.168.1.20:8443"])
        #expect(v2.pin == pin)
        #expect(PairingURI(v2.string) == v2, "what the server writes, the kit reads back")
        #expect(PairingURI("screentime://pair?v=3&server=a&family=b&invitation=c&secret=d") == nil)
        #expect(PairingURI("https://example.com") == nil)
    }

    @Test("the credential file is written atomically, mode 0600, and read back")
    func credentialFile() throws {
        let directory = TemporaryDirectory()
        let store = FileCredentialStore(path: directory.file("kit/credential.json"))
        #expect(try store.load() == nil)
        let identity = DeviceIdentity(family: "smith", deviceId: "d", role: .child, status: .pending, token: "t", zone: "z", childId: "emma")
        try store.save(identity)
        try store.save(identity)
        #expect(try store.load() == identity)
        let mode = try FileManager.default.attributesOfItem(atPath: store.path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.file("kit")) == ["credential.json"])
        try store.delete()
        #expect(try store.load() == nil)
    }

    @Test("the pin check: the right key passes, another key is refused with pin_mismatch, a closed port is unavailable")
    func pinnedHandshake() async throws {
        let server = try await TLSTestServer.start()
        defer { server.stop() }
        let certificate = try await PinnedHandshake.fetchCertificate(host: "127.0.0.1", port: server.port, pin: server.pin)
        #expect(try KeyPin(certificate: certificate) == server.pin)

        let other = try #require(KeyPin(Data(SHA256.hash(data: Data("another key".utf8))).base64EncodedString()))
        do {
            _ = try await PinnedHandshake.fetchCertificate(host: "127.0.0.1", port: server.port, pin: other)
            Issue.record("a different key passed the pin check")
        } catch {
            #expect(error.code == .pinMismatch)
            #expect(error.message.contains(server.pin.description))
        }
        server.stop()
        do {
            _ = try await PinnedHandshake.fetchCertificate(host: "127.0.0.1", port: server.port, pin: server.pin)
            Issue.record("a closed port passed")
        } catch {
            #expect(error.code == .unavailable)
        }
    }

    @Test("the WebSocket transport refuses a server whose key is not the pinned one, and says so")
    func webSocketRefusesWrongPin() async throws {
        let server = try await TLSTestServer.start()
        defer { server.stop() }
        let other = try #require(KeyPin(Data(SHA256.hash(data: Data("another key".utf8))).base64EncodedString()))
        let transport = WebSocketTransport(configuration: .init(
            urls: ["https://127.0.0.1:\(server.port)"], pin: other,
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(100), attemptsBeforeOffline: 2)))
        do {
            _ = try await transport.call(TransportRequest(method: "rpc.ping"))
            Issue.record("a call went through a connection with the wrong key")
        } catch {
            #expect(error.code == .pinMismatch)
        }
        var states: [ConnectionState] = []
        for await state in transport.states() {
            states.append(state)
            if state == .offline { break }
        }
        #expect(states.last == .offline)
        #expect(!states.contains(.connected))
        await transport.close()
    }
}

extension TransportUnitTests {
    @Test("the pin check passes a certificate as openssl or as the gateway makes it (not a CA), and carries bytes both ways", arguments: [false, true])
    func pinnedChannel(gatewayShaped: Bool) async throws {
        let server = try await TLSTestServer.start(gatewayShaped: gatewayShaped, echo: true)
        defer { server.stop() }
        let (remote, certificate) = try await PinnedHandshake.connect(host: "127.0.0.1", port: server.port, pin: server.pin)
        #expect(try KeyPin(certificate: certificate) == server.pin)
        let echoed = try await within(.seconds(10), "the echo through the pinned connection") {
            try await remote.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(string: "hello through the pin"))
                var received = ""
                for try await bytes in inbound {
                    received += String(buffer: bytes)
                    if received.count >= "hello through the pin".count { break }
                }
                return received
            }
        }
        #expect(echoed == "hello through the pin")
    }

    @Test("suspend() with no connection returns at once; the transport then makes none and calls fail at once saying it is suspended; resume() tries again")
    func suspendWhileUnreachable() async throws {
        let server = try await TLSTestServer.start()
        let port = server.port, pin = server.pin
        server.stop()
        let transport = WebSocketTransport(configuration: .init(
            urls: ["https://127.0.0.1:\(port)"], pin: pin,
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(100), attemptsBeforeOffline: 2)))
        try await within(.seconds(10), "suspend() with no connection") { await transport.suspend() }
        for await state in transport.states() where state == .suspended { break }
        do {
            _ = try await transport.call(TransportRequest(method: "rpc.ping", timeout: .seconds(60)))
            Issue.record("a call went through a suspended transport")
        } catch {
            #expect(error.code == .unavailable && error.message.contains("suspended"), "\(error)")
        }
        await transport.resume()
        for await state in transport.states() where state != .suspended { break }
        #expect(transport.state != .suspended)
        await transport.close()
    }

    @Test("a server that takes the connection and never answers (no TLS, no upgrade) fails the connection within its timeout, as unavailable; it never holds the transport")
    func silentServer() async throws {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        defer { listener.close(promise: nil) }
        let port = try #require(listener.localAddress?.port)
        let pin = try #require(KeyPin(Data(SHA256.hash(data: Data("any key".utf8))).base64EncodedString()))
        do {
            _ = try await within(.seconds(30), "the silent server's refusal") {
                try await PinnedWebSocket.connect(host: "127.0.0.1", port: port, pin: pin, token: nil, maximumMessageSize: 1 << 20, timeout: .milliseconds(300))
            }
            Issue.record("a connection to a silent server succeeded")
        } catch let error as RPCError {
            #expect(error.code == .unavailable, "\(error)")
        }
    }

    @Test("the WebSocket transport with no server: reconnecting, then offline after its attempts, and calls fail unavailable at once (the offline decision, not a timeout)")
    func webSocketUnreachable() async throws {
        // A port that was just free: nothing listens there.
        let server = try await TLSTestServer.start()
        let port = server.port
        server.stop()
        let pin = server.pin
        let transport = WebSocketTransport(configuration: .init(
            urls: ["https://127.0.0.1:\(port)"], pin: pin,
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(100), attemptsBeforeOffline: 3)))
        var states: [ConnectionState] = []
        for await state in transport.states() {
            states.append(state)
            if state == .offline { break }
        }
        #expect(states == [.reconnecting, .offline])
        // A deadline far off: a call that waited for a connection instead of taking the
        // offline decision would end on it, as `timeout`, not `unavailable`.
        do {
            _ = try await transport.call(TransportRequest(method: "rpc.ping", timeout: .seconds(60)))
            Issue.record("a call went through with no server")
        } catch {
            #expect(error.code == .unavailable)
            #expect(error.message.contains("unreachable"))
        }
        await transport.close()
    }
}

extension TransportUnitTests {
    @Test("a message the server sends in the same read as its 101 reaches the app: the upgrade forwards the bytes behind the response")
    func messageBehindTheUpgrade() async throws {
        let server = try await TLSTestServer.start(greeting: "hello behind the 101")
        defer { server.stop() }
        let socket = try await PinnedWebSocket.connect(host: "127.0.0.1", port: server.port, pin: server.pin, token: nil, maximumMessageSize: 1 << 20)
        let received = Mutex<[String]>([])
        let reading = Task { try await socket.run(keepAlive: .seconds(30)) { text in received.withLock { $0.append(text) } } }
        try await waitUntil("the server's first message, sent with the 101, read by the app", detail: "\(received.withLock { $0 })") {
            received.withLock { $0 == ["hello behind the 101"] }
        }
        await socket.discard()
        _ = try? await reading.value
    }
}

extension TransportUnitTests {
    @Test("a request the gateway closed the socket under, saying it read none (`no credential in time`), is sent once more on the next connection and answered")
    func resentAfterNoCredentialClose() async throws {
        let connections = ConnectionCount()
        let server = try await TLSTestServer.start(scripted: { ScriptedGateway(connection: connections.next()) })
        defer { server.stop() }
        let transport = WebSocketTransport(configuration: .init(
            urls: ["https://127.0.0.1:\(server.port)"], pin: server.pin,
            backoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(100), attemptsBeforeOffline: 5)))
        let answer = try await within(.seconds(30), "the request answered on the second connection") {
            try await transport.call(TransportRequest(method: "rpc.ping"))
        }
        #expect(answer["service"]?.stringValue == "gateway", "\(answer)")
        #expect(connections.count >= 2, "the first connection closed unanswered, a later one answered: \(connections.count)")
        await transport.close()
    }
}

/// Counts a test server's connections.
final class ConnectionCount: Sendable {
    private let value = Mutex(0)
    var count: Int { self.value.withLock { $0 } }
    func next() -> Int { self.value.withLock { $0 += 1; return $0 } }
}

/// A gateway as a starved socket meets it: on its first connection it answers the upgrade,
/// reads the first request, and closes with 1008 `no credential in time` without answering
/// (as when its deadline and the request crossed); on later ones it answers each request.
final class ScriptedGateway: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let connection: Int
    private var buffered = ByteBuffer()
    private var upgraded = false

    init(connection: Int) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = Self.unwrapInboundIn(data)
        self.buffered.writeBuffer(&incoming)
        if !self.upgraded {
            let text = String(buffer: self.buffered)
            guard let end = text.range(of: "\r\n\r\n") else { return }
            let key = text[..<end.lowerBound].split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { String($0.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces) } ?? ""
            let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
            self.buffered.moveReaderIndex(forwardBy: text[..<end.upperBound].utf8.count)
            self.buffered.discardReadBytes()
            self.upgraded = true
            context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(
                string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n")), promise: nil)
        }
        while let payload = Self.frame(&self.buffered) {
            guard payload.opcode == 0x1 else { continue }
            if self.connection == 1 {
                // Close 1008 with the gateway's reason for a socket none of whose requests it read.
                var close = context.channel.allocator.buffer(capacity: 64)
                let reason = Array(GatewayCloseReason.noCredential.utf8)
                close.writeInteger(UInt8(0x88))
                close.writeInteger(UInt8(2 + reason.count))
                close.writeInteger(UInt16(1008))
                close.writeBytes(reason)
                context.writeAndFlush(Self.wrapOutboundOut(close)).whenComplete { _ in context.close(promise: nil) }
                return
            }
            let id = (try? JSONParser.parse(bytes: payload.bytes))?["id"]
            let idText = id.flatMap { try? RPCJSON.encode($0) }.map { String(decoding: $0, as: UTF8.self) } ?? "null"
            let reply = Array(#"{"id":\#(idText),"result":{"service":"gateway"}}"#.utf8)
            var frame = context.channel.allocator.buffer(capacity: reply.count + 2)
            frame.writeInteger(UInt8(0x81))
            frame.writeInteger(UInt8(reply.count))
            frame.writeBytes(reply)
            context.writeAndFlush(Self.wrapOutboundOut(frame), promise: nil)
        }
    }

    /// One whole client frame (masked, a length under 126) off the front of `buffer`.
    private static func frame(_ buffer: inout ByteBuffer) -> (opcode: UInt8, bytes: [UInt8])? {
        guard buffer.readableBytes >= 6, let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
              let second = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) else { return nil }
        let length = Int(second & 0x7f)
        guard length < 126, buffer.readableBytes >= 6 + length, let mask = buffer.getBytes(at: buffer.readerIndex + 2, length: 4),
              let masked = buffer.getBytes(at: buffer.readerIndex + 6, length: length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 6 + length)
        return (first & 0x0f, masked.enumerated().map { $0.element ^ mask[$0.offset % 4] })
    }
}

/// A TLS server on loopback with a fresh self-signed certificate (made by `openssl`), that
/// completes handshakes and says nothing (or, with `echo`, sends back what it reads).
final class TLSTestServer: @unchecked Sendable {
    let port: Int
    let pin: KeyPin
    let channel: any Channel
    let directory: TemporaryDirectory

    private init(port: Int, pin: KeyPin, channel: any Channel, directory: TemporaryDirectory) {
        self.port = port
        self.pin = pin
        self.channel = channel
        self.directory = directory
    }

    /// - Parameter gatewayShaped: a certificate as the gateway makes it (not a CA, key usage
    ///   digital signature only, server auth), rather than openssl's default (a CA).
    /// - Parameter greeting: answer a WebSocket upgrade with its 101 and this text message in
    ///   one write (one TLS record, so one read at the client), as a server that greets.
    /// - Parameter scripted: a handler of its own for each connection, after TLS.
    static func start(gatewayShaped: Bool = false, echo: Bool = false, greeting: String? = nil,
                      scripted: (@Sendable () -> any ChannelInboundHandler)? = nil) async throws -> TLSTestServer {
        let (directory, certificate, key) = try Self.makeCertificate(gatewayShaped: gatewayShaped)
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(certificate)], privateKey: .privateKey(key))
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    if echo { try channel.pipeline.syncOperations.addHandler(Echo()) }
                    if let greeting { try channel.pipeline.syncOperations.addHandler(GreetingUpgrade(greeting: greeting)) }
                    if let scripted { try channel.pipeline.syncOperations.addHandler(scripted()) }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TLSTestServer(port: channel.localAddress!.port!, pin: try KeyPin(certificate: certificate), channel: channel, directory: directory)
    }

    /// A fresh self-signed certificate and its key, made by `openssl`.
    static func makeCertificate(gatewayShaped: Bool) throws -> (TemporaryDirectory, NIOSSLCertificate, NIOSSLPrivateKey) {
        let directory = TemporaryDirectory()
        let key = directory.file("key.pem"), cert = directory.file("cert.pem")
        let arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                         "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
            + (gatewayShaped ? ["-addext", "basicConstraints=critical,CA:FALSE", "-addext", "keyUsage=critical,digitalSignature",
                                "-addext", "extendedKeyUsage=serverAuth"] : [])
        // posix_spawn (ProcessSpawn), not Foundation's Process, which is not safe while
        // other tests start processes.
        let status = ChildExit.block(try Spawn(executable: "/usr/bin/openssl", arguments: arguments).start())
        guard status == 0 else { throw TestFailure("openssl could not make a certificate") }
        guard let certificate = try NIOSSLCertificate.fromPEMFile(cert).first else { throw TestFailure("openssl wrote no certificate") }
        return (directory, certificate, try NIOSSLPrivateKey(file: key, format: .pem))
    }

    func stop() { try? self.channel.close().wait() }
}

/// Sends back what it reads.
final class Echo: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }
}

/// Answers a WebSocket upgrade request with the 101 and one text message in a single write,
/// then reads and ignores what follows.
final class GreetingUpgrade: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let greeting: String
    private var request = ""
    private var answered = false

    init(greeting: String) { self.greeting = greeting }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.answered else { return }
        self.request += String(buffer: Self.unwrapInboundIn(data))
        guard let end = self.request.range(of: "\r\n\r\n") else { return }
        self.answered = true
        let key = self.request[..<end.lowerBound].split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
            .map { String($0.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces) } ?? ""
        let accept = Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
        var reply = context.channel.allocator.buffer(
            string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n")
        // A text frame as a server sends it: final, unmasked, a length under 126.
        let payload = Array(self.greeting.utf8)
        reply.writeInteger(UInt8(0x81))
        reply.writeInteger(UInt8(payload.count))
        reply.writeBytes(payload)
        context.writeAndFlush(Self.wrapOutboundOut(reply), promise: nil)
    }
}
