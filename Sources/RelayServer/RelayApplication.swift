import APNs
import AsyncHTTPClient
import Foundation
import WireJSON
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import RelayCore
import ServiceLifecycle

/// How the relay runs: what `screentime-relayd`'s options say.
public struct RelayConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// The certificate chain and key it serves with; nil: plain HTTP (behind a reverse
    /// proxy that terminates TLS).
    public var tls: (certificateFile: String, keyFile: String)?
    public var sealingKey: String
    public var topics: Set<String>
    public var apnsKeyId: String
    public var apnsTeamId: String
    /// The `.p8` key's PEM.
    public var apnsKey: String
    /// Apple's hosts, unless a stand-in's base URL is given (tests).
    public var apnsURL: String?
    /// A CA to trust for APNs (a stand-in's, in tests); nil: the system's.
    public var apnsCAFile: String?
    public var wakesPerMinutePerServer: Int
    /// Seals one client address may ask for a minute.
    public var sealsPerMinutePerAddress: Int
    /// Behind a reverse proxy: the client's address is the last `X-Forwarded-For` entry
    /// (the one the proxy added), not the connection's.
    public var trustForwardedFor: Bool
    public var apnsAttempts: Int

    public init(host: String, port: Int, tls: (certificateFile: String, keyFile: String)?, sealingKey: String, topics: Set<String>,
                apnsKeyId: String, apnsTeamId: String, apnsKey: String, apnsURL: String? = nil, apnsCAFile: String? = nil,
                wakesPerMinutePerServer: Int = 120, sealsPerMinutePerAddress: Int = 60, trustForwardedFor: Bool = false, apnsAttempts: Int = 3) {
        self.host = host
        self.port = port
        self.tls = tls
        self.sealingKey = sealingKey
        self.topics = topics
        self.apnsKeyId = apnsKeyId
        self.apnsTeamId = apnsTeamId
        self.apnsKey = apnsKey
        self.apnsURL = apnsURL
        self.apnsCAFile = apnsCAFile
        self.wakesPerMinutePerServer = wakesPerMinutePerServer
        self.sealsPerMinutePerAddress = sealsPerMinutePerAddress
        self.trustForwardedFor = trustForwardedFor
        self.apnsAttempts = apnsAttempts
    }
}

public enum RelayConfigurationError: Error, CustomStringConvertible {
    case unreadable(String)
    public var description: String {
        switch self {
        case .unreadable(let why): why
        }
    }
}

/// The relay's HTTP service: `POST /v1/seal`, `POST /v1/wake`, `GET /v1/health`.
public struct RelayService: Service {
    let application: Application<RouterResponder<RelayRequestContext>>
    let http: HTTPClient

    public init(_ configuration: RelayConfiguration, logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws {
        guard let sealingKey = HandleSealer.key(fromText: configuration.sealingKey) else {
            throw RelayConfigurationError.unreadable("the sealing key must be base64 of 32 bytes")
        }
        let providerToken: ProviderToken
        do {
            providerToken = try ProviderToken(keyId: configuration.apnsKeyId, teamId: configuration.apnsTeamId, p8: configuration.apnsKey)
        } catch {
            throw RelayConfigurationError.unreadable("the APNs key is not a P-256 PKCS#8 PEM (.p8) key: \(error)")
        }
        let http = APNsClient.makeHTTPClient(trusting: configuration.apnsCAFile)
        let apnsURL = configuration.apnsURL
        let relay = WakeRelay(
            sealer: HandleSealer(key: sealingKey), topics: configuration.topics,
            apns: APNsClient(http: http, providerToken: providerToken, baseURL: { apnsURL ?? APNsPush.host($0) }, attempts: configuration.apnsAttempts, logger: logger),
            limiter: WakeLimiter(perMinute: configuration.wakesPerMinutePerServer), logger: logger)
        let sealLimiter = WakeLimiter(perMinute: configuration.sealsPerMinutePerAddress)
        let trustForwardedFor = configuration.trustForwardedFor
        let router = Router(context: RelayRequestContext.self)
        router.get("/v1/health") { _, _ in Self.json(200, ["status": "ok"]) }
        router.post("/v1/seal") { request, context -> Response in
            // Sealing is free to ask for: one address may not make the relay do it without end.
            let address = context.clientAddress(request, trustForwardedFor: trustForwardedFor)
            do {
                try sealLimiter.take("address " + address, now: Date())
            } catch {
                return Self.error(error)
            }
            guard let body = try? await request.body.collect(upTo: Self.bodyLimit) else { return Self.error(RelayError.tooLarge(Self.bodyLimit)) }
            guard let seal = try? RPCJSON.decode(SealRequest.self, from: Array(buffer: body)) else {
                return Self.error(RelayError.invalidRequest("the body must be {token, topic, environment: production|development, pin}"))
            }
            do {
                return Self.json(200, try relay.seal(seal))
            } catch {
                return Self.error(error)
            }
        }
        router.post("/v1/wake") { request, _ -> Response in
            guard let body = try? await request.body.collect(upTo: Self.bodyLimit) else { return Self.error(RelayError.tooLarge(Self.bodyLimit)) }
            let header = { (name: String) in HTTPField.Name(name).flatMap { request.headers[$0] } }
            do {
                return Self.json(200, try await relay.wake(body: Array(buffer: body), key: header(WakeSignature.keyHeader),
                                                           time: header(WakeSignature.timeHeader), signature: header(WakeSignature.signatureHeader)))
            } catch {
                return Self.error(error)
            }
        }
        let server: HTTPServerBuilder
        if let tls = configuration.tls {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificateFile).map { NIOSSLCertificateSource.certificate($0) }
            var tlsConfiguration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .file(tls.keyFile))
            tlsConfiguration.minimumTLSVersion = .tlsv12
            // HTTP/2 by ALPN (one connection carries a home server's wakes together), HTTP/1.1 otherwise.
            server = try .http2Upgrade(tlsConfiguration: tlsConfiguration)
        } else {
            server = .http1()
        }
        self.http = http
        self.application = Application(
            router: router, server: server, configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "screentime-relayd"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) }, logger: logger)
    }

    public func run() async throws {
        do {
            try await self.application.run()
        } catch {
            try? await self.http.shutdown()
            throw error
        }
        try await self.http.shutdown()
    }

    /// The largest body either endpoint takes (a seal or a wake is a few hundred bytes).
    static let bodyLimit = 16 * 1024

    static func json<T: Encodable>(_ status: Int, _ value: T) -> Response {
        let data = (try? RPCJSON.encode(value)) ?? Array("{}".utf8)
        return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func error(_ error: any Error) -> Response {
        let relayError = (error as? RelayError) ?? .invalidRequest("\(error)")
        var response = Self.json(relayError.status, RelayErrorBody(error: relayError.code, message: relayError.message))
        if case .rateLimited(let seconds) = relayError { response.headers[.retryAfter] = String(seconds) }
        return response
    }
}

/// A request's context, with the connection's remote address for the per-address limit.
public struct RelayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The client's address: the connection's, or behind a trusted proxy the last entry
    /// of `X-Forwarded-For` (what the proxy itself appended; earlier ones are the client's
    /// to invent).
    func clientAddress(_ request: Request, trustForwardedFor: Bool) -> String {
        if trustForwardedFor, let forwarded = request.headers[.init("X-Forwarded-For")!],
           let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty {
            return last
        }
        return self.remoteAddress?.ipAddress ?? "unknown"
    }
}
