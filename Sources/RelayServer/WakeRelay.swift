import APNs
import Crypto
import EdgeLimits
import Foundation
import Logging
import RelayCore
import Synchronization
import WireJSON

/// The relay's logic, apart from HTTP: seals device tokens into handles, and turns a home
/// server's signed wake into an APNs push. It keeps no registration: everything it needs is
/// in the handle, which only it can read.
struct WakeRelay: Sendable {
    let sealer: HandleSealer
    /// The app topics (bundle ids) this relay's APNs key may push to.
    let topics: Set<String>
    let apns: APNsClient
    /// Wakes already taken: one captured on its way cannot be sent again.
    let seen: SeenWakes
    /// Wakes per home server (by pin) and per device (by token), a minute.
    let limiter: WindowLimiter
    /// Visible alerts per device, an hour.
    let alerts: WindowLimiter
    /// Handles sent to a device, an hour.
    let seals: WindowLimiter
    /// Pushes a second over every caller, under one key: what the publisher allows APNs.
    let budget: WindowLimiter
    let logger: Logger

    /// Seals the token and sends the handle to it in a silent push: only the app holding
    /// the token gets it, so no one can mint handles for tokens that are not theirs (and
    /// spend the publisher's APNs key on them). A token APNs refuses gets nothing.
    func seal(_ request: SealRequest, now: Date = Date()) async throws(RelayError) -> SealResponse {
        guard WakeRegistration.isDeviceToken(request.token) else { throw .invalidRequest("token must be the APNs device token in hex") }
        guard self.topics.contains(request.topic) else {
            throw .invalidRequest("this relay does not push to \(request.topic); it serves \(self.topics.sorted().joined(separator: ", "))")
        }
        guard let pin = Data(base64Encoded: request.pin), pin.count == 32 else {
            throw .invalidRequest("pin must be the home server's key pin (base64 of 32 bytes)")
        }
        let registration = WakeRegistration(token: request.token.lowercased(), topic: request.topic, environment: request.environment, pin: request.pin)
        // A device is sealed for at each app launch: a few an hour are plenty, and no caller
        // can make a device's app be woken for handles over and over.
        try Self.check(self.seals.take(registration.token, now: now))
        try self.takeFromBudget(now: now)
        let handle: String
        do {
            handle = try self.sealer.seal(registration, now: now)
        } catch {
            throw .invalidRequest("the handle could not be sealed: \(error)")
        }
        let outcome = await self.apns.deliver(handle: handle, to: registration)
        let apnsId = try self.answer(outcome, fields: ["pin": "\(request.pin)", "kind": "handle", "environment": "\(registration.environment.rawValue)"],
                                     sent: "handle sent to the device")
        return SealResponse(apnsId: apnsId)
    }

    /// Verifies a wake (its signature, its handle, the pin in both) and pushes it. The
    /// caller has counted it against its address already (``RelayService``): nothing here
    /// is done for a caller over its limit.
    func wake(body: [UInt8], key: String?, time: String?, signature: String?, now: Date = Date()) async throws(RelayError) -> WakeResponse {
        let pin = try WakeSignature.verify(body: body, key: key, time: time, signature: signature, now: now)
        guard let request = try? RPCJSON.decode(WakeRequest.self, from: body) else {
            throw .invalidRequest("the body must be {handle, kind: background|alert, collapseId?, ttlSeconds?, id?}")
        }
        if let collapseId = request.collapseId, collapseId.utf8.count > 64 { throw .invalidRequest("collapseId must be at most 64 bytes") }
        if let ttl = request.ttlSeconds, !(0...2_592_000).contains(ttl) { throw .invalidRequest("ttlSeconds must be between 0 and 30 days") }
        if let id = request.id, id.utf8.count > 64 { throw .invalidRequest("id must be at most 64 bytes") }
        let registration = try self.sealer.open(request.handle, now: now)
        guard registration.pin == pin else { throw .wrongServer }
        // A topic taken off the relay's options is pushed to no more, whatever handles say.
        guard self.topics.contains(registration.topic) else {
            throw .unregistered(reason: "this relay no longer pushes to \(registration.topic)")
        }
        // Only now, with the pin matched, is the wake remembered: a caller with a key of its
        // own makes the relay keep nothing.
        switch self.seen.insert(WakeSignature.signedDigest(time: time ?? "", body: body), now: now) {
        case .new: break
        case .seenBefore: throw .badSignature("this wake was sent already (each signed wake is taken once)")
        case .full: throw .busy(retryAfterSeconds: 10)
        }
        // Per server, and per device (pins cost nothing to make: one device is not woken
        // more often however many keys ask).
        try Self.check(self.limiter.take("server " + pin, now: now))
        try Self.check(self.limiter.take("device " + registration.token, now: now))
        if request.kind == .alert {
            // A visible alert is what a former server or a copied key would abuse: few an hour.
            try Self.check(self.alerts.take(registration.token, now: now))
        }
        try self.takeFromBudget(now: now)
        let outcome = await self.apns.send(request.kind, to: registration, collapseId: request.collapseId, ttlSeconds: request.ttlSeconds)
        let apnsId = try self.answer(outcome, fields: ["pin": "\(pin)", "kind": "\(request.kind.rawValue)", "environment": "\(registration.environment.rawValue)"],
                                     sent: "wake sent")
        return WakeResponse(apnsId: apnsId)
    }

