import AggregatorAPI
import Foundation
import GRDB
import Logging
import RPCCore
import ServiceKit
import StoreAPI
import UsageModel

/// Rolls up every family on a timer, and on `aggregator.rollUp`.
struct RollUps: Sendable {
    let database: AggregatorDatabase
    let retentionDays: Int
    let writeback: Wakeup
    let logger: Logger

    func run(_ params: RollUpParams, auth: Auth?) async throws -> RollUpResult {
        guard auth == nil else { throw RPCError(.forbidden, "aggregator.rollUp is for local administration") }
        if let asOf = params.asOf {
            guard LocalDays.parse(asOf) != nil else { throw RPCError.invalidParams("params.asOf", "must be a date written YYYY-MM-DD, such as 2026-11-22") }
        }
        return try await self.rollUp(family: params.family, asOf: params.asOf)
    }

    /// The periodic check.
    func check() async {
        do {
            let result = try await self.rollUp(family: nil, asOf: nil)
            let sealed = result.families.filter { !$0.weeks.isEmpty }
            if !sealed.isEmpty { self.logger.info("retention rolled up weeks", metadata: ["families": "\(sealed.count)"]) }
        } catch {
            self.logger.warning("retention roll-up failed; trying again later", metadata: ["error": "\(error)"])
        }
    }

    private func rollUp(family: String?, asOf: String?) async throws -> RollUpResult {
        let retentionDays = self.retentionDays
        let now = Date()
        let result = try await self.database.pool.write { db -> RollUpResult in
            let known = try Retention.families(db)
            if let family, !known.contains(family) {
                throw RPCError(.notFound, "the aggregator knows no family \(family)", data: ["family": .string(family)])
            }
            let families = family.map { [$0] } ?? known
            var rolled: [FamilyRollUp] = []
            for family in families {
                let today = try Ingest.localDays(of: family, db).day(containing: now)
                if let asOf, asOf < today {
                    throw RPCError.invalidParams("params.asOf", "must not be before today (\(today) in the family's time zone): retention only moves forward")
                }
                guard let done = try Retention.rollUp(family: family, today: asOf ?? today, retentionDays: retentionDays, db) else { continue }
                rolled.append(done)
                if !done.weeks.isEmpty {
                    self.logger.info("weeks rolled up", metadata: [
                        "family": "\(family)", "sealed_before": "\(done.sealedBefore)", "weeks": "\(done.weeks.count)",
                        "usage_records": "\(done.usageRecordsPruned)", "ledger_entries": "\(done.ledgerEntriesPruned)",
                    ])
                }
            }
            return RollUpResult(families: rolled)
        }
        if result.families.contains(where: { !$0.weeks.isEmpty || $0.usageRecordsPruned + $0.ledgerEntriesPruned > 0 }) { self.writeback.signal() }
        return result
    }
}
