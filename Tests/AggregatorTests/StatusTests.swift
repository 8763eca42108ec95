import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Aggregator: who may ask aggregator.status, and what each sees", .serialized)
struct StatusTests {
    /// Once, any device token got server-wide counters, a child's included.
    @Test("local callers see the whole server; a parent sees its own family's counters only (no change-log position); a child gets forbidden, a token that is no credential unauthorized")
    func statusAccess() async throws {
        try await AggregatorStack.inProcess { stack in
            try await stack.session("s1", from: stack.at("2026-11-20 08:00"), to: stack.at("2026-11-20 08:10"))
            // A second family, with usage of its own on two days.
            let jones = try await Bootstrapped.make(stack.harness, family: "jones", parentDevice: "dad-phone")
            let leo = try await jones.pairChild(stack.harness, child: "leo", device: "leo-ipad")
            try await leo.saveUsage("j1", family: "jones")
            _ = try await leo.store.call(StoreMethods.modify, ModifyParams(family: "jones", zone: leo.zone, saves: [
                RecordSave(recordType: "UsageRecord", recordName: "j2", fields: [
                    "logicalID": "org.khan", "deviceID": .string(leo.deviceId), "category": "learning",
                    "sessionStart": .date(stack.at("2026-11-21 08:00")), "sessionEnd": .date(stack.at("2026-11-21 08:05")), "totalSeconds": 300,
                ]),
            ], atomic: true))
            try await stack.settle(sessions: 3)

            let local = try await stack.local.call(AggregatorMethods.status, Empty())
            #expect(local.sessions == 3 && local.days == 3)
            #expect(try await stack.local.call("aggregator.status")["position"]?.intValue.map { $0 > 0 } == true)

            func client(_ token: String) -> RPCClient {
                RPCClient(configuration: ClientConfiguration(socketPath: stack.aggregatorSocket, auth: Auth(token: token)))
            }
            let smith = try await client(stack.family.parentCredential.token).call("aggregator.status")
            #expect(smith["sessions"] == 1 && smith["days"] == 1 && smith["pendingSummaries"] == 0, "\(smith)")
            #expect(smith["position"] == nil, "the store's change-log position counts every family's writes: \(smith)")
            let theirs = try await client(jones.parentCredential.token).call("aggregator.status")
            #expect(theirs["sessions"] == 2 && theirs["days"] == 2, "\(theirs)")

            await expectError(.forbidden, containing: "parent") { _ = try await client(stack.child.token).call("aggregator.status") }
            await expectError(.forbidden) { _ = try await client(leo.token).call("aggregator.status") }
            await expectError(.unauthorized) { _ = try await client("not-a-credential").call("aggregator.status") }
            // Still serving.
            #expect(try await stack.local.call(AggregatorMethods.status, Empty()).sessions == 3)
        }
    }
}
