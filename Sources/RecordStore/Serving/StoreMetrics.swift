import Foundation
import ServiceMetrics
import StoreAPI

/// The store's own instruments: what it saved and deleted, its commits (how many writes
/// each carried, how long each took to be durable), and at each scrape its change log's
/// head and the size of its write-ahead log.
struct StoreMetrics: Sendable {
    let saved: Counter
    let deleted: Counter
    let itemErrors: Counter
    let commits: Counter
    let writesPerCommit: Recorder
    let commitDuration: CoreMetrics.Timer

    init(_ metrics: ServiceMetrics) {
        self.saved = metrics.counter("records_saved_total")
        self.deleted = metrics.counter("records_deleted_total")
        self.itemErrors = metrics.counter("record_errors_total")
        self.commits = metrics.counter("commits_total")
        self.writesPerCommit = metrics.histogram("writes_per_commit", buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
        self.commitDuration = metrics.timer("commit_duration_seconds")
    }

    /// Disabled instruments, for a store made without a service around it.
    static let none = StoreMetrics(ServiceMetrics(service: "store", enabled: false))

    /// The gauges read at each scrape.
    static func collect(_ store: RecordStore, into metrics: ServiceMetrics) {
        let head = metrics.gauge("change_log_head")
        let wal = metrics.gauge("wal_bytes")
        let database = metrics.gauge("database_bytes")
        metrics.onCollect {
            head.record(store.head)
            let files = FileManager.default
            wal.record((try? files.attributesOfItem(atPath: store.databasePath + "-wal")[.size] as? Int) ?? 0)
            database.record((try? files.attributesOfItem(atPath: store.databasePath)[.size] as? Int) ?? 0)
        }
    }

    /// A `store.modify` answered (a replayed one was counted the first time).
    func modified(_ result: ModifyResult) {
        guard !result.replayed else { return }
        let savesRefused = result.saved.count { $0.error != nil }, deletesRefused = result.deleted.count { $0.error != nil }
        self.saved.increment(by: result.saved.count - savesRefused)
        self.deleted.increment(by: result.deleted.count - deletesRefused + result.cascaded.count)
        if savesRefused + deletesRefused > 0 { self.itemErrors.increment(by: savesRefused + deletesRefused) }
    }
}
