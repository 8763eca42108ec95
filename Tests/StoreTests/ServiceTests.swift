import Foundation
import Glibc
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

@Suite("The store as a service: socket activation, describe, bad input")
struct ServiceTests {
    @Test("started by systemd-socket-activate, the store answers on the passed socket and stops cleanly on SIGTERM")
    func socketActivated() async throws {
        let store = try await StoreHarness.start(activated: true)
        let client = store.client()
        let family = try await client.call(StoreMethods.createFamily, CreateFamilyParams(family: "fam-a"))
        #expect(family.zones == 1)
        #expect(store.process.log.contains("using sockets passed by systemd"))
        await client.close()
        store.process.signal(SIGTERM)
        #expect(try await store.process.waitForExit() == 0)
        #expect(FileManager.default.fileExists(atPath: store.state + "/store.sqlite"))
    }

    @Test("half-closing ends a following store.watch with one final cancelled reply; the unary call before it is answered; then the store closes")
    func halfCloseEndsWatch() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let connection = try RawConnection(path: store.socketPath)
        connection.sendJSON(["id": "watch", "method": "store.watch", "params": ["after": 0, "follow": true]])
        connection.sendJSON(["id": "family", "method": "store.createFamily", "params": ["family": "fam-a"]])
        // The family's creation is a change: the watch follows it live.
        var replies: [[String: Any]] = []
        while !replies.contains(where: { $0["id"] as? String == "watch" && $0["continues"] as? Bool == true }) {
            replies.append(try #require(try connection.readReply()))
        }
        connection.shutdownWrite()
        while let reply = try connection.readReply() { replies.append(reply) }
        #expect(replies.contains { $0["id"] as? String == "family" && $0.result != nil })
        let finals = replies.filter { $0["id"] as? String == "watch" && $0["continues"] == nil }
        #expect(finals.count == 1, "\(finals)")
        #expect(finals.first?.errorCode == "cancelled")
    }

