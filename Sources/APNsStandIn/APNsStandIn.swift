import Crypto
import Foundation
import WireJSON
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import RelayCore
import Synchronization

/// APNs as the relay sees it, on this machine (tests and benchmarks): HTTP/2 over TLS (by ALPN, as Apple), checking
/// what Apple checks (the provider token's ES256 signature with the key's public half, its
/// `kid`, `iss` and age; the topic, push type and priority; the 4 KB payload limit; the
/// token's form) and answering as Apple does: 200 with an `apns-id`, or Apple's status and
/// JSON reason for the tokens a test chooses.
public final class APNsStandIn: Sendable {
    public struct Received: Sendable {
        public var token: String
        public var headers: [String: String]
        public var payload: String
        public var http2: Bool
        /// The `apns-id` it was answered with (the relay's `apnsId`).
        public var apnsId: String = ""
    }

    public let keyId = "ABC123DEFG"
    public let teamId = "DEF123GHIJ"
    public let topic = "com.example.screentime"
    /// The app's APNs key (its raw scalar: swift-crypto's keys are not Sendable).
    private let keyBytes = P256.Signing.PrivateKey().rawRepresentation
    private var key: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: self.keyBytes) }
    /// The CA of the stand-in's certificate (the relay trusts it with --apns-ca-file).
    public let certificateFile: String
    private let received = Mutex<[Received]>([])
    /// Told of each push taken, on the server's event loop.
    private let onPush: @Sendable (Received) -> Void
    private let keeping: Bool
    private let answers = Mutex<[String: [(status: Int, reason: String)]]>([:])
    private let task = Mutex<Task<Void, any Error>?>(nil)
    private let port = Mutex<Int?>(nil)

    public var p8: String { self.key.pemRepresentation }
    public var url: String { "https://localhost:\(self.port.withLock { $0 ?? 0 })" }
    /// The pushes taken so far (when not counted only).
    public var pushes: [Received] { self.received.withLock { $0 } }

    /// The next answers for `token`, in order (then 200).
    public func answer(_ token: String, _ answers: [(status: Int, reason: String)]) {
        self.answers.withLock { $0[token] = answers }
    }

    /// Serves on a free port of 127.0.0.1, its certificate files in `directory`. With
    /// `keeping` false the pushes are only handed to `onPush` (a benchmark's millions).
    public init(directory: String, keeping: Bool = true, onPush: @escaping @Sendable (Received) -> Void = { _ in }) async throws {
        self.onPush = onPush
        self.keeping = keeping
        let authority = try LocalCA(in: directory, name: "apns")
        self.certificateFile = authority.caFile
        let chain = try NIOSSLCertificate.fromPEMFile(authority.certificateFile).map { NIOSSLCertificateSource.certificate($0) }
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .file(authority.keyFile))
        let router = Router()
        router.post("/3/device/:token") { request, context -> Response in
            let token = context.parameters.get("token") ?? ""
            let payload = try await request.body.collect(upTo: 1 << 20)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            return self.handle(token: token, headers: headers, payload: Array(buffer: payload), http2: request.head.scheme == "https" && request.head.authority != nil)
        }
        let started = AsyncStream<Int>.makeStream()
        let application = Application(
            router: router, server: try .http2Upgrade(tlsConfiguration: tls), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in started.continuation.yield(channel.localAddress?.port ?? 0) }, logger: Self.quietLogger)
        self.task.withLock { $0 = Task { try await application.runService(gracefulShutdownSignals: []) } }
        for await port in started.stream {
            self.port.withLock { $0 = port }
            break
        }
    }

    /// Hummingbird's own lines (started, and errors when a stop cuts its connections) say
    /// nothing about APNs.
    private static var quietLogger: Logger {
        var logger = Logger(label: "apns-stand-in")
        logger.logLevel = .critical
        return logger
    }

    deinit { self.task.withLock { $0?.cancel() } }

    public func stop() {
        self.task.withLock { $0?.cancel() }
    }

    private func handle(token: String, headers: [String: String], payload: [UInt8], http2: Bool) -> Response {
        func reason(_ status: Int, _ reason: String) -> Response {
            let body = ByteBuffer(string: #"{"reason":"\#(reason)"}"#)
            return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        }
        guard token.count == 64, token.allSatisfy(\.isHexDigit) else { return reason(400, "BadDeviceToken") }
        guard let authorization = headers["authorization"], authorization.hasPrefix("bearer ") else { return reason(403, "MissingProviderToken") }
        guard self.validProviderToken(String(authorization.dropFirst(7))) else { return reason(403, "InvalidProviderToken") }
        guard headers["apns-topic"] == self.topic else { return reason(400, "TopicDisallowed") }
        switch (headers["apns-push-type"], headers["apns-priority"]) {
        case ("background", "5"), ("alert", "10"): break
        case ("background", _): return reason(400, "BadPriority")
        default: return reason(400, "InvalidPushType")
        }
        guard payload.count <= 4096 else { return reason(413, "PayloadTooLarge") }
        guard (try? JSONSerialization.jsonObject(with: Data(payload))) != nil else { return reason(400, "PayloadEmpty") }
        if let collapse = headers["apns-collapse-id"], collapse.utf8.count > 64 { return reason(400, "BadCollapseId") }
        let next = self.answers.withLock { answers -> (status: Int, reason: String)? in
            guard var queue = answers[token], !queue.isEmpty else { return nil }
            let first = queue.removeFirst()
            answers[token] = queue
            return first
        }
        if let next { return reason(next.status, next.reason) }
        let apnsId = headers["apns-id"] ?? UUID().uuidString.lowercased()
        let push = Received(token: token, headers: headers, payload: String(decoding: payload, as: UTF8.self), http2: http2, apnsId: apnsId)
        if self.keeping { self.received.withLock { $0.append(push) } }
        self.onPush(push)
        return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: apnsId])
    }

    /// ES256 with the key's public half, this key id and team, issued within the hour.
    private func validProviderToken(_ token: String) -> Bool {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]),
              let headerJSON = try? JSONSerialization.jsonObject(with: header) as? [String: Any],
              let claimsJSON = try? JSONSerialization.jsonObject(with: claims) as? [String: Any],
              headerJSON["alg"] as? String == "ES256", headerJSON["kid"] as? String == self.keyId, claimsJSON["iss"] as? String == self.teamId,
              let issued = (claimsJSON["iat"] as? NSNumber)?.doubleValue, abs(Date().timeIntervalSince1970 - issued) < 3600,
              let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return self.key.publicKey.isValidSignature(parsed, for: Data((parts[0] + "." + parts[1]).utf8))
    }
}
