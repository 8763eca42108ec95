import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOSSL
import RelayCore

/// Sends pushes to APNs over HTTP/2 (async-http-client negotiates it by ALPN, as Apple
/// requires), with the provider token; retries 429 and 5xx with backoff and renews an
/// expired provider token once.
public struct APNsClient: Sendable {
    public let http: HTTPClient
    let providerToken: ProviderToken
    /// APNs's base URL per environment (Apple's, or a stand-in's in tests).
    let baseURL: @Sendable (WakeRegistration.Environment) -> String
    let attempts: Int
    let logger: Logger

    public init(http: HTTPClient, providerToken: ProviderToken, baseURL: @escaping @Sendable (WakeRegistration.Environment) -> String,
                attempts: Int, logger: Logger) {
        self.http = http
        self.providerToken = providerToken
        self.baseURL = baseURL
        self.attempts = attempts
        self.logger = logger
    }

    public static func makeHTTPClient(trusting caFile: String?) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.httpVersion = .automatic
        if let caFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(caFile)
            configuration.tlsConfiguration = tls
        }
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(20))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Sends a wake; returns APNs's final answer.
    public func send(_ kind: WakeRequest.Kind, to registration: WakeRegistration, collapseId: String?, ttlSeconds: Int?) async -> APNsOutcome {
        await self.send(to: registration) { token in
            APNsPush.wake(kind, registration: registration, providerToken: token, collapseId: collapseId, ttlSeconds: ttlSeconds)
        }
    }

    /// Hands a device its sealed handle in a silent push; returns APNs's final answer.
    public func deliver(handle: String, to registration: WakeRegistration) async -> APNsOutcome {
        await self.send(to: registration) { token in APNsPush.handleDelivery(handle, registration: registration, providerToken: token) }
    }

    /// Sends the push `make` builds with the current provider token, renewing it once and
    /// retrying 5xx with backoff.
    private func send(to registration: WakeRegistration, _ make: (String) -> APNsPush) async -> APNsOutcome {
        var renewed = false
        var delay = Duration.milliseconds(200)
        var outcome = APNsOutcome.retry(status: 0, reason: "not sent")
        var used = ""
        for attempt in 1...self.attempts {
            do {
                let token = try self.providerToken.token()
                used = token
                outcome = try await self.post(make(token), environment: registration.environment)
            } catch {
                outcome = .retry(status: 0, reason: "\(error)")
            }
            switch outcome {
            case .expiredProviderToken where !renewed:
                renewed = true
                // Renewed once for all the requests that failed with it (Apple throttles renewals).
                _ = try? self.providerToken.renew(replacing: used)
                continue
            case .retry where attempt < self.attempts:
                self.logger.info("APNs asked to retry", metadata: ["attempt": "\(attempt)", "outcome": "\(outcome)"])
                try? await Task.sleep(for: delay)
                delay *= 4
                continue
            default:
                return outcome
            }
        }
        return outcome
    }

    private func post(_ push: APNsPush, environment: WakeRegistration.Environment) async throws -> APNsOutcome {
        var request = HTTPClientRequest(url: self.baseURL(environment) + push.path)
        request.method = .POST
        for (name, value) in push.headers { request.headers.add(name: name, value: value) }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: push.payload))
        let response = try await self.http.execute(request, timeout: .seconds(20))
        let body = try await response.body.collect(upTo: 64 * 1024)
        return APNsOutcome.of(status: Int(response.status.code), apnsId: response.headers.first(name: "apns-id"), body: Array(buffer: body))
    }
}
