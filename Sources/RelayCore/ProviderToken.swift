import Crypto
import Foundation
import RPCCore
import Synchronization

/// APNs's provider authentication token: a JWT signed ES256 with the publisher's `.p8`
/// key, `{"alg": "ES256", "kid": keyId}.{"iss": teamId, "iat": seconds}`. Apple refuses
/// one older than an hour and throttles one renewed more than every 20 minutes, so it is
/// made again after `lifetime` (50 minutes), or at once when APNs says it expired.
public final class ProviderToken: Sendable {
    public let keyId: String
    public let teamId: String
    /// The key's raw scalar (swift-crypto's keys are not Sendable; one is made per signing).
    private let key: Data
    private let lifetime: TimeInterval
    private let current = Mutex<(token: String, issued: Date)?>(nil)

    public init(keyId: String, teamId: String, key: P256.Signing.PrivateKey, lifetime: TimeInterval = 50 * 60) {
        self.keyId = keyId
        self.teamId = teamId
        self.key = key.rawRepresentation
        self.lifetime = lifetime
    }

    /// Reads a `.p8` file's PEM (PKCS#8 "PRIVATE KEY").
    public convenience init(keyId: String, teamId: String, p8 pem: String) throws {
        self.init(keyId: keyId, teamId: teamId, key: try P256.Signing.PrivateKey(pemRepresentation: pem))
    }

    /// The token to send now.
    public func token(now: Date = Date()) throws -> String {
        if let current = self.current.withLock({ $0 }), now.timeIntervalSince(current.issued) < self.lifetime, now >= current.issued {
            return current.token
        }
        return try self.renew(now: now)
    }

    /// A new token in place of `expired` (after APNs said `ExpiredProviderToken`), unless
    /// another request renewed it already.
    @discardableResult
    public func renew(replacing expired: String, now: Date = Date()) throws -> String {
        if let current = self.current.withLock({ $0 }), current.token != expired { return current.token }
        return try self.renew(now: now)
    }

    /// A new token.
    @discardableResult
    public func renew(now: Date = Date()) throws -> String {
        let header = try RPCJSON.encodeSorted(JSONValue.object(["alg": "ES256", "kid": .string(self.keyId)]))
        let claims = try RPCJSON.encodeSorted(JSONValue.object(["iss": .string(self.teamId), "iat": .int(Int64(now.timeIntervalSince1970))]))
        let input = Base64URL.encode(Data(header)) + "." + Base64URL.encode(Data(claims))
        let signature = try P256.Signing.PrivateKey(rawRepresentation: self.key).signature(for: Data(input.utf8))
        let token = input + "." + Base64URL.encode(signature.rawRepresentation)
        self.current.withLock { $0 = (token, now) }
        return token
    }
}
