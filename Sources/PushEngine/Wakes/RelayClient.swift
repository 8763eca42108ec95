import AsyncHTTPClient
import Crypto
import Foundation
import WireJSON
import NIOCore
import NIOSSL
import PushAPI
import RelayCore
import Synchronization

/// Sends a home server's wakes to the wake relay: `POST <relay>/v1/wake`, signed with the
/// gateway's key (the key the devices pinned, which the relay checks against the pin
/// sealed in each handle).
struct RelayClient: WakeRoute {
    let http: HTTPClient
    let relay: String
    let signingKey: SigningKey
    let userAgent: String

    static func makeHTTPClient(trusting caFile: String?) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(30))
        // As many connections as wakes in flight (``WakeSender``): HTTP/1.1 carries one at a time.
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)
        if let caFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(caFile)
            configuration.tlsConfiguration = tls
        }
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    func wake(handle: String, kind: WakeKind, ttlSeconds: Int, now: Date) async -> WakeAnswer {
        let body: [UInt8]
        let headers: [(String, String)]
        do {
            body = try RPCJSON.encode(WakeRequest(
                handle: handle, kind: kind, collapseId: "screentime-\(kind.rawValue)", ttlSeconds: ttlSeconds))
            headers = try WakeSignature.headers(body: body, key: try self.signingKey.key(), time: now)
        } catch {
            return .retry(reason: "cannot sign the wake: \(error)", after: .seconds(60))
        }
        var request = HTTPClientRequest(url: self.relay + "/v1/wake")
        request.method = .POST
        request.headers.add(name: "User-Agent", value: self.userAgent)
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await self.http.execute(request, timeout: .seconds(30))
            let data = Array(buffer: try await response.body.collect(upTo: 64 * 1024))
            let status = Int(response.status.code)
            if status == 200 {
                return .sent(apnsId: (try? RPCJSON.decode(WakeResponse.self, from: data))?.apnsId)
            }
            let refusal = try? RPCJSON.decode(RelayErrorBody.self, from: data)
            let reason = refusal.map { "\($0.message) (\($0.error))" } ?? "HTTP \(status) from \(self.host)"
            switch (status, refusal?.error) {
            case (410, _): return .gone(.unregistered, reason)
            case (400, "invalid_handle"), (403, _): return .gone(.refused, reason)
            case (401, _):
                // The key or the clock: read the key again, and try later.
                self.signingKey.forget()
                return .retry(reason: reason, after: .seconds(60))
            case (429, _), (408, _), (500..<600, _):
                let after = response.headers.first(name: "Retry-After").flatMap(Double.init).map { Duration.milliseconds(Int64(min($0, 3600) * 1000)) }
                return .retry(reason: reason, after: after)
            default:
                return .drop(reason)
            }
        } catch {
            return .retry(reason: "\(self.host) could not be reached: \(error)", after: nil)
        }
    }

    var host: String { URL(string: self.relay)?.host ?? self.relay }

    func shutdown() async { try? await self.http.shutdown() }

    /// The gateway's private key, read from its PEM file when first needed (the gateway
    /// may make it after this service starts) and again after the relay refused a
    /// signature.
    final class SigningKey: Sendable {
        let path: String
        private let raw = Mutex<Data?>(nil)

        init(path: String) { self.path = path }

        func key() throws -> P256.Signing.PrivateKey {
            if let raw = self.raw.withLock({ $0 }) { return try P256.Signing.PrivateKey(rawRepresentation: raw) }
            let pem: String
            do {
                pem = try String(contentsOfFile: self.path, encoding: .utf8)
            } catch {
                throw SigningKeyError("cannot read the gateway's key \(self.path) (\(error)); start the gateway once, or point --wake-key at its key")
            }
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
                throw SigningKeyError("\(self.path) is not a P-256 private key: wakes are signed with the gateway's key, which must be P-256")
            }
            self.raw.withLock { $0 = key.rawRepresentation }
            return key
        }

        func forget() { self.raw.withLock { $0 = nil } }
    }

    struct SigningKeyError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
