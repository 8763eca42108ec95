import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator service: describe, socket activation and waking (on the binary), records it cannot count", .serialized)
struct AggregatorServiceTests {
    @Test("rpc.describe lists every aggregator method with its parameters and errors")
    func describe() async throws {
        try await AggregatorStack.inProcess { stack in
            let description = try await stack.local.call("rpc.describe")
            let methods = try #require(description["methods"]?.arrayValue)
            let names = Set(methods.compactMap { $0["name"]?.stringValue })
            for name in ["aggregator.status", "aggregator.report", "aggregator.exportCSV", "aggregator.recompute", "aggregator.rollUp"] {
                #expect(names.contains(name), "\(name)")
            }
            let rollUp = try #require(methods.first { $0["name"] == "aggregator.rollUp" })
            #expect(rollUp["params"]?["properties"]?["asOf"] != nil && rollUp["errors"]?.arrayValue?.contains("forbidden") == true)
            let report = try #require(methods.first { $0["name"] == "aggregator.report" })
            #expect(report["params"]?["properties"]?["by"]?["enum"] == ["day", "week"])
        }
    }

    @Test("asleep (idle-exited) under socket activation, the aggregator is woken by the store and catches up")
    func wokenByTheStore() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let child = try await family.pairChild(harness)
        let socket = harness.directory.file("aggregator.sock")
        let activator = try Activator(path: socket)
        let arguments = ["--runtime-dir", harness.directory.path, "--state-dir", harness.state, "--idle-exit", "1", "--log-level", "debug"]
        var pid = try activator.spawn(Binaries.path("screentime-aggregatord"), arguments, log: harness.directory.file("aggregator-1.log"))
        let client = RPCClient(configuration: ClientConfiguration(socketPath: socket, connectTimeout: .seconds(10)))
        let first = try await client.call(AggregatorMethods.status, Empty())
        #expect(first.sessions == 0)
        await client.close()
        #expect(try await activator.waitForExit(pid, timeout: .seconds(15)) == 0, "idle, it exits")

        try await child.saveUsage("while-asleep", family: family.family, seconds: 600)
        #expect(activator.hasPendingConnection(timeout: .seconds(5)), "the store connects to aggregator.sock: systemd would start the aggregator")
        pid = try activator.spawn(Binaries.path("screentime-aggregatord"), arguments, log: harness.directory.file("aggregator-2.log"))
        defer { kill(pid, SIGTERM) }
        let parentStore = harness.storeClient(token: family.parentCredential.token)
        let summaries = try await eventually("the woken aggregator writing the day's summary") { _ in
            let records = try await parentStore.call(StoreMethods.query, QueryParams(family: family.family, zone: child.zone, recordType: "DailySummary")).records
            return records.isEmpty ? nil : records
        }
        #expect(summaries.first?.fields["totalLearningSeconds"] == 600)
    }

    @Test("a usage record it cannot count (its end before its start) counts for nothing; the rest still count and the service stays up")
    func uncountable() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("backwards", from: stack.at("2026-11-20 10:00"), to: stack.at("2026-11-20 09:00"))
            try await stack.session("empty", from: stack.at("2026-11-20 10:00"), to: stack.at("2026-11-20 10:00"))
            try await stack.session("fine", from: stack.at("2026-11-20 11:00"), to: stack.at("2026-11-20 11:05"))
            try await stack.waitForSummary("2026-11-20") { $0?.learning == 300 }
            try await stack.settle(sessions: 1)
            // A backwards session that used to be a good one takes its time back out.
            try await stack.session("fine", from: stack.at("2026-11-20 11:05"), to: stack.at("2026-11-20 11:00"))
            try await stack.waitForSummary("2026-11-20") { $0 == nil }
            _ = try await stack.local.call(Builtin.ping, Empty())
            await expectError(.methodNotFound) { _ = try await stack.local.call("aggregator.nope") }
        }
    }

    @Test("aggregator.status tells when the aggregator has caught up with the store, though its position stops at the last change it follows")
    func caughtUp() async throws {
        let stack = try await AggregatorStack.start()
        defer { stack.stopNow() }
        try await stack.session("fine", from: stack.at("2026-11-20 11:00"), to: stack.at("2026-11-20 11:05"))
        try await stack.waitForSummary("2026-11-20") { $0?.learning == 300 }
        // (Its own writes, the ledger and balance included, all done first.)
        try await stack.settle(sessions: 1)
        _ = try await Self.statusOnceCaughtUp(stack)
        // Changes the aggregator does not follow (audit entries) move the store's head on.
        let family = stack.family.family
        for index in 0..<3 {
            _ = try await stack.parentStore.call(StoreMethods.modify, ModifyParams(family: family, zone: "default", saves: [
                RecordSave(recordType: "AuditEntry", recordName: "audit-test-\(index)", fields: [
                    "familyRef": .reference(family, zone: "default"), "actorParentRef": .reference(family, zone: "default"),
                    "action": "test", "timestamp": .date(Date()),
                ]),
            ], atomic: true))
        }
        let head = try await stack.harness.storeClient().call(StoreMethods.stats, Empty()).head
        var status = try await Self.statusOnceCaughtUp(stack)
        #expect((status["storeHead"]?.intValue ?? 0) >= head, "\(status)")
        #expect((status["position"]?.intValue ?? .max) < head, "the position is the last change it applied: \(status)")

        // After a restart with a change it has not applied yet, it catches up again.
        await stack.kill()
        try await stack.session("later", from: stack.at("2026-11-20 12:00"), to: stack.at("2026-11-20 12:05"))
        try await stack.restart()
        status = try await Self.statusOnceCaughtUp(stack)
        #expect(status["sessions"] == 2, "caught up means the change is applied: \(status)")
        try await stack.waitForSummary("2026-11-20") { $0?.learning == 600 }
    }

    /// `aggregator.status` (as JSON, so that a missing field fails the test) once it says
    /// `caughtUp`.
    static func statusOnceCaughtUp(_ stack: AggregatorStack) async throws -> JSONValue {
        try await eventually("the aggregator saying it has caught up") { lastSeen in
            let status = try await stack.local.call("aggregator.status")
            lastSeen = "\(status)"
            // (Spelt out: JSONValue takes a nil literal as its own null.)
            return status["caughtUp"] == true ? status : JSONValue?.none
        }
    }
}
