import APNsStandIn
import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOSSL
import RelayCore
import RelayServer
import TestSupport

/// A wake relay in this process on a free port, with its TLS certificate from a test CA,
/// pushing to an APNs stand-in; and a client for it.
public final class LocalRelay: Sendable {
    public let apns: TestAPNs
    public let directory = TemporaryDirectory()
    public let client: HTTPClient
    public let url: String
    public let sealingKey: String
    /// The CA its certificate is signed by (nil when it serves plain HTTP).
    public let caFile: String?
    private let task: Task<Void, any Error>

    /// `tls` false: plain HTTP, as behind a reverse proxy (what an app's URLSession on
    /// Linux can reach without trusting a test CA).
    /// `port` 0: a free one.
    /// `configure`: any other option of the relay's.
    public init(apns: TestAPNs, sealingKey: String = HandleSealer.newKeyText(), wakesPerMinute: Int = 120, sealsPerMinute: Int = 60, tls: Bool = true,
                port: Int = 0, configure: (inout RelayConfiguration) -> Void = { _ in }) async throws {
        self.apns = apns
        self.sealingKey = sealingKey
        let authority = try LocalCA(in: self.directory.path, name: "relay")
        self.caFile = tls ? authority.caFile : nil
        var configuration = RelayConfiguration(
            host: "127.0.0.1", port: port, tls: tls ? (authority.certificateFile, authority.keyFile) : nil, sealingKeys: [sealingKey],
            topics: [apns.topic], apnsKeyId: apns.keyId, apnsTeamId: apns.teamId, apnsKey: apns.p8, apnsURL: apns.url,
            apnsCAFile: apns.certificateFile, wakesPerMinutePerServer: wakesPerMinute, sealsPerMinutePerAddress: sealsPerMinute)
        configure(&configuration)
        let ready = AsyncStream<Int>.makeStream()
        let service = try RelayService(configuration, logger: Logger(label: "relay")) { port in ready.continuation.yield(port) }
        self.task = Task { try await service.run() }
        var port = 0
        for await bound in ready.stream {
            port = bound
            break
        }
        self.url = tls ? "https://localhost:\(port)" : "http://127.0.0.1:\(port)"
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(authority.caFile)
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(tlsConfiguration: tls))
    }

    /// A test that failed before ``stop()`` must not take the process down with it
    /// (async-http-client traps on a client dropped without a shutdown).
    deinit {
        self.task.cancel()
        try? self.client.syncShutdown()
    }

    public func stop() async {
        try? await self.client.shutdown()
        self.task.cancel()
        _ = try? await self.task.value
    }

    /// POSTs JSON; returns the status and the body's JSON object.
    public func post(_ path: String, _ body: [UInt8], headers: [(String, String)] = []) async throws -> (status: Int, body: [String: Any], headers: [String: String]) {
        var request = HTTPClientRequest(url: self.url + path)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await self.client.execute(request, timeout: .seconds(30))
        let data = try await response.body.collect(upTo: 1 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(Array(buffer: data)))) as? [String: Any] ?? [:]
        return (Int(response.status.code), object, Dictionary(response.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first }))
    }

    /// Seals `token` as an app does, and takes the handle from the push that brought it to
    /// the device (the relay's answer never holds it).
    public func seal(token: String, pin: String, environment: String = "production") async throws -> String {
        let before = self.apns.deliveries.all.filter { $0.token == token }.count
        let body = try JSONSerialization.data(withJSONObject: ["token": token, "topic": self.apns.topic, "environment": environment, "pin": pin])
        let reply = try await self.post("/v1/seal", Array(body))
        guard reply.status == 202, reply.body["handle"] == nil else { throw TestFailure("the relay did not send a handle: \(reply)") }
        return try await self.apns.handle(for: token, count: before + 1)
    }

    /// A home server's wake, signed with its key.
    public func wake(_ handle: String, kind: String = "background", as server: P256.Signing.PrivateKey, collapseId: String? = nil,
              time: Date = Date()) async throws -> (status: Int, body: [String: Any], headers: [String: String]) {
        var fields: [String: Any] = ["handle": handle, "kind": kind, "id": WakeRequest.newId()]
        if let collapseId { fields["collapseId"] = collapseId }
        let body = Array(try JSONSerialization.data(withJSONObject: fields))
        return try await self.post("/v1/wake", body, headers: try WakeSignature.headers(body: body, key: server, time: time))
    }

    /// A 32-byte APNs device token, hex, every byte `byte`.
    public static func token(_ byte: UInt8) -> String { String(repeating: String(format: "%02x", byte), count: 32) }
    /// The pin of a server key, as devices hold it.
    public static func pin(_ key: P256.Signing.PrivateKey) -> String { WakeSignature.pin(spki: key.publicKey.derRepresentation) }
}
