import Foundation
import RPCCore

/// `POST /v1/seal`, from the app: its APNs device token to seal for its home server.
public struct SealRequest: Codable, Sendable, Hashable {
    /// The APNs device token, hex (as the app gets it, in hex).
    public var token: String
    /// The app's bundle id; the relay serves only the topics it was configured with.
    public var topic: String
    public var environment: WakeRegistration.Environment
    /// The home server's key pin, from pairing.
    public var pin: String

    public init(token: String, topic: String, environment: WakeRegistration.Environment, pin: String) {
        self.token = token
        self.topic = topic
        self.environment = environment
        self.pin = pin
    }
}

/// The answer to a seal (202): the handle went to the device in a silent push (its key
/// ``APNsPush/handleKey``), never in this answer, so only the app that holds the token
/// gets it.
public struct SealResponse: Codable, Sendable, Hashable {
    /// Always `push`: how the handle travels.
    public var delivery: String
    /// APNs's id for the push that carries it.
    public var apnsId: String?
    public init(apnsId: String?) {
        self.delivery = "push"
        self.apnsId = apnsId
    }
}

/// `POST /v1/wake`, from a home server, signed (see `WakeSignature`).
public struct WakeRequest: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable {
        /// A silent background push (`content-available`): the app wakes and fetches.
        case background
        /// A visible, content-free alert ("New activity") that the app's notification
        /// service extension replaces with what it fetches from the home server.
        case alert
    }

    public var handle: String
    public var kind: Kind
    /// Coalesces wakes on the phone (`apns-collapse-id`, at most 64 bytes).
    public var collapseId: String?
    /// How long APNs may keep trying (`apns-expiration`); absent: once, now.
    public var ttlSeconds: Int?
    /// A new random id for each wake, so that two wakes of the same handle signed in the
    /// same second are two (the relay refuses a wake whose time and body it has seen).
    public var id: String?

    public init(handle: String, kind: Kind, collapseId: String? = nil, ttlSeconds: Int? = nil, id: String? = WakeRequest.newId()) {
        self.handle = handle
        self.kind = kind
        self.collapseId = collapseId
        self.ttlSeconds = ttlSeconds
        self.id = id
    }

    /// 16 random bytes, base64url.
    public static func newId() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode(Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }))
    }
}

public struct WakeResponse: Codable, Sendable, Hashable {
    /// APNs's id for the push.
    public var apnsId: String?
    public init(apnsId: String?) { self.apnsId = apnsId }
}

/// Every refusal's body.
public struct RelayErrorBody: Codable, Sendable, Hashable {
    public var error: String
    public var message: String
    public init(error: String, message: String) {
        self.error = error
        self.message = message
    }
}
