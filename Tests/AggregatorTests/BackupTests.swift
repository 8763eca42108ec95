import AggregatorAPI
import Foundation
import class GRDB.DatabaseQueue
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// The followers' own backups, taken while they run: each writes a checked copy of its
/// database into its backups directory, with its position in the store's change log, for a
/// local caller only.
@Suite("Aggregator and push: online backups of their databases", .serialized)
struct BackupTests {
    @Test("aggregator.backup and push.backup write consistent copies (what exists only there included: a downtime schedule) with their store positions; plain names only, never replacing a file; refused to a device")
    func followersBackUp() async throws {
        try await AggregatorStack.inProcess(withPush: true) { stack in
            try await stack.caughtUp()
            _ = try await stack.asParent(AggregatorMethods.setSchedule, SetScheduleParams(child: "emma", windows: [DowntimeWindow(days: [.sat], start: "21:00", end: "08:00")]))
            let status = try await stack.local.call(AggregatorMethods.status, Empty())

            let copy = try await stack.local.call(AggregatorMethods.backup, BackupParams(path: "aggregator-test.sqlite"))
            #expect(copy.path.hasSuffix("/backups/aggregator-test.sqlite") && copy.bytes > 0 && copy.lastSeq >= (status.position ?? 0), "\(copy) \(status)")
            let database = try DatabaseQueue(path: copy.path)
            #expect(try await database.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM downtime") } == 1, "the schedule is in the copy")
            try database.close()
            await expectError(.conflict) { _ = try await stack.local.call(AggregatorMethods.backup, BackupParams(path: "aggregator-test.sqlite")) }
            for name in ["../escape.sqlite", "/tmp/absolute.sqlite", "sub/nested.sqlite", ".."] {
                await expectError(.invalidParams) { _ = try await stack.local.call(AggregatorMethods.backup, BackupParams(path: name)) }
            }
            await expectError(.forbidden) {
                _ = try await stack.local.call(AggregatorMethods.backup, BackupParams(path: "by-a-device.sqlite"), actingFor: Auth(token: stack.family.parentCredential.token))
            }
            let named = try await stack.local.call(AggregatorMethods.backup, BackupParams())
            #expect((named.path as NSString).lastPathComponent.hasPrefix("aggregator-"))

            let push = RPCClient(configuration: ClientConfiguration(socketPath: stack.harness.socketPath(for: "push"), callTimeout: .seconds(30)))
            let pushed = try await push.call(PushMethods.backup, BackupParams(path: "push-test.sqlite"))
            #expect(pushed.path.hasSuffix("/backups/push-test.sqlite") && pushed.bytes > 0 && pushed.lastSeq > 0, "\(pushed)")
            let pushDatabase = try DatabaseQueue(path: pushed.path)
            #expect(try await pushDatabase.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") } == ["ok"])
            try pushDatabase.close()
            await expectError(.invalidParams) { _ = try await push.call(PushMethods.backup, BackupParams(path: "../push.sqlite")) }
            await push.close()
            #expect(stack.aggregatorLog.contains("backup written"))
        }
    }
}
