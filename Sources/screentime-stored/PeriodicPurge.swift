import Logging
import RecordStore
import StoreAPI
import Synchronization

/// Holds the store once `ServiceMain` has opened it, for background services built earlier.
final class StoreBox: Sendable {
    private let value = Mutex<RecordStore?>(nil)
    func set(_ store: RecordStore) { self.value.withLock { $0 = store } }
    var store: RecordStore? { self.value.withLock { $0 } }
}

/// Purges expired tombstones and change-log entries (run every `--purge-interval`).
struct PeriodicPurge {
    let store: StoreBox

    func run() async {
        guard let store = self.store.store else { return }
        do {
            _ = try await store.purge(PurgeParams(), auth: nil)
        } catch {
            Logger(label: "screentime.store").error("purge failed", metadata: ["error": "\(error)"])
        }
    }
}
