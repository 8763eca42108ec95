import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("The store's metrics (rpc.metrics)")
struct StoreMetricsTests {
    @Test("a save moves the saved-records counter, the commits and store.modify's requests by exactly one, and a refused call counts its error code; each instrument has its type")
    func aSaveCountsOnce() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let client = store.client()
        _ = try await client.call(StoreMethods.createFamily, CreateFamilyParams(family: FamilyFixture.family))
        let before = Exposition(try await client.call(Builtin.metrics, Empty()).text)
        let saved = try await client.call(StoreMethods.modify, ModifyParams(family: FamilyFixture.family, zone: "default", saves: [Make.child("child-1", opaque: "o-1")], atomic: true))
        #expect(saved.allSucceeded)
        let after = Exposition(try await client.call(Builtin.metrics, Empty()).text)
        await expectError(.notFound) { _ = try await client.call(StoreMethods.modify, ModifyParams(family: "nobody", zone: "default", saves: [Make.child("child-2", opaque: "o-2")])) }
        let refused = Exposition(try await client.call(Builtin.metrics, Empty()).text)

        func moved(_ name: String, _ labels: KeyValuePairs<String, String> = [:]) -> Double {
            (after.value(name, labels) ?? .nan) - (before.value(name, labels) ?? 0)
        }
        #expect(moved("screentime_store_records_saved_total") == 1)
        #expect(moved("screentime_store_commits_total") == 1)
        #expect(moved("screentime_store_writes_per_commit_count") == 1)
        #expect(moved("screentime_store_requests_total", ["method": "store.modify", "code": "ok"]) == 1)
        #expect(moved("screentime_store_request_duration_seconds_count", ["method": "store.modify"]) == 1)
        #expect(refused.value("screentime_store_requests_total", ["method": "store.modify", "code": "not_found"]) == 1)
        #expect(refused.value("screentime_store_records_saved_total") == after.value("screentime_store_records_saved_total"), "nothing saved")
        #expect(moved("screentime_store_change_log_head") >= 1)
        for (name, type) in ["screentime_store_records_saved_total": "counter", "screentime_store_commits_total": "counter",
                             "screentime_store_writes_per_commit": "histogram", "screentime_store_commit_duration_seconds": "histogram",
                             "screentime_store_change_log_head": "gauge", "screentime_store_wal_bytes": "gauge", "screentime_store_database_bytes": "gauge",
                             "screentime_store_requests_total": "counter", "screentime_store_request_duration_seconds": "histogram",
                             "screentime_store_connections": "gauge", "screentime_store_resident_memory_bytes": "gauge"] {
            #expect(after.types[name] == type, "\(name) is a \(type)")
        }
        #expect((after.value("screentime_store_connections") ?? 0) >= 1)
        #expect((after.value("screentime_store_wal_bytes") ?? 0) > 0)
    }

    @Test("rpc.metrics is local administration: a call with a device's credential is refused before anything is read")
    func localOnly() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        await expectError(.forbidden) { _ = try await store.client(token: "a-device-token").call(Builtin.metrics, Empty()) }
        #expect(try await store.client().call(Builtin.ping, Empty()).service == "store", "still up")
    }

    @Test("with --no-metrics the store counts nothing: rpc.metrics answers an empty text")
    func noMetrics() async throws {
        let store = try await StoreHarness.start(arguments: ["--no-metrics"])
        defer { store.stopNow() }
        let client = store.client()
        _ = try await client.call(StoreMethods.createFamily, CreateFamilyParams(family: FamilyFixture.family))
        let metrics = try await client.call(Builtin.metrics, Empty())
        #expect(metrics.text.isEmpty && metrics.service == "store")
    }
}
