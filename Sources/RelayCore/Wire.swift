import Foundation

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

public struct SealResponse: Codable, Sendable, Hashable {
    public var handle: String
    public init(handle: String) { self.handle = handle }
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

    public init(handle: String, kind: Kind, collapseId: String? = nil, ttlSeconds: Int? = nil) {
        self.handle = handle
        self.kind = kind
        self.collapseId = collapseId
        self.ttlSeconds = ttlSeconds
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
