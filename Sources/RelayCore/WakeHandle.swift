import Crypto
import Foundation
import RPCCore

/// What a device's wake handle holds: its APNs device token, the app's topic, the APNs
/// environment, and the pin of the home server allowed to wake it. Only the relay that
/// sealed it can read it.
public struct WakeRegistration: Codable, Sendable, Hashable {
    /// Which APNs the token belongs to: `development` for builds run from Xcode,
    /// `production` for TestFlight and the App Store.
    public enum Environment: String, StringEnum {
        case production, development
    }

    /// The APNs device token, hex.
    public var token: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    public var environment: Environment
    /// The home server's key pin (base64 SHA-256 of its SubjectPublicKeyInfo): the only
    /// key a wake for this handle may be signed with.
    public var pin: String

    /// Whether `text` has the form of an APNs device token: 32 to 200 ASCII hex digits, an
    /// even number (bytes, in hex). Anything else would only be refused by APNs later.
    public static func isDeviceToken(_ text: String) -> Bool {
        (32...200).contains(text.utf8.count) && text.utf8.count % 2 == 0
            && text.utf8.allSatisfy { (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0) }
    }

    public init(token: String, topic: String, environment: Environment, pin: String) {
        self.token = token
        self.topic = topic
        self.environment = environment
        self.pin = pin
    }
}

/// Seals registrations into opaque handles and opens them: ChaChaPoly with the relay's
/// sealing key, so a handle can be neither read nor changed by anyone else, and the relay
/// keeps no registration anywhere. A handle is `v2.<key id>.<base64url>`: it names the key
/// that sealed it (so the publisher can rotate keys, the old one still opening for an
/// overlap) and holds the time it was sealed (so it expires: the app seals again at each
/// launch and registers the new handle).
public struct HandleSealer: Sendable {
    /// A sealing key and its id (8 hex digits of a hash of it: names it, tells nothing of it).
    struct Key: Sendable {
        let id: String
        /// The key's bytes (swift-crypto's keys are not Sendable; one is made per use).
        let bytes: Data
    }

    /// The first seals; every one opens.
    private let keys: [Key]
    /// How long a handle is good for after it was sealed.
    public let lifetime: TimeInterval
    /// Bound into every handle: a handle is valid for this purpose and version only.
    private static let context = Data("screentime-wake-handle-v2".utf8)
    /// The default lifetime: 30 days.
    public static let defaultLifetime: TimeInterval = 30 * 86_400

    /// `keys`: the first seals, the others (older ones, kept for an overlap) only open.
    public init(keys: [SymmetricKey], lifetime: TimeInterval = HandleSealer.defaultLifetime) {
        precondition(!keys.isEmpty, "a sealer needs a key")
        self.keys = keys.map { key in
            let bytes = key.withUnsafeBytes { Data($0) }
            let digest = SHA256.hash(data: Data("screentime-sealing-key-id".utf8) + bytes)
            return Key(id: digest.prefix(4).map { String(format: "%02x", $0) }.joined(), bytes: bytes)
        }
        self.lifetime = lifetime
    }

    public init(key: SymmetricKey, lifetime: TimeInterval = HandleSealer.defaultLifetime) {
        self.init(keys: [key], lifetime: lifetime)
    }

    /// The id of the key that seals.
    public var sealingKeyId: String { self.keys[0].id }

    /// What a handle holds: the registration and when it was sealed (Unix seconds).
    private struct Sealed: Codable {
        var token: String
        var topic: String
        var environment: WakeRegistration.Environment
        var pin: String
        var issued: Int64
    }

    public func seal(_ registration: WakeRegistration, now: Date = Date()) throws -> String {
        let key = self.keys[0]
        let sealed = Sealed(token: registration.token, topic: registration.topic, environment: registration.environment, pin: registration.pin,
                            issued: Int64(now.timeIntervalSince1970))
        let box = try ChaChaPoly.seal(Data(try RPCJSON.encode(sealed)), using: SymmetricKey(data: key.bytes),
                                      authenticating: Self.context + Data(key.id.utf8))
        return "v2.\(key.id)." + Base64URL.encode(box.combined)
    }

    /// The registration inside `handle`; `RelayError.invalidHandle` when it was not sealed
    /// by a key of this relay's or was changed, `handleExpired` when it is too old (or of a
    /// version that had no time in it).
    public func open(_ handle: String, now: Date = Date()) throws(RelayError) -> WakeRegistration {
        if handle.hasPrefix("v1.") { throw .handleExpired("was sealed by an older relay, with no expiry") }
        let parts = handle.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v2" else { throw .invalidHandle }
        guard let key = self.keys.first(where: { $0.id == parts[1] }) else {
            throw .handleExpired("was sealed with a key this relay no longer holds")
        }
        guard let combined = Base64URL.decode(String(parts[2])),
              let box = try? ChaChaPoly.SealedBox(combined: combined),
              let plain = try? ChaChaPoly.open(box, using: SymmetricKey(data: key.bytes), authenticating: Self.context + Data(key.id.utf8)),
              let sealed = try? RPCJSON.decode(Sealed.self, from: plain)
        else { throw .invalidHandle }
        let age = now.timeIntervalSince1970 - Double(sealed.issued)
        guard age <= self.lifetime else { throw .handleExpired("was sealed \(Int(age / 86_400)) days ago and is good for \(Int(self.lifetime / 86_400))") }
        return WakeRegistration(token: sealed.token, topic: sealed.topic, environment: sealed.environment, pin: sealed.pin)
    }

    /// Whether `text` has a handle's form (`v2.<8 hex>.<base64url>`, at most 1 KiB): what an
    /// app takes from a push before keeping it. Only the relay can tell whether it opens.
    public static func isWellFormed(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= 1024, parts.count == 3, parts[0] == "v2", parts[1].utf8.count == 8, !parts[2].isEmpty else { return false }
        let hex = parts[1].utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
        let base64URL = parts[2].utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) || $0 == 45 || $0 == 95 }
        return hex && base64URL
    }

    /// A new sealing key, as its file holds it (base64 of 32 random bytes).
    public static func newKeyText() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// A sealing key from its file's text.
    public static func key(fromText text: String) -> SymmetricKey? {
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), data.count == 32 else { return nil }
        return SymmetricKey(data: data)
    }
}
