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
/// keeps no registration anywhere. Handles look like `v1.<base64url>`.
public struct HandleSealer: Sendable {
    /// The key's bytes (swift-crypto's keys are not Sendable; one is made per use).
    private let key: Data
    /// Bound into every handle: a handle is valid for this purpose and version only.
    private static let context = Data("screentime-wake-handle-v1".utf8)

    public init(key: SymmetricKey) { self.key = key.withUnsafeBytes { Data($0) } }

    public func seal(_ registration: WakeRegistration) throws -> String {
        let plain = Data(try RPCJSON.encode(registration))
        let box = try ChaChaPoly.seal(plain, using: SymmetricKey(data: self.key), authenticating: Self.context)
        return "v1." + Base64URL.encode(box.combined)
    }

    /// The registration inside `handle`; `RelayError.invalidHandle` when it was not sealed
    /// by this key or was changed.
    public func open(_ handle: String) throws(RelayError) -> WakeRegistration {
        guard handle.hasPrefix("v1."), let combined = Base64URL.decode(String(handle.dropFirst(3))),
              let box = try? ChaChaPoly.SealedBox(combined: combined),
              let plain = try? ChaChaPoly.open(box, using: SymmetricKey(data: self.key), authenticating: Self.context),
              let registration = try? RPCJSON.decode(WakeRegistration.self, from: plain)
        else { throw .invalidHandle }
        return registration
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
