import Foundation
import Logging
import ServiceKit

/// Looks for devices gone quiet for longer than their family allows (run every
/// `--alert-check-interval`).
struct QuietDevices {
    let database: AggregatorDatabase
    let writeback: Wakeup
    let logger: Logger

    func check() async {
        do {
            let checked = try await self.database.pool.write { db in try Alerts.checkSilentDevices(now: Date(), db) }
            if checked.queued > 0 { self.writeback.signal() }
            if checked.rearmed > 0 { self.logger.debug("quiet-device alerts re-armed: the devices sent usage again", metadata: ["devices": "\(checked.rearmed)"]) }
        } catch {
            self.logger.error("checking for quiet devices failed", metadata: ["error": "\(error)"])
        }
    }
}