    /// One push from the publisher's budget with APNs, whoever asks.
    private func takeFromBudget(now: Date) throws(RelayError) {
        if case .limited(let seconds) = self.budget.take("apns", now: now) { throw .busy(retryAfterSeconds: seconds) }
    }

    /// APNs's answer as the relay's: the push's id, or the refusal the caller acts on.
    private func answer(_ outcome: APNsOutcome, fields: Logger.Metadata, sent: Logger.Message) throws(RelayError) -> String? {
        var fields = fields
        switch outcome {
        case .delivered(let apnsId):
            fields["apns_id"] = "\(apnsId ?? "")"
            self.logger.info(sent, metadata: fields)
            return apnsId
        case .unregistered(let reason):
            fields["reason"] = "\(reason)"
            self.logger.info("push for a device APNs no longer knows", metadata: fields)
            throw .unregistered(reason: reason)
        case .expiredProviderToken:
            self.logger.error("APNs refused the provider token twice: check the key id, team id and .p8 key", metadata: fields)
            throw .apnsUnavailable("APNs refused the relay's provider token")
        case .tooManyRequests(let reason):
            fields["reason"] = "\(reason)"
            self.logger.info("APNs says a device is pushed to too often; the caller is told to wait", metadata: fields)
            throw .deviceRateLimited(reason: reason, retryAfterSeconds: 60)
        case .retry(let status, let reason), .refused(let status, let reason):
            fields["status"] = "\(status)"
            fields["reason"] = "\(reason)"
            self.logger.warning("APNs did not take a push", metadata: fields)
            throw .apnsUnavailable(status == 0 ? reason : "HTTP \(status) \(reason)")
        }
    }
}

extension WakeRelay {
    /// A limiter's verdict as the relay's answer.
    static func check(_ verdict: WindowLimiter.Verdict) throws(RelayError) {
        switch verdict {
        case .allowed: return
        case .limited(let seconds): throw .rateLimited(retryAfterSeconds: seconds)
        case .full(let seconds): throw .busy(retryAfterSeconds: seconds)
        }
    }
}

/// What the wakes taken in the last `2 × WakeSignature.maximumAge` signed (older ones are
/// refused for their time anyway), by digest: a replayed wake is refused. Kept in the order
/// taken, so the expired ones leave from the front, a few at each insert: no insert ever
/// scans them all. It holds at most `capacity`: past that a wake is refused (busy), never
/// kept at the cost of more memory.
final class SeenWakes: Sendable {
    enum Outcome: Equatable { case new, seenBefore, full }

    /// A SHA-256 digest as four words: a small key, hashed fast.
    struct Key: Hashable, Sendable {
        let words: (UInt64, UInt64, UInt64, UInt64)
        init(_ digest: SHA256.Digest) {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            digest.withUnsafeBytes { raw in
                withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.prefix(32))) }
            }
            self.words = words
        }
        static func == (a: Key, b: Key) -> Bool { a.words == b.words }
        func hash(into hasher: inout Hasher) {
            hasher.combine(self.words.0)
            hasher.combine(self.words.1)
            hasher.combine(self.words.2)
            hasher.combine(self.words.3)
        }
    }

    private struct State {
        var seen: Set<Key> = []
        var order: [(key: Key, at: Date)] = []
        var head = 0
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    var count: Int { self.state.withLock { $0.seen.count } }

    func insert(_ digest: SHA256.Digest, now: Date) -> Outcome {
        let key = Key(digest)
        return self.state.withLock { state in
            while state.head < state.order.count, now.timeIntervalSince(state.order[state.head].at) > 2 * WakeSignature.maximumAge {
                state.seen.remove(state.order[state.head].key)
                state.head += 1
            }
            if state.head > 4096, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
            guard !state.seen.contains(key) else { return .seenBefore }
            guard state.seen.count < self.capacity else { return .full }
            state.seen.insert(key)
            state.order.append((key, now))
            return .new
        }
    }
}
