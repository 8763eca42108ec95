import DurableSQLite
import Foundation
import GRDB
import Logging
import NIOCore
import NIOPosix
import StoreAPI
import Testing
import TestSupport

/// The reads answered on an event loop from one read off a socket share one snapshot
/// (one read transaction), and nothing of it outlives that read.
@Suite("Reads on the event loop: one snapshot per read from a socket")
struct ReadSnapshotTests {
    static func database(_ directory: TemporaryDirectory) throws -> (DatabasePool, LoopReaders) {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE t (x INTEGER)") }
        let path = directory.file("snapshot.sqlite")
        let pool = try DurableSQLite.open(path: path, label: "test", program: "test", migrator: migrator, checkpointPages: 4000, logger: Logger(label: "test"))
        try pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
        return (pool, LoopReaders(path: path, label: "test.loop-reader"))
    }

    static func count(_ readers: LoopReaders) throws -> Int? {
        try readers.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? 0 }
    }

    @Test("in a batch, reads see the database as of the first of them; the next read after the batch sees what was committed meanwhile")
    func batchSharesOneSnapshot() async throws {
        let directory = TemporaryDirectory()
        let (pool, readers) = try Self.database(directory)
        let seen = try await MultiThreadedEventLoopGroup.singleton.next().submit { () -> [Int?] in
            var seen: [Int?] = []
            readers.batch {
                seen.append(try? Self.count(readers))
                try? pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (2)") }
                seen.append(try? Self.count(readers))
            }
            seen.append(try? Self.count(readers))
            // Outside a batch every read is a snapshot of its own.
            try? pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (3)") }
            seen.append(try? Self.count(readers))
            return seen
        }.get()
        #expect(seen == [1, 1, 2, 3])
    }

    @Test("a read that fails in a batch gives its snapshot up: the batch's next read takes a new one")
    func failedReadEndsTheSnapshot() async throws {
        let directory = TemporaryDirectory()
        let (pool, readers) = try Self.database(directory)
        let seen = try await MultiThreadedEventLoopGroup.singleton.next().submit { () -> [String] in
            var seen: [String] = []
            readers.batch {
                seen.append("\((try? Self.count(readers)).map { "\($0 ?? -1)" } ?? "failed")")
                try? pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (2)") }
                do {
                    _ = try readers.read { db in try db.execute(sql: "SELECT * FROM nowhere") }
                    seen.append("read a missing table")
                } catch {
                    seen.append("failed")
                }
                seen.append("\((try? Self.count(readers)).map { "\($0 ?? -1)" } ?? "failed")")
            }
            return seen
        }.get()
        #expect(seen == ["1", "failed", "2"])
    }

    @Test("off an event loop there is no loop connection: a batch just runs its body")
    func offTheLoop() throws {
        let directory = TemporaryDirectory()
        let (_, readers) = try Self.database(directory)
        var ran = false
        readers.batch { ran = true }
        #expect(ran)
        #expect(try Self.count(readers) == nil)
    }

    @Test("32 fetches sent in one write all see a save acknowledged before they were sent, round after round")
    func pipelinedFetchesSeeAcknowledgedSaves() async throws {
        try await StoreHarness.inProcess { store in
            let family = try await FamilyFixture.setUp(store)
            let connection = try RawConnection(path: store.socketPath)
            defer { connection.close() }
            let start = Date(timeIntervalSince1970: 1_795_003_200)
            for round in 1...5 {
                let saved = try await family.child1.save([Make.usage("u\(round)", start: start, seconds: Int64(round))], zone: FamilyFixture.zone1)
                #expect(saved.saved.count == 1)
                var bytes: [UInt8] = []
                for i in 0..<32 {
                    let request = #"{"id":\#(i),"method":"store.fetch","params":{"family":"\#(FamilyFixture.family)","zone":"\#(FamilyFixture.zone1)","recordNames":["u\#(round)"]},"auth":{"token":"\#(FamilyFixture.child1Token)"}}"#
                    let payload = Array(request.utf8)
                    let n = UInt32(payload.count)
                    bytes += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
                }
                connection.sendRaw(bytes)
                let seconds = try await offThePool { () -> [Int] in
                    try (0..<32).map { _ in
                        let reply = try #require(try connection.readReply())
                        let records = try #require((reply["result"] as? [String: Any])?["records"] as? [[String: Any]], "\(reply)")
                        let fields = try #require(records.first?["fields"] as? [String: Any])
                        return try #require(fields["totalSeconds"] as? Int)
                    }
                }
                #expect(seconds == Array(repeating: round, count: 32), "round \(round)")
            }
        }
    }
}
