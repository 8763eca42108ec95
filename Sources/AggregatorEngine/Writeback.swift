import ChangeFeed
import Foundation
import Logging
import RPCClient
import RPCCore
import ServiceKit
import ServiceLifecycle
import StoreAPI

/// What the aggregator writes back to the store, from its database's outboxes (so what was
/// computed before a crash is still written after it): daily summaries, then children's
/// accruals, balances and shield commands, then devices' configuration snapshots, then retention's weekly summaries and prunes,
/// then the records of parents' and children's actions (requests, ledger entries, audit entries).
/// Woken after each applied batch. Alerts and notifications go to push from a loop of their own, woken after
/// each pass: push being away (its client retries connecting for seconds) must not hold up
/// the store's writes.
struct Writeback: Service {
    let summaries: SummaryWriter
    let earnedTime: EarnedTimeWriter
    let configuration: ConfigurationWriter
    let retention: RetentionWriter
    let alerts: AlertWriter
    let parenting: ParentingWriter
    let wakeup: Wakeup
    let logger: Logger

    func run() async throws {
        let alertsDue = Wakeup()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.writeToStore(then: alertsDue) }
                group.addTask { await self.sendAlerts(when: alertsDue) }
            }
        }
    }

    private func writeToStore(then alertsDue: Wakeup) async {
        var backoff = Duration.seconds(1)
        let streak = FailureStreak()
        while !Task.isCancelled {
            let written: Int
            do {
                written = try await self.summaries.flush() + self.earnedTime.flush() + self.configuration.flush() + self.retention.flush()
                    + self.parenting.flushRecords()
                backoff = .seconds(1)
                streak.reset()
            } catch {
                self.logger.log(level: streak.level(after: error), "writing to the store failed; retrying",
                                metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
                await self.wakeup.wait(upTo: backoff)
                backoff = min(backoff * 2, .seconds(60))
                continue
            }
            alertsDue.signal()
            if written == 0 { await self.wakeup.wait(upTo: .seconds(60)) }
        }
    }

    private func sendAlerts(when due: Wakeup) async {
        var backoff = Duration.seconds(1)
        while !Task.isCancelled {
            do {
                let sent = try await self.alerts.flush() + self.parenting.flushNotifications()
                backoff = .seconds(1)
                if sent == 0 { await due.wait(upTo: .seconds(60)) }
            } catch {
                self.logger.warning("sending alerts to push failed; retrying", metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(60))
            }
        }
    }
}
