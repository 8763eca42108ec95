import Foundation
import RPCClient
import RPCCore
import ScreenTimeKit
import StoreAPI
import Synchronization
import Testing
import TestSupport

/// The offline queue against the real store: writes made while it is down arrive once
/// when it is back, and a replay cut off after the store applied a batch (before the kit
/// knew) applies nothing twice.
@Suite("Offline queue", .serialized)
struct OfflineQueueTests {
    /// The UsageRecords in the child's zone, as the parent sees them.
    static func usageRecords(_ parent: ScreenTimeClient, _ zone: String) async throws -> [TypedRecord<UsageRecord>] {
        try await parent.records.queryAll(UsageRecord.self, in: zone)
    }

    static func sessions(_ count: Int, from minute: Int) -> [UsageSession] {
        (0..<count).map { index in
            UsageSession(logicalID: "org.khan", category: "learning", start: usageUTC(0, minute + index), end: usageUTC(0, minute + index).addingTimeInterval(30))
        }
    }

    @Test("writes queued while the store is stopped arrive exactly once when it starts")
    func storeStoppedThenStarted() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()
        let log = QueueLog(child.queue)

        await stack.stop("store")
        let ids = try child.child.uploadUsage(Self.sessions(3, from: 0)) + child.child.uploadUsage(Self.sessions(2, from: 10))
            + child.child.uploadUsage(Self.sessions(1, from: 20))
        #expect(ids.count == 3)
        // The kit tries, finds the store gone, and keeps the batches, in order.
        try await waitUntil("the transport sees the store gone") { child.transport.state != .connected }
        _ = try await log.events.wait(for: 1, "a failed attempt")
        #expect(try child.queue.pending().map(\.requestId) == ids)
        #expect(log.applied.isEmpty)

