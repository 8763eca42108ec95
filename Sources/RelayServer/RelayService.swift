import APNs
import AsyncHTTPClient
import EdgeLimits
import Foundation
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
import WireJSON

/// The relay's HTTP service: `POST /v1/seal`, `POST /v1/wake`, `GET /v1/health`.
public struct RelayService: Service {
    let application: Application<RouterResponder<RelayRequestContext>>
    let http: HTTPClient
    /// Shared with other copies (its connections run beside the server); nil: in memory.
    let shared: PostgresState?

    public init(_ configuration: RelayConfiguration, logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws {
        // Everything read and checked before anything is made that must be shut down.
        let sealingKeys = configuration.sealingKeys.compactMap(HandleSealer.key(fromText:))
        guard !sealingKeys.isEmpty, sealingKeys.count == configuration.sealingKeys.count else {
            throw RelayConfigurationError("a sealing key must be base64 of 32 bytes")
        }
        let providerToken: ProviderToken
        do {
            providerToken = try ProviderToken(keyId: configuration.apnsKeyId, teamId: configuration.apnsTeamId, p8: configuration.apnsKey)
        } catch {
            throw RelayConfigurationError("the APNs key (--apns-key-file) is not a P-256 PKCS#8 PEM (.p8) key: \(error)")
        }
        if let caFile = configuration.apnsCAFile { _ = try Self.certificates(caFile, option: "--apns-ca-file") }
        let server = try Self.serverBuilder(configuration, logger: logger)
        let limits = CountLimits(configuration)
        let shared = try configuration.stateDatabase.map { url throws(RelayConfigurationError) in try PostgresState(url: url, limits: limits, logger: logger) }
        let state: any RelayState = shared
            ?? MemoryState(limits: limits, maximumSeenWakes: configuration.maximumSeenWakes, maximumKeys: configuration.maximumLimitedKeys)

        let http = APNsClient.makeHTTPClient(trusting: configuration.apnsCAFile)
        let apnsURL = configuration.apnsURL
        let relay = WakeRelay(
            sealer: HandleSealer(keys: sealingKeys, lifetime: configuration.handleLifetime), topics: configuration.topics,
            apns: APNsClient(http: http, providerToken: providerToken, baseURL: { apnsURL ?? APNsPush.host($0) }, attempts: configuration.apnsAttempts, logger: logger),
            state: state, logger: logger)
        let sealLimiter = WindowLimiter(limit: configuration.sealsPerMinutePerAddress, capacity: configuration.maximumLimitedKeys)
        let wakeLimiter = WindowLimiter(limit: configuration.wakesPerMinutePerAddress, capacity: configuration.maximumLimitedKeys)
        let trustForwardedFor = configuration.trustForwardedFor
        let requestTimeout = configuration.requestTimeout
        let router = Router(context: RelayRequestContext.self)
        router.get("/v1/health") { _, context in
            RequestDeadline.disarmConnection(of: context.channel)
            return Self.json(200, ["status": "ok"])
        }
        router.post("/v1/seal") { request, context -> Response in
            RequestDeadline.disarmConnection(of: context.channel)
            do {
                // Sealing is free to ask for: one address may not make the relay do it without end.
                try WakeRelay.check(sealLimiter.take(AddressKey.of(context.clientAddress(request, trustForwardedFor: trustForwardedFor))))
                let body = try await context.wholeBody(request, within: requestTimeout)
                guard let seal = try? RPCJSON.decode(SealRequest.self, from: body) else {
                    throw RelayError.invalidRequest("the body must be {token, topic, environment: production|development, pin}")
                }
                return Self.json(202, try await relay.seal(seal))
            } catch {
                return Self.error(error)
            }
        }
        router.post("/v1/wake") { request, context -> Response in
            RequestDeadline.disarmConnection(of: context.channel)
            do {
                // Counted by address before anything costs the relay work: a caller with keys
                // of its own making spends its own budget, not every family's.
                try WakeRelay.check(wakeLimiter.take(AddressKey.of(context.clientAddress(request, trustForwardedFor: trustForwardedFor))))
                let body = try await context.wholeBody(request, within: requestTimeout)
                let header = { (name: String) in HTTPField.Name(name).flatMap { request.headers[$0] } }
                return Self.json(200, try await relay.wake(body: body, key: header(WakeSignature.keyHeader),
                                                           time: header(WakeSignature.timeHeader), signature: header(WakeSignature.signatureHeader)))
            } catch {
                return Self.error(error)
            }
        }
        self.http = http
        self.shared = shared
        self.application = Application(
            router: router, server: server, configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "screentime-relayd"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) }, logger: logger)
    }

    /// HTTP/2 by ALPN over TLS (one connection carries a home server's wakes together) or
    /// HTTP/1.1, each connection bounded (``BoundedChildChannel``).
    static func serverBuilder(_ configuration: RelayConfiguration, logger: Logger) throws -> HTTPServerBuilder {
        let gate = ConnectionGate(total: configuration.maximumConnections, perAddress: configuration.maximumConnectionsPerAddress)
        let stream = HTTP1Channel.Configuration(idleTimeout: TimeAmount(configuration.idleTimeout))
        let deadline = TimeAmount(configuration.requestTimeout)
        if let tls = configuration.tls {
            let chain = try Self.certificates(tls.certificateFile, option: "--tls-certificate")
            let key: NIOSSLPrivateKey
            do {
                key = try NIOSSLPrivateKey(file: tls.keyFile, format: .pem)
            } catch {
                throw RelayConfigurationError("cannot read --tls-key \(tls.keyFile) as a PEM private key (\(Self.reason(error, file: tls.keyFile)))")
            }
            var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            tls.minimumTLSVersion = .tlsv12
            var http2Configuration = HTTP2UpgradeChannel.Configuration(idleTimeout: configuration.idleTimeout, streamConfiguration: stream)
            // A connection is made again now and then, so none is held for ever.
            http2Configuration.maxAgeTimeout = .seconds(3600)
            let tlsConfiguration = tls, http2 = http2Configuration
            return HTTPServerBuilder { responder in
                BoundedChildChannel(base: try HTTP2UpgradeChannel(tlsConfiguration: tlsConfiguration, configuration: http2, responder: responder),
                                    gate: gate, deadline: deadline, logger: logger)
            }
        }
        return HTTPServerBuilder { responder in
            BoundedChildChannel(base: HTTP1Channel(responder: responder, configuration: stream), gate: gate, deadline: deadline, logger: logger)
        }
    }

    /// The certificates in a PEM file, or a sentence saying why there are none.
    static func certificates(_ file: String, option: String) throws -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(file)
        } catch {
            throw RelayConfigurationError("cannot read \(option) \(file) as PEM certificates (\(Self.reason(error, file: file)))")
        }
        guard !certificates.isEmpty else { throw RelayConfigurationError("\(option) \(file) holds no PEM certificate") }
        return certificates
    }

    /// Why a file could not be used, in words.
    public static func reason(_ error: any Error, file: String) -> String {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) { return "there is no such file" }
        if isDirectory.boolValue { return "it is a directory, not a file" }
        if !FileManager.default.isReadableFile(atPath: file) { return "it is not readable by this user" }
        return "not in the expected format: \(error)"
    }

    public func run() async throws {
        do {
            if let shared = self.shared {
                // The database's connections live as long as the server.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await shared.run() }
                    defer { group.cancelAll() }
                    try await self.application.run()
                }
            } else {
                try await self.application.run()
            }
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
        switch relayError {
        case .rateLimited(let seconds), .busy(let seconds), .deviceRateLimited(_, let seconds): response.headers[.retryAfter] = String(seconds)
        default: break
        }
        return response
    }
}

/// A request's context: the connection's remote address for the per-address limits, and
/// its channel, to disarm the connection's deadline once the request is whole.
public struct RelayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
    }

    /// The request's body, which must come whole within `limit` and be at most
    /// ``RelayService/bodyLimit``.
    func wholeBody(_ request: Request, within limit: Duration) async throws -> [UInt8] {
        let body = request.body
        let collected = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask {
                do { return try await body.collect(upTo: RelayService.bodyLimit) } catch { throw RelayError.tooLarge(RelayService.bodyLimit) }
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let collected else { throw RelayError.invalidRequest("the body did not arrive within \(limit)") }
        return Array(buffer: collected)
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

