import Foundation
import GRDB
import PushAPI
import RPCClient
import RPCCore
import StoreAPI
import StackSupport
import Testing
import TestSupport

@Suite("Push: the durable queues keep their numbers", .serialized)
struct QueueStorageTests {
    @Test("a device's numbers never go back: not after its notifications expired and push was killed (they jump ahead), nor after a clean restart (they go on by one)")
    func numbersNeverGoBack() async throws {
        let stack = try await PushStack.start(pushArguments: ["--maintenance-interval", "0.2"])
        defer { stack.stopNow() }
        for title in ["one", "two", "three"] {
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: title), ttlSeconds: 1))
        }
        try await waitUntil("push dropping the expired notifications", detail: stack.pushLog) {
            stack.pushLog.contains("expired notifications dropped")
        }
        await stack.kill()
        try await stack.startPush()

        // Killed: the numbers it had reserved are skipped, so none it may have sent is reused.
        let afterKill = try #require(try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "four"))).queued.first)
        #expect(afterKill.deviceId == "mum-phone" && afterKill.seq > 3)
        let listening = Listening(stack.parent)
        let received = try await listening.wait(for: 1)
        try await listening.expectQuiet(beyond: 1)
        #expect(received.map(\.seq) == [afterKill.seq] && received.first?.alert?.title == "four")
        listening.cancel()

        // Stopped cleanly: it gives back what it reserved, and the next number follows.
        await stack.push.stop()
        try await stack.startPush()
        let afterStop = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "five")))
        #expect(afterStop.queued == [QueuedNotification(deviceId: "mum-phone", seq: afterKill.seq + 1)])
        // Acknowledging past the end stops at the last notification.
        #expect(try await stack.parent.call(PushMethods.ack, AckParams(upTo: afterKill.seq + 1000)).acked == afterKill.seq + 1)
    }

    @Test("a device that listens again and again while notifications pour in misses none, though live delivery does not wait for the queue's commit")
    func relisteningMissesNothing() async throws {
        let stack = try await PushStack.start()
        defer { stack.stopNow() }
        // Each notification goes to 1,000 parents: its queue write takes long enough that a
        // listen often starts between the notification's delivery and its commit.
        let store = stack.harness.storeClient()
        for index in 0..<999 {
            _ = try await store.call(StoreMethods.putCredential, PutCredentialParams(
                family: "smith", deviceId: "parent-\(index)", role: .coParent, tokenSHA256: SHA256Hex.of("token-\(index)")))
        }
        let total: Int64 = 200
        let (local, parent) = (stack.local, stack.parent)
        let sender = Task {
            for index in 1...total {
                _ = try await local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "n\(index)")))
            }
        }
        let listener = Task {
            var seen: [Int64] = []
            while (seen.last ?? 0) < total, !Task.isCancelled {
                // A short session each time: listen after what was seen, take one, go away for
                // a moment, so the next listen often starts while a notification it missed
                // live is still being written.
                for try await event in parent.stream(PushMethods.listen, ListenParams(after: seen.last ?? 0)) {
                    guard case .item(let notification) = event else { continue }
                    seen.append(notification.seq)
                    break
                }
                try await Task.sleep(for: .milliseconds(Int64.random(in: 0...40)))
            }
            return seen
        }
        // A notification missed for good would leave the listener waiting: stop it.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(120))
            listener.cancel()
        }
        defer { watchdog.cancel() }
        try await sender.value
        let seen = try await listener.value
        #expect(seen == Array(1...total), "each notification once, in order")
    }

    @Test("a queue written by the previous version (a row per device with its own copy) is carried over: same numbers, same order, collapse keys kept")
    func earlierQueueCarriedOver() async throws {
        let stack = try await PushStack.start()
        defer { stack.stopNow() }
        await stack.kill()
        let path = stack.harness.state + "/push.sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try VersionTwoQueue.write(to: path, family: "smith", deviceId: "mum-phone", lastSeq: 7, acked: 2, rows: [
            (3, nil, "three"), (5, "balance", "five"), (7, nil, "seven"),
        ])
        try await stack.startPush()

        let listening = Listening(stack.parent)
        let received = try await listening.wait(for: 3)
        try await listening.expectQuiet(beyond: 3)
        #expect(received.map(\.seq) == [3, 5, 7])
        #expect(received.map(\.alert?.title) == ["three", "five", "seven"])
        listening.cancel()

        // New notifications follow the last number, and the collapse key still replaces.
        let next = try await stack.local.call(PushMethods.notify, NotifyParams(
            family: "smith", parents: true, alert: Alert(title: "eight"), collapseKey: "balance"))
        #expect(next.queued == [QueuedNotification(deviceId: "mum-phone", seq: 8)])
        let again = Listening(stack.parent)
        let backlog = try await again.wait(for: 3)
        try await again.expectQuiet(beyond: 3)
        #expect(backlog.map(\.seq) == [3, 7, 8])
        #expect(try await stack.parent.call(PushMethods.ack, AckParams(upTo: 7)) == AckResult(acked: 7, pending: 1))
    }
}

