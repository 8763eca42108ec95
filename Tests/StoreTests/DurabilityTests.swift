import Foundation
import Glibc
import RPCClient
import RPCCore
import StoreAPI
import Synchronization
import Testing
import TestSupport

@Suite("Durability: kill -9 under load, online backups")
struct DurabilityTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    /// What concurrent writers did: batches acknowledged, and batches sent.
    final class Ledger: Sendable {
        let acknowledged = Mutex<[[String]]>([])
        let attempted = Mutex<[[String]]>([])
        let running = Atomic<Bool>(true)
    }

    /// `writers` clients each saving atomic batches of three records until `ledger.running` is false.
    static func load(_ store: StoreHarness, writers: Int, ledger: Ledger) -> Task<Void, Never> {
        Task {
            await withTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        let client = RPCClient(configuration: ClientConfiguration(
                            socketPath: store.socketPath, callTimeout: .seconds(20), connectTimeout: .milliseconds(200)))
                        var n = 0
                        while ledger.running.load(ordering: .relaxed) {
                            let names = ["a", "b", "c"].map { "w\(writer)-\(n)-\($0)" }
                            n += 1
                            ledger.attempted.withLock { $0.append(names) }
                            let saves = names.map { name in
                                var save = Make.usage(name, start: Self.start, seconds: 60)
                                save.fields["logicalID"] = "durability"
                                return save
                            }
                            do {
                                let result = try await client.save(saves, zone: FamilyFixture.zone1, atomic: true)
                                if result.allSucceeded { ledger.acknowledged.withLock { $0.append(names) } }
                            } catch {
                                break  // the store went away
                            }
                        }
                        await client.close()
                    }
                }
            }
        }
    }

    static func fetchAll(_ client: RPCClient, _ names: [String]) async throws -> Set<String> {
        var found = Set<String>()
        for chunk in stride(from: 0, to: names.count, by: 400) {
            let page = Array(names[chunk..<min(chunk + 400, names.count)])
            found.formUnion(try await client.fetch(page, zone: FamilyFixture.zone1).records.map(\.recordName))
        }
        return found
    }

    @Test("the binary runs SQLite without its memory statistics (a global mutex on every allocation) and says so")
    func memoryStatisticsOff() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        #expect(store.process.log.contains("sqlite_memory_statistics=off"), "\(store.process.log)")
    }

    @Test("after kill -9 under a load of many writers, every acknowledged save is there and no batch is half-written")
    func killNineUnderLoad() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        _ = try await FamilyFixture.setUp(store)
        let ledger = Ledger()
        let load = Self.load(store, writers: 24, ledger: ledger)
        // Let the load build up, then pull the plug in the middle of it.
        try await waitUntil("300 saves acknowledged", timeout: .seconds(60), detail: store.process.log) { ledger.acknowledged.withLock { $0.count } >= 300 }
        store.process.signal(SIGKILL)
        ledger.running.store(false, ordering: .relaxed)
        _ = try await store.process.waitForExit()
        await load.value

        try await store.restart()
        let client = store.client()
        let acknowledged = ledger.acknowledged.withLock { $0 }
        let attempted = ledger.attempted.withLock { $0 }
        let present = try await Self.fetchAll(client, attempted.flatMap { $0 })
        let lost = acknowledged.flatMap { $0 }.filter { !present.contains($0) }
        #expect(lost.isEmpty, "acknowledged but lost: \(lost.prefix(10))")
        let halves = attempted.filter { batch in
            let count = batch.filter(present.contains).count
            return count != 0 && count != batch.count
        }
        #expect(halves.isEmpty, "half-written batches: \(halves.prefix(5))")
        // The index agrees with the records: a query finds every record there is.
        var counted = 0
        var params = QueryParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord",
                                 filters: [QueryFilter("logicalID", .equal, "durability")], limit: 400)
        repeat {
            let page = try await client.call(StoreMethods.query, params)
            counted += page.records.count
            params.cursor = page.cursor
        } while params.cursor != nil
        #expect(counted == present.count)
        #expect(acknowledged.count >= 300)
    }

    @Test("store.backup writes only into its backups directory: absolute paths, '..', sub-directories and a symlinked directory are refused")
    func backupConfined() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let admin = store.client()
        let outside = TemporaryDirectory()
        for name in [outside.file("absolute.sqlite"), "../escape.sqlite", "..", ".", "sub/nested.sqlite", "a\u{0}b.sqlite"] {
            let error = await expectError(.invalidParams) { _ = try await admin.call(StoreMethods.backup, BackupParams(path: name)) }
            #expect(error?.data?["parameter"] == "params.path", "\(name): \(String(describing: error))")
        }
        #expect(!FileManager.default.fileExists(atPath: outside.file("absolute.sqlite")))
        #expect(!FileManager.default.fileExists(atPath: store.state + "/escape.sqlite"))

        // A backups directory that is a symbolic link is not followed.
        let backups = store.state + "/backups"
        try FileManager.default.createSymbolicLink(atPath: backups, withDestinationPath: outside.path)
        let error = await expectError(.unavailable) { _ = try await admin.call(StoreMethods.backup, BackupParams(path: "linked.sqlite")) }
        #expect(error?.message.contains("symbolic link") == true, "\(String(describing: error))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)

        // A plain name goes into the real directory, and an existing file is never replaced,
        // even a symbolic link standing where the backup would go.
        try FileManager.default.removeItem(atPath: backups)
        let made = try await admin.call(StoreMethods.backup, BackupParams(path: "nightly.sqlite"))
        #expect(made.path == backups + "/nightly.sqlite" && made.bytes > 0)
        try FileManager.default.createSymbolicLink(atPath: backups + "/trap.sqlite", withDestinationPath: outside.file("target.sqlite"))
        await expectError(.conflict) { _ = try await admin.call(StoreMethods.backup, BackupParams(path: "trap.sqlite")) }
        #expect(!FileManager.default.fileExists(atPath: outside.file("target.sqlite")))
        #expect(try await admin.call("rpc.ping")["service"] == "store")
    }

    @Test("a backup taken under load opens as a database holding everything acknowledged before it began")
    func backupUnderLoad() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let ledger = Ledger()
        let load = Self.load(store, writers: 8, ledger: ledger)
        try await waitUntil("100 saves acknowledged", timeout: .seconds(60), detail: store.process.log) { ledger.acknowledged.withLock { $0.count } >= 100 }
        let before = ledger.acknowledged.withLock { $0 }.flatMap { $0 }
        let backup = try await family.admin.call(StoreMethods.backup, BackupParams(path: "under-load.sqlite"))
        ledger.running.store(false, ordering: .relaxed)
        await load.value
        #expect(backup.path == store.state + "/backups/under-load.sqlite" && backup.bytes > 0)

        // The same path again is refused rather than overwritten.
        await expectError(.conflict) { _ = try await family.admin.call(StoreMethods.backup, BackupParams(path: "under-load.sqlite")) }
        let defaultNamed = try await family.admin.call(StoreMethods.backup, BackupParams())
        #expect(defaultNamed.path.hasPrefix(store.state + "/backups/store-"))

        // Restore: a second store on a copy of the backup.
        let restored = TemporaryDirectory()
        let state = restored.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: backup.path, toPath: state + "/store.sqlite")
        let second = try await ServiceProcess.start("screentime-stored", service: "store", in: restored, stateDirectory: state)
        defer { second.stopNow() }
        let client = RPCClient(socketPath: second.socketPath)
        let present = try await Self.fetchAll(client, before)
        #expect(present.count == before.count, "\(before.count - present.count) acknowledged records missing from the backup")
        // The restored store carries on from the backup's position.
        let watch = try await ChangeFeedTests.watchAll(client, WatchParams(follow: false, includeRecords: false))
        #expect(watch.end.lastSeq == backup.lastSeq)
        await client.close()
    }

    @Test("a write that fails inside a shared commit leaves nothing behind and does not fail the writes beside it")
    func failedWriteInSharedCommit() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let before = try await family.admin.call(StoreMethods.stats, Empty())
        let writers = 16, rounds = 10
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    let client = store.client()
                    for n in 0..<rounds {
                        if writer % 2 == 0 {
                            let result = try await client.save([Make.usage("ok-\(writer)-\(n)", start: Self.start, seconds: 60)], zone: FamilyFixture.zone1)
                            #expect(result.allSucceeded)
                        } else {
                            // The first item is written before the second is refused; the
                            // atomic batch must take it back.
                            var bad = Make.usage("bad-\(writer)-\(n)-b", start: Self.start, seconds: 60)
                            bad.fields["totalSeconds"] = -1
                            let error = await expectError(.invalidParams) {
                                try await client.save([Make.usage("bad-\(writer)-\(n)-a", start: Self.start, seconds: 60), bad],
                                                      zone: FamilyFixture.zone1, atomic: true)
                            }
                            #expect(error?.message.contains("atomic batch was not applied") == true)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let after = try await family.admin.call(StoreMethods.stats, Empty())
        #expect(after.commits - before.commits < after.writes - before.writes, "no commit was shared, so nothing was tested")

        let changes = try await family.admin.call(StoreMethods.zoneChanges, ZoneChangesParams(family: FamilyFixture.family, zone: FamilyFixture.zone1, limit: 400))
        let names = Set(changes.records.map(\.recordName))
        let expected = Set((0..<writers).filter { $0 % 2 == 0 }.flatMap { writer in (0..<rounds).map { "ok-\(writer)-\($0)" } })
        #expect(names.subtracting(expected).sorted() == [], "left behind by batches that were taken back")
        #expect(expected.subtracting(names).sorted() == [], "acknowledged but missing")
        #expect(changes.deletions.isEmpty && !changes.moreComing)
        let query = try await family.admin.call(StoreMethods.query, QueryParams(
            family: FamilyFixture.family, zone: FamilyFixture.zone1, recordType: "UsageRecord",
            filters: [QueryFilter("deviceID", .equal, "c1")], limit: 400))
        #expect(Set(query.records.map(\.recordName)).symmetricDifference(expected).sorted() == [], "the index disagrees with what was acknowledged")
    }

    @Test("concurrent writers share commits: store.stats counts fewer fsynced transactions than writes")
    func groupCommitSharesFsyncs() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let family = try await FamilyFixture.setUp(store)
        let before = try await family.admin.call(StoreMethods.stats, Empty())
        let writers = 16, savesEach = 25
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    let client = store.client()
                    for n in 0..<savesEach {
                        let result = try await client.save([Make.usage("g\(writer)-\(n)", start: Self.start, seconds: 60)], zone: FamilyFixture.zone1)
                        #expect(result.allSucceeded)
                    }
                }
            }
            try await group.waitForAll()
        }
        let after = try await family.admin.call(StoreMethods.stats, Empty())
        let writes = after.writes - before.writes
        let commits = after.commits - before.commits
        #expect(writes == Int64(writers * savesEach))
        #expect(commits < writes, "\(writes) writes took \(commits) commits: no batching")
        #expect(after.writesPerCommit > 1 && after.head > before.head && after.startedAt == before.startedAt)
    }
}
