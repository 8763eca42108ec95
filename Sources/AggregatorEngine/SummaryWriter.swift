import Foundation
import Logging
import RPCClient
import RPCCore
import ServiceKit
import ServiceLifecycle
import StoreAPI
import UsageModel

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
                if let totals = item.totals { saves.append(try Self.record(name, item, totals)) } else { deletes.append(RecordDelete(recordName: name)) }
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

    static func record(_ name: String, _ item: AggregatorDatabase.PendingSummary, _ totals: AggregatorDatabase.PendingSummary.Totals) throws(RPCError) -> RecordSave {
        let summary = DailySummary(
            summaryID: name, date: LocalDays(timeZone: item.timeZone)?.bounds(of: item.day)?.start ?? Date(), deviceID: item.deviceId,
            childRef: item.childRef.map(RecordReference.inDefaultZone), totalLearningSeconds: totals.learningSeconds, totalRewardSeconds: totals.rewardSeconds,
            totalPointsEarned: totals.points, appsUsedJSON: totals.apps, lastUpdated: Date())
        return try .record(summary, named: name)
    }
}

extension RPCClient {
    /// Every record of a type in a zone, page after page (`store.query`).
    func records(family: String, zone: String, type: String) async throws(RPCError) -> [StoreAPI.Record] {
        try await QueryParams(family: family, zone: zone, recordType: type, limit: QueryParams.maximumLimit)
            .allRecords { (params) async throws(RPCError) in try await self.call(StoreMethods.query, params) }
    }

    /// `store.modify` for the aggregator's own records: returns the store's refusal of the
    /// whole call (to retry, or to drop when the zone is gone). Items the store refused one
    /// by one (a uniqueness conflict with a record someone else wrote, say) are logged as
    /// errors and not retried: the same write would get the same answer; unless `accepting`
    /// takes the refusal (it dealt with it).
    func write(_ params: ModifyParams, logger: Logger, accepting: (SaveOutcome) -> Bool = { _ in false }) async -> RPCError? {
        let result: ModifyResult
        do {
            result = try await self.call(StoreMethods.modify, params)
        } catch {
            return error
        }
        // Deleting a record that is already gone is done, not refused.
        let refused = result.saved.compactMap { outcome in outcome.error.flatMap { accepting(outcome) ? nil : (outcome.recordName, $0) } }
            + result.deleted.compactMap { outcome in outcome.error.flatMap { $0.code == .notFound ? nil : (outcome.recordName, $0) } }
        for (name, error) in refused {
            logger.error("the store refused a record the aggregator wrote", metadata: [
                "family": "\(params.family)", "zone": "\(params.zone)", "record_name": "\(name)", "error_code": "\(error.code)", "error": "\(error.message)",
            ])
        }
        return nil
    }
}
