import Crypto
import EdgeLimits
import Foundation
import RelayCore

/// What the relay counts, each with its limit and window.
enum CountKind: String, Sendable, CaseIterable {
    /// Wakes from one home server (by pin), a minute.
    case server
    /// Wakes for one device (by token), a minute.
    case device
    /// Visible alerts for one device, an hour.
    case alert
    /// Handles sent to one device, an hour.
    case seal
    /// Pushes to APNs over every caller, a second (one key).
    case apns
}

/// One event to count: its kind and key.
struct Count: Sendable, Hashable {
    var kind: CountKind
    var key: String
}

/// The limit and window of each kind of count.
struct CountLimits: Sendable {
    private var limits: [CountKind: (limit: Int, window: TimeInterval)]

    init(_ configuration: RelayConfiguration) {
        self.limits = [
            .server: (configuration.wakesPerMinutePerServer, 60), .device: (configuration.wakesPerMinutePerServer, 60),
            .alert: (configuration.alertsPerHourPerDevice, 3600), .seal: (configuration.sealsPerHourPerDevice, 3600),
            .apns: (configuration.apnsPushesPerSecond, 1),
        ]
    }

    init(_ limits: [CountKind: (limit: Int, window: TimeInterval)]) { self.limits = limits }

    subscript(kind: CountKind) -> (limit: Int, window: TimeInterval) { self.limits[kind] ?? (1, 60) }
}

/// What became of a push the relay was asked for, before it goes to APNs.
enum Admission: Sendable, Equatable {
    case allowed
    /// Its wake was taken before (a replay).
    case seenBefore
    /// A count is over its limit; try again after the seconds given.
    case limited(CountKind, retryAfterSeconds: Int)
    /// No room to remember it or count it now (a full table), or the shared state cannot
    /// be reached: refused, never let through uncounted.
    case unavailable(retryAfterSeconds: Int)
}

/// Where the relay keeps what it counts and the wakes it has taken: in memory for one copy
/// (``MemoryState``), or in PostgreSQL shared by several copies (``PostgresState``).
protocol RelayState: Sendable {
    /// Remembers `wake` (the digest of what was signed; nil for a seal) unless it was taken
    /// before, and counts `counts` in order, stopping at the first over its limit.
    func admit(wake: SHA256.Digest?, counts: [Count], now: Date) async -> Admission
}

/// One copy's state, in memory and bounded.
struct MemoryState: RelayState {
    let seen: SeenWakes
    let limiters: [CountKind: WindowLimiter]

    init(limits: CountLimits, maximumSeenWakes: Int, maximumKeys: Int) {
        self.seen = SeenWakes(capacity: maximumSeenWakes)
        var limiters: [CountKind: WindowLimiter] = [:]
        for kind in CountKind.allCases {
            let (limit, window) = limits[kind]
            limiters[kind] = WindowLimiter(limit: limit, window: window, capacity: kind == .apns ? 1 : maximumKeys)
        }
        self.limiters = limiters
    }

    func admit(wake: SHA256.Digest?, counts: [Count], now: Date) async -> Admission {
        if let wake {
            switch self.seen.insert(wake, now: now) {
            case .new: break
            case .seenBefore: return .seenBefore
            case .full: return .unavailable(retryAfterSeconds: 10)
            }
        }
        for count in counts {
            switch self.limiters[count.kind]!.take(count.key, now: now) {
            case .allowed: continue
            case .limited(let seconds): return .limited(count.kind, retryAfterSeconds: seconds)
            case .full(let seconds): return .unavailable(retryAfterSeconds: seconds)
            }
        }
        return .allowed
    }
}
