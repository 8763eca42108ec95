import Foundation
import RPCCore
import RelayCore

/// `push.registerWake`. Through a relay (the server's `--wake-relay`): the handle the relay
/// sealed for this device's APNs token (the device sends `POST /v1/seal` to the relay
/// itself; the server never sees the token). Direct (the server holds the family's own
/// APNs key): the token, topic and environment.
public struct RegisterWakeParams: Codable, Sendable, Hashable {
    /// The relay's opaque handle, at most 1024 characters.
    public var handle: String?
    /// The relay's base URL the handle was sealed by (`https://relay.example.org`): it must
    /// be the relay this server sends wakes through.
    public var relay: String?
    /// Direct: the APNs device token, hex.
    public var token: String?
    /// Direct: the app's bundle id.
    public var topic: String?
    /// Direct: the token's APNs environment (default production).
    public var environment: APNsEnvironment?

    public init(handle: String, relay: String) {
        self.handle = handle
        self.relay = relay
    }

    public init(token: String, topic: String, environment: APNsEnvironment = .production) {
        self.token = token
        self.topic = topic
        self.environment = environment
    }
}

/// Which APNs an app's token belongs to (the relay's own type, sealed into the handle).
public typealias APNsEnvironment = WakeRegistration.Environment

public enum WakeStatus: String, StringEnum {
    /// Wakes are sent when the device is not listening.
    case active
    /// The relay said APNs no longer knows the device (the app was deleted, its token
    /// changed) or the handle is not this server's: nothing is sent until the device
    /// registers again.
    case gone
}

/// How the last wake went.
public enum WakeOutcome: String, StringEnum {
    /// APNs took it.
    case sent
    /// APNs no longer knows the device: the registration is gone.
    case unregistered
    /// The relay refused the handle (sealed by another relay or for another server).
    case refused
    /// The relay or APNs failed after retries; the notification waits in the device's
    /// queue for its next connection.
    case failed
    /// The hour's background wakes were spent: this one waits for the cap.
    case held
}

/// A device's wake registration, as `push.registerWake`, `push.getWake` and
/// `push.listWakes` show it.
public struct WakeInfo: Codable, Sendable, Hashable {
    public var deviceId: String
    /// The relay's host, or `APNs` when the server sends to APNs itself.
    public var relayHost: String
    public var status: WakeStatus
    public var registeredAt: Date
    /// The last wake sent (or tried).
    public var lastWakeAt: Date?
    public var lastOutcome: WakeOutcome?
    /// The last failure, as a sentence.
    public var lastError: String?
    /// Background wakes sent in the last hour.
    public var wakesLastHour: Int
    /// When a wake is due, if one is.
    public var dueAt: Date?

    public init(deviceId: String, relayHost: String, status: WakeStatus, registeredAt: Date, lastWakeAt: Date?, lastOutcome: WakeOutcome?,
                lastError: String?, wakesLastHour: Int, dueAt: Date?) {
        self.deviceId = deviceId
        self.relayHost = relayHost
        self.status = status
        self.registeredAt = registeredAt
        self.lastWakeAt = lastWakeAt
        self.lastOutcome = lastOutcome
        self.lastError = lastError
        self.wakesLastHour = wakesLastHour
        self.dueAt = dueAt
    }
}

public struct RemoveWakeResult: Codable, Sendable, Hashable {
    /// False when the device had none.
    public var removed: Bool
    public init(removed: Bool) { self.removed = removed }
}

/// `push.listWakes`.
public struct ListWakesParams: Codable, Sendable, Hashable {
    /// Local services only: the family whose devices to list.
    public var family: String?
    public init(family: String? = nil) { self.family = family }
}

public struct ListWakesResult: Codable, Sendable, Hashable {
    /// The family's devices registered for wakes, by device id.
    public var wakes: [WakeInfo]
    public init(wakes: [WakeInfo]) { self.wakes = wakes }
}
