import APNs
import Foundation
import WireJSON
import Logging
import RelayCore
import Synchronization

/// The relay's logic, apart from HTTP: seals device tokens into handles, and turns a home
/// server's signed wake into an APNs push. It keeps no registration: everything it needs is
/// in the handle, which only it can read.
struct WakeRelay: Sendable {
    let sealer: HandleSealer
    /// The app topics (bundle ids) this relay's APNs key may push to.
    let topics: Set<String>
    let apns: APNsClient
    let limiter: WakeLimiter
    /// Signatures already taken: a wake captured on its way cannot be sent again.
    let seen = SeenSignatures()
    let logger: Logger

    func seal(_ request: SealRequest) throws(RelayError) -> SealResponse {
        guard WakeRegistration.isDeviceToken(request.token) else { throw .invalidRequest("token must be the APNs device token in hex") }
        guard self.topics.contains(request.topic) else {
            throw .invalidRequest("this relay does not push to \(request.topic); it serves \(self.topics.sorted().joined(separator: ", "))")
        }
        guard let pin = Data(base64Encoded: request.pin), pin.count == 32 else {
            throw .invalidRequest("pin must be the home server's key pin (base64 of 32 bytes)")
        }
        let registration = WakeRegistration(token: request.token.lowercased(), topic: request.topic, environment: request.environment, pin: request.pin)
        do {
            return SealResponse(handle: try self.sealer.seal(registration))
        } catch {
            throw .invalidRequest("the handle could not be sealed: \(error)")
        }
    }

    /// Verifies a wake (its signature, its handle, the pin in both) and pushes it.
    func wake(body: [UInt8], key: String?, time: String?, signature: String?, now: Date = Date()) async throws(RelayError) -> WakeResponse {
        let pin = try WakeSignature.verify(body: body, key: key, time: time, signature: signature, now: now)
        guard let signature, self.seen.insert(signature, now: now) else { throw .badSignature("this wake was sent already (each signed wake is taken once)") }
        guard let request = try? RPCJSON.decode(WakeRequest.self, from: body) else {
            throw .invalidRequest("the body must be {handle, kind: background|alert, collapseId?, ttlSeconds?}")
        }
        if let collapseId = request.collapseId, collapseId.utf8.count > 64 { throw .invalidRequest("collapseId must be at most 64 bytes") }
        if let ttl = request.ttlSeconds, !(0...2_592_000).contains(ttl) { throw .invalidRequest("ttlSeconds must be between 0 and 30 days") }
        let registration = try self.sealer.open(request.handle)
        guard registration.pin == pin else { throw .wrongServer }
        // Per server, and per device (pins cost nothing to make: one device is not woken
        // more often however many keys ask).
        try self.limiter.take("server " + pin, now: now)
        try self.limiter.take("device " + registration.token, now: now)
        let outcome = await self.apns.send(request.kind, to: registration, collapseId: request.collapseId, ttlSeconds: request.ttlSeconds)
        var fields: Logger.Metadata = ["pin": "\(pin)", "kind": "\(request.kind.rawValue)", "environment": "\(registration.environment.rawValue)"]
        switch outcome {
        case .delivered(let apnsId):
            fields["apns_id"] = "\(apnsId ?? "")"
            self.logger.info("wake sent", metadata: fields)
            return WakeResponse(apnsId: apnsId)
        case .unregistered(let reason):
            fields["reason"] = "\(reason)"
            self.logger.info("wake for a device APNs no longer knows", metadata: fields)
            throw .unregistered(reason: reason)
        case .expiredProviderToken:
            self.logger.error("APNs refused the provider token twice: check the key id, team id and .p8 key", metadata: fields)
            throw .apnsUnavailable("APNs refused the relay's provider token")
        case .retry(let status, let reason), .refused(let status, let reason):
            fields["status"] = "\(status)"
            fields["reason"] = "\(reason)"
            self.logger.warning("APNs did not take a wake", metadata: fields)
            throw .apnsUnavailable(status == 0 ? reason : "HTTP \(status) \(reason)")
        }
    }
}

/// Wakes per key (a home server's pin, a device's token): a token bucket of `perMinute`,
/// so that no server can spend the relay's standing with APNs for the others.
final class WakeLimiter: Sendable {
    let perMinute: Int
    private let buckets = Mutex<[String: (tokens: Double, at: Date)]>([:])

    init(perMinute: Int) { self.perMinute = perMinute }

    func take(_ key: String, now: Date) throws(RelayError) {
        let rate = Double(self.perMinute) / 60
        let capacity = Double(self.perMinute)
        let granted: Bool = self.buckets.withLock { buckets in
            if buckets.count > 100_000 { buckets = buckets.filter { now.timeIntervalSince($0.value.at) < 120 } }
            var bucket = buckets[key] ?? (capacity, now)
            bucket.tokens = min(capacity, bucket.tokens + max(0, now.timeIntervalSince(bucket.at)) * rate)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return false
            }
            bucket.tokens -= 1
            buckets[key] = bucket
            return true
        }
        if !granted { throw .rateLimited(retryAfterSeconds: max(1, Int((1 / rate).rounded(.up)))) }
    }
}

/// The signatures of the wakes taken in the last `WakeSignature.maximumAge` (older ones
/// are refused for their time anyway): a replayed wake is refused. Kept in the order taken,
/// so the expired ones leave from the front, a few at each insert: no insert ever scans
/// them all, however many a busy relay holds.
final class SeenSignatures: Sendable {
    private struct State {
        var seen: [String: Date] = [:]
        var order: [(signature: String, at: Date)] = []
        var head = 0
    }

    private let state = Mutex(State())

    /// False when `signature` was taken already.
    func insert(_ signature: String, now: Date) -> Bool {
        self.state.withLock { state in
            while state.head < state.order.count, now.timeIntervalSince(state.order[state.head].at) > 2 * WakeSignature.maximumAge {
                state.seen[state.order[state.head].signature] = nil
                state.head += 1
            }
            if state.head > 4096, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
            guard state.seen[signature] == nil else { return false }
            state.seen[signature] = now
            state.order.append((signature, now))
            return true
        }
    }
}
