import Logging
import RecordStore
import ServiceLifecycle
import StoreAPI
import Synchronization

/// Holds the store once `ServiceMain` has opened it, for background services built earlier.
final class StoreBox: Sendable {
    private let value = Mutex<RecordStore?>(nil)
    func set(_ store: RecordStore) { self.value.withLock { $0 = store } }
    var store: RecordStore? { self.value.withLock { $0 } }
}

/// Purges expired tombstones and change-log entries every `interval`.
struct PeriodicPurge: Service {
    let store: StoreBox
    let interval: Duration

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let interval = self.interval
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
            guard let store = self.store.store else { continue }
            do {
                _ = try await store.purge(PurgeParams(), auth: nil)
            } catch {
                Logger(label: "screentime.store").error("purge failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
