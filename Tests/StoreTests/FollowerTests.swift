import ChangeFeed
import Foundation
import Logging
import RPCClient
import RPCCore
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// `ChangeFeed`, what the push service and the aggregator follow the store with, against
/// a real store.
@Suite("Following the store: pages while behind, live once caught up, bounded memory")
struct FollowerTests {
    static let base = Date(timeIntervalSince1970: 1_790_000_000)

    @Test("store.watch with a limit ends after that many changes, and the next page starts at its lastSeq")
    func watchPages() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        try await family.admin.save((0..<250).map { Make.usage("p\($0)", start: Self.base, seconds: 5) }, zone: FamilyFixture.zone1)
        let all = try await ChangeFeedTests.watchAll(family.admin, WatchParams(recordTypes: ["UsageRecord"], follow: false))
        var pages: [[Int64]] = []
        var after: Int64 = 0
        while true {
            let page = try await ChangeFeedTests.watchAll(family.admin, WatchParams(after: after, recordTypes: ["UsageRecord"], follow: false, limit: 100))
            pages.append(page.events.map(\.seq))
            if let last = page.events.last { #expect(page.end.lastSeq == last.seq) }
            after = page.end.lastSeq
            if page.events.count < 100 { break }
        }
        #expect(pages.map(\.count) == [100, 100, 50])
        #expect(pages.flatMap { $0 } == all.events.map(\.seq))
        for limit in [0, WatchParams.maximumLimit + 1] {
            let error = await expectError(.invalidParams) {
                _ = try await ChangeFeedTests.watchAll(family.admin, WatchParams(follow: false, limit: limit))
            }
            #expect(error?.message.contains("params.limit") == true)
        }
    }

    @Test("a follower far behind catches up in pages; outrun while live, it catches up again; every change applied once, in order")
    func boundedFollower() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        try await family.admin.save((0..<400).map { Make.usage("old\($0)", start: Self.base, seconds: 5) }, zone: FamilyFixture.zone1)

        let applied = Mutex<[Int64]>([])
        let logs = LogLines()
        let logger = Logger(label: "test") { _ in logs }
        let feed = ChangeFeed(store: store.client(), watcher: "test", recordTypes: ["UsageRecord"], batchSize: 10, pageSize: 50,
                              maximumBacklog: 40, logger: logger)
        let following = Task {
            await feed.run(
                position: { applied.withLock { $0.last ?? 0 } },
                apply: { batch in
                    try await Task.sleep(for: .milliseconds(10))  // slower than the store commits
                    applied.withLock { $0 += batch.map(\.seq) }
                },
                skip: { _ in Issue.record("nothing was purged") })
        }
        defer { following.cancel() }
        try await waitUntil("the backlog applied", timeout: .seconds(60)) { applied.withLock { $0.count } >= 400 }
        // The bursts must meet the live feed, not the pages of the catch-up.
        try await waitUntil("the follower following live", timeout: .seconds(60)) { logs.messages.contains { $0.contains("following the store") } }
        // Bursts of 100 changes while it follows live: more than its backlog may hold.
        for burst in 0..<6 {
            try await family.admin.save((0..<100).map { Make.usage("new\(burst)-\($0)", start: Self.base, seconds: 5) }, zone: FamilyFixture.zone1)
        }
        try await waitUntil("every change applied", timeout: .seconds(60)) { applied.withLock { $0.count } >= 1000 }
        following.cancel()
        _ = await following.value

        let expected = try await ChangeFeedTests.watchAll(family.admin, WatchParams(recordTypes: ["UsageRecord"], follow: false)).events.map(\.seq)
        #expect(applied.withLock { $0 } == expected)
        #expect(logs.messages.contains { $0.contains("ran ahead of this service") }, "the live feed never outran the follower: nothing was tested")
    }
}

/// A log handler that keeps the messages.
private final class LogLines: LogHandler, Sendable {
    private let lines = Mutex<[String]>([])
    var messages: [String] { self.lines.withLock { $0 } }

    func log(event: LogEvent) {
        self.lines.withLock { $0.append(event.message.description) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }

    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }
}

/// How loud a follower is when the store goes away: a restart is news, a streak is trouble.
@Suite("FailureStreak: the first unavailable after the store answered is info, the rest warnings")
struct FailureStreakTests {
    @Test("before the store ever answered: warning; unavailable once after an answer: info; again in a row: warning; after the store answers again: info again; any other error: warning")
    func levels() {
        let streak = FailureStreak()
        let gone = RPCError(.unavailable, "the store closed the connection")
        #expect(streak.level(after: gone) == .warning, "the store was never reached: no restart, trouble")
        streak.reset()
        #expect(streak.level(after: gone) == .info)
        #expect(streak.level(after: gone) == .warning)
        #expect(streak.level(after: gone) == .warning)
        streak.reset()
        #expect(streak.level(after: gone) == .info)
        streak.reset()
        #expect(streak.level(after: RPCError(.internal, "disk I/O error")) == .warning)
        streak.reset()
        #expect(streak.level(after: CancellationError()) == .warning)
    }
}