        try await stack.start("store")
        await child.queue.waitUntilDrained()
        try await waitUntil("three batches reported applied") { log.applied.count == 3 }
        #expect(log.applied.map(\.0.requestId) == ids, "sent in the order they were queued")
        #expect(log.applied.allSatisfy { !$0.1.replayed })
        #expect(log.failed.isEmpty)
        let records = try await Self.usageRecords(parent, zone)
        #expect(records.count == 6)
        #expect(Set(records.map(\.recordName)).count == 6)
        // Each written once: never modified after it was created.
        #expect(records.allSatisfy { $0.createdAt == $0.modifiedAt })
        await child.close()
        await parent.close()
    }

    @Test("a batch with one session that would end in the future: that one is set aside as failed, with the server's sentence; the others arrive")
    func partlyRefusedBatch() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()
        let log = QueueLog(child.queue)
        let ahead = Date().addingTimeInterval(3 * 3600)
        _ = try child.child.uploadUsage(Self.sessions(2, from: 0) + [UsageSession(logicalID: "org.khan", category: "learning", start: ahead, end: ahead.addingTimeInterval(60))])
        try await waitUntil("the refused part reported") { !log.failed.isEmpty }
        await child.queue.waitUntilDrained()
        let failed = try child.queue.failures()
        #expect(failed.count == 1 && failed[0].params.saves?.count == 1, "\(failed.map(\.params.saves))")
        #expect(failed.first?.lastError?.message.contains("after the server's time") == true, "\(String(describing: failed.first?.lastError))")
        _ = try await eventually("the two others stored") { seen in
            let count = try await Self.usageRecords(parent, zone).count
            seen = "\(count)"
            return count == 2 ? () : nil
        }
        await child.close()
        await parent.close()
    }

    @Test("a clock set ahead after the usage was queued does not move it: the batch carries the clock it was queued with, carried forward by the uptime; usage queued with the clock ahead carries the offset")
    func clockChangedAfterQueueing() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let ahead = Mutex<TimeInterval>(0)
        let (parent, child, zone) = try await stack.family(childClock: { Date().addingTimeInterval(ahead.withLock { $0 }) })
        await stack.stop("store")
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        _ = try child.child.uploadUsage([UsageSession(logicalID: "org.khan", category: "learning", start: now.addingTimeInterval(-1200), end: now.addingTimeInterval(-600))])
        // The child sets the clock two hours ahead before the tablet is online again.
        ahead.withLock { $0 = 7200 }
        try await stack.start("store")
        await child.queue.waitUntilDrained()
        var records = try await Self.usageRecords(parent, zone)
        #expect(records.count == 1 && records[0].fields.clockOffsetSeconds == nil, "moved by a clock changed after it was recorded: \(records.map(\.fields))")
        // Usage recorded with the clock ahead: the server sees the offset.
        let deviceNow = now.addingTimeInterval(7200)
        _ = try child.child.uploadUsage([UsageSession(logicalID: "org.khan", category: "learning", start: deviceNow.addingTimeInterval(-300), end: deviceNow.addingTimeInterval(-60))])
        await child.queue.waitUntilDrained()
        records = try await Self.usageRecords(parent, zone)
        #expect(records.count == 2 && records.contains { $0.fields.clockOffsetSeconds == 7200 }, "\(records.map(\.fields))")
        await child.close()
        await parent.close()
    }

    @Test("a kit dropped mid-replay, after the store applied a batch: the next kit on the same queue replays it without applying it twice")
    func droppedMidReplay() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (parent, first, zone) = try await stack.family()
        await first.close()  // the paired child's credential stays in its file

        // The child's process, about to die: the store applies the second batch, the reply
        // never reaches the kit.
        let inner = UnixSocketTransport(runtimeDirectory: stack.directory.path, backoff: KitStack.fast)
        let dying = DyingTransport(inner, dieOnModify: 2)
        let doomed = try stack.kit("child", transport: dying)
        let doomedLog = QueueLog(doomed.queue)
        let ids = try doomed.child.uploadUsage(Self.sessions(2, from: 0)) + doomed.child.uploadUsage(Self.sessions(2, from: 10))
            + doomed.child.uploadUsage(Self.sessions(2, from: 20))
        await dying.died.wait()
        _ = try await doomedLog.events.wait(for: 1, "the first batch applied")
        #expect(doomedLog.applied.map(\.0.requestId) == [ids[0]])
        await doomed.close()
        // The store did apply the second batch; the queue file still holds it.
        #expect(try await Self.usageRecords(parent, zone).count == 4)

        // The app starts again on the same queue file.
        let revived = try stack.kit("child")
        #expect(try revived.queue.pending().map(\.requestId) == [ids[1], ids[2]])
        let log = QueueLog(revived.queue)
        await revived.queue.waitUntilDrained()
        try await waitUntil("two batches reported applied") { log.applied.count == 2 }
        #expect(log.applied.map(\.0.requestId) == [ids[1], ids[2]])
        #expect(log.applied.map(\.1.replayed) == [true, false], "the second batch was only looked up again, not applied")
        let records = try await Self.usageRecords(parent, zone)
        #expect(records.count == 6)
        #expect(records.allSatisfy { $0.createdAt == $0.modifiedAt })

        // And once more, a replay of everything changes nothing.
        #expect(try revived.queue.pending().isEmpty)
        await revived.close()
        await parent.close()
        _ = inner
    }

    @Test("a batch the store refuses is kept as failed and reported, and the ones after it still go")
    func refusedKept() async throws {
        let stack = try await KitStack.start()
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()
        let log = QueueLog(child.queue)
        let family = try #require(child.identity?.family)
        // A child may not write AppRules: refused for good.
        let bad = try child.queue.enqueue(ModifyParams(family: family, zone: zone, saves: [
            RecordSave(recordType: "AppRule", recordName: "rule-x", fields: ["familyRef": .reference(family, zone: "default"), "bundleId": "x", "classification": "reward"]),
        ]))
        let good = try child.child.uploadUsage(Self.sessions(1, from: 0))
        await child.queue.waitUntilDrained()
        try await waitUntil("both batches reported") { log.failed.count + log.applied.count == 2 }
        #expect(log.failed.map(\.0.requestId) == [bad])
        #expect(log.applied.map(\.0.requestId) == good)
        #expect(try child.queue.failures().map(\.requestId) == [bad])
        #expect(try await Self.usageRecords(parent, zone).count == 1)
        try child.queue.discard(requestId: bad)
        #expect(try child.queue.failures().isEmpty)
        await child.close()
        await parent.close()
    }
}

/// A transport that dies on its `n`-th `store.modify`: the request reaches the store and is
/// applied, then the reply is lost and the call hangs until the kit is torn down, as when
/// the process is killed between the two.
final class DyingTransport: Transport {
    let inner: any Transport
    let dieOnModify: Int
    let died = Flag()
    private let modifies = Atomic<Int>(0)

    init(_ inner: any Transport, dieOnModify: Int) {
        self.inner = inner
        self.dieOnModify = dieOnModify
    }

    func call(_ request: TransportRequest) async throws(RPCError) -> JSONValue {
        guard request.method == "store.modify" else { return try await self.inner.call(request) }
        let count = self.modifies.add(1, ordering: .relaxed).newValue
        if count < self.dieOnModify { return try await self.inner.call(request) }
        if count == self.dieOnModify { _ = try await self.inner.call(request) }
        self.died.raise()
        // Dead: nothing more answers.
        try? await Task.sleep(for: .seconds(3600))
        throw RPCError(.cancelled, "the process died")
    }

    func stream(_ request: TransportRequest) -> AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error> { self.inner.stream(request) }
    func states() -> AsyncStream<ConnectionState> { self.inner.states() }
    var state: ConnectionState { self.inner.state }
    func close() async { await self.inner.close() }
}

/// Raised once; waited for.
final class Flag: Sendable {
    private let state = Mutex<(raised: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func raise() {
        let waiters = self.state.withLock { state in
            state.raised = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
    func wait() async {
        await withCheckedContinuation { continuation in
            let now = self.state.withLock { state -> Bool in
                if state.raised { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
