import DurableSQLite
import Foundation
import GRDB
import Logging
import ServiceKit
import ServiceLifecycle

/// What happens at a time rather than on a change: open requests expire, pauses end, a
/// daily cap is lifted at the family's midnight, unspent time expires at its week's end,
/// downtime begins and ends (and a lift of it runs out), the weekly digest is due. Runs
/// once at start (catching up with what came due while the aggregator was stopped), then
/// at each next deadline, woken early when a parent's action sets a new one.
struct ParentingDeadlines: Service {
    let database: AggregatorDatabase
    let clock: @Sendable () -> Date
    /// The longest sleep between two looks at the clock (the clock can jump; a test's moves).
    let checkInterval: Duration
    /// Signalled when a request or a pause is made: its deadline may be the next one.
    let changed: Wakeup
    let writeback: Wakeup
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let next = await self.check()
                let now = Millis.of(self.clock())
                let wait = next.map { Duration.milliseconds(max(0, $0 - now)) } ?? self.checkInterval
                await self.changed.wait(upTo: min(wait, self.checkInterval))
            }
        }
    }

    /// Does what is due; returns when the next deadline is.
    func check() async -> Int64? {
        do {
            let now = Millis.of(self.clock())
            let (expired, ended, lifted, weeks, downtimes, digests, next) = try await self.database.pool.write { db in
                let expired = try TimeRequests.expireDue(now: now, db)
                let ended = try Pauses.endDue(now: now, db)
                let lifted = try ChildRules.liftCaps(now: now, db)
                let weeks = try ChildRules.expireWeeks(now: now, db)
                let downtimes = try Downtime.tick(now: now, db)
                let digests = try Digests.sendDue(now: now, db)
                let next = [try TimeRequests.nextExpiry(db), try Pauses.nextEnd(db), try ChildRules.nextMidnight(now: now, db),
                            try ChildRules.nextWeekEnd(now: now, db), try Downtime.nextBoundary(now: now, db),
                            try Digests.nextMoment(now: now, db)].compactMap { $0 }.min()
                return (expired, ended, lifted, weeks, downtimes, digests, next)
            }
            if expired + ended + lifted + weeks + downtimes + digests > 0 {
                self.logger.info("parenting deadlines passed", metadata: [
                    "requests_expired": "\(expired)", "pauses_ended": "\(ended)", "caps_lifted": "\(lifted)", "weeks_expired": "\(weeks)",
                    "downtimes_changed": "\(downtimes)", "digests_sent": "\(digests)",
                ])
                self.writeback.signal()
            }
            return next
        } catch {
            self.logger.error("checking requests and pauses for their deadlines failed", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
