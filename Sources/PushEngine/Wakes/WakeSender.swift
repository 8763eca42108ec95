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
        /// After a wake, how long the device has to wake and fetch before notifications
        /// queued meanwhile wake it again.
        var settle: Duration = .seconds(30)
        /// The longest `apns-expiration` asked for.
        var longestTTL: Int = 86_400
        var concurrency: Int = 8
    }

    let database: PushDatabase
    let registry: DeviceRegistry
    let wakeup: Wakeup
    let route: any WakeRoute
    let settings: Settings
    let logger: Logger

    func run() async throws {
        await Outbound.run(concurrency: self.settings.concurrency, wakeup: self.wakeup, logger: self.logger, what: "wakes",
                           due: { limit in try await self.database.dueWakes(now: Date(), limit: limit) },
                           nextDue: { try await self.database.nextWakeDue() }, send: self.send)
        await self.route.shutdown()
    }

    private func send(_ wake: PushDatabase.DueWake) async {
        let now = Date()
        var metadata: Logger.Metadata = [
            "family": "\(wake.family)", "device_id": "\(wake.deviceId)", "kind": "\(wake.kind.rawValue)", "seq": "\(wake.seq)",
            "attempt": "\(wake.attempts + 1)", "via": "\(self.route.host)",
        ]
        do {
            if wake.kind == .background, wake.recent.count >= self.settings.perHour, let oldest = wake.recent.min() {
                let until = Date(timeIntervalSince1970: Double(oldest + PushDatabase.hour) / 1000)
                try await self.database.wakeHeld(wake, until: until, now: now)
                metadata["until"] = "\(until)"
                self.logger.info("wake held: the device's background wakes for this hour are spent (--wakes-per-hour)", metadata: metadata)
                return
            }
            let ttl = max(0, min(self.settings.longestTTL, Int(wake.expiresAt.timeIntervalSince(now))))
            let answer = await self.route.wake(handle: wake.handle, kind: wake.kind, ttlSeconds: ttl, now: now)
            switch answer {
            case .sent(let apnsId):
                try await self.database.wakeSent(wake, at: now, settle: self.settings.settle)
                metadata["apns_id"] = "\(apnsId ?? "")"
                self.logger.info("wake sent", metadata: metadata)
            case .gone(let outcome, let reason):
                try await self.database.wakeGone(wake, outcome: outcome, error: reason, now: now)
                self.registry.remove(Hub.DeviceKey(family: wake.family, deviceId: wake.deviceId))
                metadata["error"] = "\(reason)"
                self.logger.warning("wake registration is gone; the device is not woken until it registers again", metadata: metadata)
            case .drop(let reason):
                try await self.database.wakeAbandoned(wake, error: reason, now: now)
                metadata["error"] = "\(reason)"
                self.logger.error("the relay refused a wake; the notifications wait for the device's next connection", metadata: metadata)
            case .retry(let reason, let after):
                let wait = after ?? Outbound.backoff(afterAttempt: wake.attempts + 1, first: self.settings.firstRetry, longest: self.settings.longestRetry)
                let due = now.addingTimeInterval(wait.seconds)
                metadata["error"] = "\(reason)"
                if wake.attempts + 1 >= self.settings.attempts || due >= wake.expiresAt {
                    try await self.database.wakeAbandoned(wake, error: reason, now: now)
                    self.logger.warning("wake abandoned after its last attempt; the notifications wait for the device's next connection", metadata: metadata)
                } else {
                    try await self.database.wakeRetry(wake, at: due, error: reason, now: now)
                    metadata["retry_in_ms"] = "\(wait.microseconds / 1000)"
                    self.logger.info("wake failed; retrying", metadata: metadata)
                }
            }
        } catch {
            metadata["error"] = "\(error)"
            self.logger.error("wake bookkeeping failed", metadata: metadata)
        }
    }
}