    @Test("rpc.describe lists every store method with its parameters, result and errors")
    func describe() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let description = try await store.client().call("rpc.describe")
        let methods = try #require(description["methods"]?.arrayValue)
        let names = Set(methods.compactMap { $0["name"]?.stringValue })
        for name in ["store.createZone", "store.deleteZone", "store.listZones", "store.modify", "store.fetch", "store.query", "store.zoneChanges",
                     "store.databaseChanges", "store.watch", "store.share", "store.unshare", "store.shareInfo", "store.backup", "store.purge", "store.stats"] {
            #expect(names.contains(name), "\(name)")
        }
        let modify = try #require(methods.first { $0["name"] == "store.modify" })
        #expect(modify["params"]?["properties"]?["savePolicy"]?["enum"] == ["ifServerRecordUnchanged", "changedKeys", "allKeys"])
        #expect(modify["errors"]?.arrayValue?.contains("pairing_unconfirmed") == true)
        let watch = try #require(methods.first { $0["name"] == "store.watch" })
        #expect(watch["kind"] == "stream" && watch["item"]?["properties"]?["seq"] != nil)
    }

    struct BadCall: Sendable, CustomTestStringConvertible {
        var method: String
        var params: JSONValue
        var code: ErrorCode
        var mentions: String
        var testDescription: String { "\(self.method) \(self.mentions)" }
    }

    static let badCalls: [BadCall] = [
        BadCall(method: "store.modify", params: ["family": 3, "zone": "default"], code: .invalidParams, mentions: "family"),
        BadCall(method: "store.modify", params: ["family": "fam", "zone": "default", "saves": "lots"], code: .invalidParams, mentions: "saves"),
        BadCall(method: "store.modify", params: ["family": "fam", "zone": "default", "savePolicy": "sometimes"], code: .invalidParams, mentions: "changedKeys"),
        BadCall(method: "store.modify", params: ["family": "fam", "zone": "default", "saves": [["recordType": "AppRule", "recordName": "r", "fields": [1, 2]]]],
                code: .invalidParams, mentions: "fields"),
        BadCall(method: "store.modify", params: ["family": "fam", "zone": "a/b"], code: .invalidParams, mentions: "params.zone"),
        BadCall(method: "store.modify", params: ["family": "", "zone": "default"], code: .invalidParams, mentions: "params.family"),
        BadCall(method: "store.modify", params: ["family": "nobody", "zone": "default", "saves": []], code: .notFound, mentions: "family nobody"),
        BadCall(method: "store.fetch", params: ["family": "fam", "zone": "nowhere", "recordNames": ["a"]], code: .notFound, mentions: "zone nowhere"),
        BadCall(method: "store.fetch", params: ["family": "fam", "zone": "default"], code: .invalidParams, mentions: "recordNames"),
        BadCall(method: "store.fetch", params: ["family": "fam", "zone": "default", "recordNames": .array((0...400).map { .string("r\($0)") })],
                code: .limitExceeded, mentions: "400"),
        BadCall(method: "store.zoneChanges", params: ["family": "fam", "zone": "default", "limit": 0], code: .invalidParams, mentions: "limit"),
        BadCall(method: "store.watch", params: ["after": -1, "follow": false], code: .invalidParams, mentions: "after"),
        BadCall(method: "store.watch", params: ["recordTypes": ["Nope"], "follow": false], code: .invalidParams, mentions: "Nope"),
        BadCall(method: "store.putCredential", params: ["family": "fam", "deviceId": "d", "role": "admin", "tokenSHA256": "abc"],
                code: .invalidParams, mentions: "64"),
        BadCall(method: "store.putCredential", params: ["family": "fam", "deviceId": "d", "role": "king", "tokenSHA256": "abc"],
                code: .invalidParams, mentions: "co_parent"),
        BadCall(method: "store.createFamily", params: ["family": "fam"], code: .conflict, mentions: "already exists"),
        BadCall(method: "store.deleteZone", params: ["family": "fam", "zone": "default"], code: .invalidParams, mentions: "default zone"),
        BadCall(method: "store.backup", params: ["path": "/proc/nope/backup.sqlite"], code: .invalidParams, mentions: "file name"),
        BadCall(method: "store.purge", params: ["olderThanSeconds": 1e300], code: .invalidParams, mentions: "olderThanSeconds"),
        BadCall(method: "store.query", params: ["family": "fam", "recordType": "AppRule",
                                                "filters": .array(Array(repeating: ["field": "bundleId", "op": "==", "value": "x"], count: 17))],
                code: .invalidParams, mentions: "at most 16 filters"),
    ]

    @Test("bad input gets a clear error and the store stays up", arguments: badCalls)
    func badInput(_ bad: BadCall) async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let client = store.client()
        _ = try await client.call(StoreMethods.createFamily, CreateFamilyParams(family: "fam"))
        let error = await expectError(bad.code) {
            if bad.method == "store.watch" {
                for try await _ in client.stream(bad.method, params: bad.params) {}
            } else {
                _ = try await client.call(bad.method, params: bad.params)
            }
        }
        #expect(error?.description.contains(bad.mentions) == true, "\(String(describing: error))")
        #expect(try await client.call("rpc.ping")["service"] == "store")
        #expect(store.process.isRunning)
    }

    @Test("options out of range are refused at start with a usage error", arguments: [
        ["--tombstone-grace", "99999999"], ["--tombstone-grace", "-1"], ["--purge-interval", "0"], ["--purge-interval", "1e300"],
    ])
    func badOptions(_ arguments: [String]) async throws {
        let directory = TemporaryDirectory()
        let result = try await runCommand(Binaries.path("screentime-stored"), ["--runtime-dir", directory.path, "--state-dir", directory.path] + arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(arguments[0]))
    }

    @Test("screentimectl drives the store: call, and describe")
    func cli() async throws {
        let store = try await StoreHarness.start()
        defer { store.stopNow() }
        let environment = ["SCREENTIME_RUNTIME_DIR": store.directory.path]
        let ctl = Binaries.path("screentimectl")
        let created = try await runCommand(ctl, ["call", "store", "store.createFamily", "{\"family\":\"fam-cli\"}"], environment: environment)
        #expect(created.status == 0 && created.stdout.contains("fam-cli"), "\(created.stderr)")
        let refused = try await runCommand(ctl, ["call", "store", "store.fetch", "{\"family\":\"fam-cli\",\"zone\":\"nowhere\",\"recordNames\":[]}"],
                                           environment: environment)
        #expect(refused.status != 0 && refused.stderr.contains("not_found"))
        let described = try await runCommand(ctl, ["describe", "store"], environment: environment)
        #expect(described.status == 0 && described.stdout.contains("store.zoneChanges"))
    }
}
