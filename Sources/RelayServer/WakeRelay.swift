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
    /// The wakes already taken (one captured on its way cannot be sent again) and the
    /// counts: wakes per home server and per device, alerts and handles per device, and
    /// the pushes a second over every caller (what the publisher allows APNs).
    let state: any RelayState
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
        try Self.check(await self.state.admit(wake: nil, counts: [Count(kind: .seal, key: registration.token), Self.budget], now: now))
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
        // own makes the relay keep nothing. Counted per server, and per device (pins cost
        // nothing to make: one device is not woken more often however many keys ask); a
        // visible alert, what a former server or a copied key would abuse, few an hour.
        var counts = [Count(kind: .server, key: pin), Count(kind: .device, key: registration.token)]
        if request.kind == .alert { counts.append(Count(kind: .alert, key: registration.token)) }
        counts.append(Self.budget)
        try Self.check(await self.state.admit(wake: WakeSignature.signedDigest(time: time ?? "", body: body), counts: counts, now: now))
        let outcome = await self.apns.send(request.kind, to: registration, collapseId: request.collapseId, ttlSeconds: request.ttlSeconds)
        let apnsId = try self.answer(outcome, fields: ["pin": "\(pin)", "kind": "\(request.kind.rawValue)", "environment": "\(registration.environment.rawValue)"],
                                     sent: "wake sent")
        return WakeResponse(apnsId: apnsId)
    }

    /// One push from the publisher's budget with APNs, whoever asks.
    static let budget = Count(kind: .apns, key: "apns")

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

    /// The state's verdict as the relay's answer: the publisher's budget spent is the
    /// relay busy, not the caller's fault.
    static func check(_ admission: Admission) throws(RelayError) {
        switch admission {
        case .allowed: return
        case .seenBefore: throw .badSignature("this wake was sent already (each signed wake is taken once)")
        case .limited(.apns, let seconds), .unavailable(let seconds): throw .busy(retryAfterSeconds: seconds)
        case .limited(_, let seconds): throw .rateLimited(retryAfterSeconds: seconds)
        }
    }
}
