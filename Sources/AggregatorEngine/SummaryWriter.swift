import Foundation
import Logging
import RPCClient
import RPCCore
import ServiceKit
import ServiceLifecycle
import StoreAPI
import UsageModel

/// What the aggregator writes back to the store, from its database's outboxes (so what was
/// computed before a crash is still written after it): daily summaries, then children's
/// accruals, balances and shield commands, then retention's weekly summaries and prunes.
/// Woken after each applied batch. Alerts go to push from a loop of their own, woken after
/// each pass: push being away (its client retries connecting for seconds) must not hold up
/// the store's writes.
struct Writeback: Service {
    let summaries: SummaryWriter
    let earnedTime: EarnedTimeWriter
    let retention: RetentionWriter
    let alerts: AlertWriter
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
        while !Task.isCancelled {
            let written: Int
            do {
                written = try await self.summaries.flush() + self.earnedTime.flush() + self.retention.flush()
                backoff = .seconds(1)
            } catch {
                self.logger.warning("writing to the store failed; retrying", metadata: ["error": "\(error)", "retry_in_ms": "\(backoff.microseconds / 1000)"])
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
                let sent = try await self.alerts.flush()
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

/// Writes the computed days as DailySummary records (`<deviceID>_<YYYY-MM-DD>` in the
/// device's zone), so parents read them through the store and their subscriptions fire.
struct SummaryWriter: Sendable {
    let store: RPCClient
    let database: AggregatorDatabase
    let logger: Logger

    /// Writes up to a page of pending summaries, one `store.modify` per zone; returns how many.
    func flush() async throws -> Int {
        let pending = try await self.database.pendingSummaries(limit: 400)
        guard !pending.isEmpty else { return 0 }
        var written: [AggregatorDatabase.PendingSummary] = []
        for group in Dictionary(grouping: pending, by: { [$0.family, $0.zone] }).values {
            let first = group[0]
            var saves: [RecordSave] = []
            var deletes: [RecordDelete] = []
            for item in group {
                let name = "\(item.deviceId)_\(item.day)"
                if let totals = item.totals { saves.append(Self.record(name, item, totals)) } else { deletes.append(RecordDelete(recordName: name)) }
            }
            let params = ModifyParams(family: first.family, zone: first.zone, saves: saves, deletes: deletes, savePolicy: .allKeys)
            if let error = await self.store.write(params, logger: self.logger) {
                // A zone that is gone (an unpaired device) needs nothing written any more.
                guard error.code == .notFound else { throw error }
                self.logger.info("daily summaries dropped: the zone is gone", metadata: ["family": "\(first.family)", "zone": "\(first.zone)"])
            }
            written += group
        }
        try await self.database.summariesWritten(written)
        self.logger.debug("daily summaries written", metadata: ["count": "\(written.count)"])
        return written.count
    }

    static func record(_ name: String, _ item: AggregatorDatabase.PendingSummary, _ totals: AggregatorDatabase.PendingSummary.Totals) -> RecordSave {
        var fields: [String: JSONValue] = [
            "summaryID": .string(name), "deviceID": .string(item.deviceId),
            "totalLearningSeconds": .int(totals.learningSeconds), "totalRewardSeconds": .int(totals.rewardSeconds),
            "totalPointsEarned": .int(totals.points), "appsUsedJSON": .string(totals.apps), "lastUpdated": .date(Date()),
        ]
        if let start = LocalDays(timeZone: item.timeZone)?.bounds(of: item.day)?.start { fields["date"] = .date(start) }
        if let child = item.childRef { fields["childRef"] = .reference(child, zone: StoreNames.defaultZone) }
        return RecordSave(recordType: "DailySummary", recordName: name, fields: fields)
    }
}

extension RPCClient {
    /// `store.modify` for the aggregator's own records: returns the store's refusal of the
    /// whole call (to retry, or to drop when the zone is gone). Items the store refused one
    /// by one (a uniqueness conflict with a record someone else wrote, say) are logged as
    /// errors and not retried: the same write would get the same answer.
    func write(_ params: ModifyParams, logger: Logger) async -> RPCError? {
        let result: ModifyResult
        do {
            result = try await self.call(StoreMethods.modify, params)
        } catch {
            return error
        }
        // Deleting a record that is already gone is done, not refused.
        let refused = result.saved.compactMap { outcome in outcome.error.map { (outcome.recordName, $0) } }
            + result.deleted.compactMap { outcome in outcome.error.flatMap { $0.code == .notFound ? nil : (outcome.recordName, $0) } }
        for (name, error) in refused {
            logger.error("the store refused a record the aggregator wrote", metadata: [
                "family": "\(params.family)", "zone": "\(params.zone)", "record_name": "\(name)", "error_code": "\(error.code)", "error": "\(error.message)",
            ])
        }
        return nil
    }
}