/// `push.sqlite` as version 2 of the push service left it (migrations push-v1 and
/// push-v2-webhooks): one queue row per device, each with its own copy of the JSON.
enum VersionTwoQueue {
    static func write(to path: String, family: String, deviceId: String, lastSeq: Int64, acked: Int64,
                      rows: [(seq: Int64, collapseKey: String?, title: String)]) throws {
        let database = try DatabaseQueue(path: path)
        try database.write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('push-v1'), ('push-v2-webhooks');
                CREATE TABLE subscriptions (family TEXT NOT NULL, device_id TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL,
                    PRIMARY KEY (family, device_id, id)) WITHOUT ROWID;
                CREATE TABLE devices (family TEXT NOT NULL, device_id TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
                    acked INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (family, device_id)) WITHOUT ROWID;
                CREATE TABLE queue (family TEXT NOT NULL, device_id TEXT NOT NULL, seq INTEGER NOT NULL, collapse_key TEXT,
                    expires_at INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (family, device_id, seq)) WITHOUT ROWID;
                CREATE INDEX queue_by_collapse_key ON queue(family, device_id, collapse_key) WHERE collapse_key IS NOT NULL;
                CREATE INDEX queue_by_expiry ON queue(expires_at);
                CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
                CREATE TABLE webhooks (family TEXT NOT NULL, device_id TEXT NOT NULL, url TEXT NOT NULL, format TEXT NOT NULL,
                    authorization TEXT, status TEXT NOT NULL DEFAULT 'active', created_at INTEGER NOT NULL, delivered_at INTEGER,
                    last_error TEXT, PRIMARY KEY (family, device_id)) WITHOUT ROWID;
                CREATE TABLE outbox (family TEXT NOT NULL, device_id TEXT NOT NULL, seq INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                    due_at INTEGER NOT NULL, PRIMARY KEY (family, device_id, seq)) WITHOUT ROWID;
                CREATE INDEX outbox_by_due ON outbox(due_at);
                """)
            try db.execute(sql: "INSERT INTO devices VALUES (?, ?, ?, ?)", arguments: [family, deviceId, lastSeq, acked])
            let now = Date()
            for row in rows {
                let notification = PushNotification(
                    seq: 0, family: family, reason: .message, alert: Alert(title: row.title), collapseKey: row.collapseKey,
                    priority: .normal, createdAt: now, expiresAt: now.addingTimeInterval(3600))
                var writer = JSONWriter()
                try writer.encodable(notification)
                try db.execute(sql: "INSERT INTO queue VALUES (?, ?, ?, ?, ?, ?)", arguments: [
                    family, deviceId, row.seq, row.collapseKey, Int64((notification.expiresAt.timeIntervalSince1970 * 1000).rounded()),
                    String(decoding: writer.bytes, as: UTF8.self),
                ])
            }
        }
    }
}
