import Logging
import StoreAPI


/// Purges expired tombstones and change-log entries (run every `--purge-interval`).
struct PeriodicPurge {
    let store: RecordStore
    let logger: Logger

    func run() async {
        do {
            _ = try await self.store.purge(PurgeParams(), auth: nil)
        } catch {
            self.logger.error("purge failed", metadata: ["error": "\(error)"])
        }
    }
}
