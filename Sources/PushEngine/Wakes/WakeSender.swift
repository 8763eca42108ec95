import AsyncHTTPClient
import Foundation
import Logging
import PushAPI
import ServiceKit
import ServiceLifecycle

/// Sends the wakes that fall due: each device's one pending wake, unless its notifications
/// were acknowledged meanwhile; background wakes at most `perHour` per device in any hour
/// (Apple throttles more), alerts whenever due. A wake is a hint: the notifications stay in
/// the device's queue whatever the relay answers.
struct WakeSender: Service {
    struct Settings: Sendable {
        var perHour: Int
        var attempts: Int
        var firstRetry: Duration = .seconds(5)
        var longestRetry: Duration = .seconds(15 * 60)
        /// The longest `apns-expiration` asked for.
        var longestTTL: Int = 86_400
        /// Wakes in flight at once (a rule change wakes every device of a family together).
        var concurrency: Int = 32
    }

    let database: PushDatabase
    let registry: DeviceRegistry
    let wakeup: Wakeup
    /// Made when the sender runs (its HTTP client is shut down when it stops).
    let makeRoute: @Sendable () -> any WakeRoute
    let settings: Settings
    var metrics = PushMetrics.none
    let logger: Logger

    func run() async throws {
        let route = self.makeRoute()
        await OutboundDelivery.run(concurrency: self.settings.concurrency, wakeup: self.wakeup, logger: self.logger, what: "wakes",
                           due: { limit in try await self.database.dueWakes(now: Date(), limit: limit) },
                           nextDue: { try await self.database.nextWakeDue() }, send: { await self.send($0, via: route) },
                           record: { results in try await self.database.record(results) })
        await route.shutdown()
    }

    /// Sends one wake (or holds it for the hourly cap) and says what came of it; the
    /// batch's results are written together.
    private func send(_ wake: PushDatabase.DueWake, via route: any WakeRoute) async -> PushDatabase.WakeResult? {
        let now = Date()
        var metadata: Logger.Metadata = [
            "family": "\(wake.family)", "device_id": "\(wake.deviceId)", "kind": "\(wake.kind.rawValue)", "seq": "\(wake.seq)",
            "attempt": "\(wake.attempts + 1)", "via": "\(route.host)",
        ]
        if wake.kind == .background, wake.recent.count >= self.settings.perHour, let oldest = wake.recent.min() {
            let until = Date(timeIntervalSince1970: Double(oldest + PushDatabase.hour) / 1000)
            metadata["until"] = "\(until)"
            self.logger.info("wake held: the device's background wakes for this hour are spent (--wakes-per-hour)", metadata: metadata)
            self.metrics.wakes("held").increment()
            return .held(wake, until: until)
        }
        let ttl = max(0, min(self.settings.longestTTL, Int(wake.expiresAt.timeIntervalSince(now))))
        let asked = ContinuousClock.now
        let answer = await route.wake(handle: wake.handle, kind: wake.kind, ttlSeconds: ttl, now: now)
        self.metrics.wakeDuration.record(ContinuousClock.now - asked)
        switch answer {
        case .sent(let apnsId):
            metadata["apns_id"] = "\(apnsId ?? "")"
            self.logger.info("wake sent", metadata: metadata)
            self.metrics.wakes("sent").increment()
            return .sent(wake, at: now)
        case .gone(let outcome, let reason):
            self.registry.remove(Hub.DeviceKey(family: wake.family, deviceId: wake.deviceId))
            metadata["error"] = "\(reason)"
            self.logger.warning("wake registration is gone; the device is not woken until it registers again", metadata: metadata)
            self.metrics.wakes("gone").increment()
            return .gone(wake, outcome: outcome, error: reason, now: now)
        case .drop(let reason):
            metadata["error"] = "\(reason)"
            self.logger.error("the relay refused a wake; the notifications wait for the device's next connection", metadata: metadata)
            self.metrics.wakes("refused").increment()
            return .abandoned(wake, error: reason, now: now)
        case .retry(let reason, let after):
            let wait = after ?? OutboundDelivery.backoff(afterAttempt: wake.attempts + 1, first: self.settings.firstRetry, longest: self.settings.longestRetry)
            let due = now.addingTimeInterval(wait.seconds)
            metadata["error"] = "\(reason)"
            self.metrics.wakes("failed").increment()
            if wake.attempts + 1 >= self.settings.attempts || due >= wake.expiresAt {
                self.logger.warning("wake abandoned after its last attempt; the notifications wait for the device's next connection", metadata: metadata)
                return .abandoned(wake, error: reason, now: now)
            }
            metadata["retry_in_ms"] = "\(wait.microseconds / 1000)"
            self.logger.info("wake failed; retrying", metadata: metadata)
            return .retry(wake, at: due, error: reason, now: now)
        }
    }
}
