import Foundation
import GRDB
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

@Suite("Push service: fan-out, waking, bad input (in process; a stop with a listener, on the binary)", .serialized)
struct ServiceTests {
    @Test("a listener that stops reading is cut off; another listener of the same change is not held up")
    func slowListenerDoesNotDelayOthers() async throws {
        // 64: the slow one is cut off long before 200 (its 512 KiB of bytes even sooner),
        // and the fast one, in this busy test process, has room to be a little behind.
        try await PushStack.inProcess(configure: { $0.listenerBuffer = 64 }) { stack in
            // The slow one: asks to listen, then reads nothing.
            let slow = try RawConnection(path: stack.pushSocket)
            slow.sendJSON(["id": 1, "method": "push.listen", "params": [:], "auth": ["token": stack.family.parentCredential.token]])
            try await stack.waitForListeners(1)
            let fast = Listening(stack.parent)
            let payload = String(repeating: "x", count: 8000)
            for index in 0..<200 {
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": .int(Int64(index)), "pad": .string(payload)]))
            }
            // All 200 reach the fast one while the slow one has read none: a fan-out that waited
            // for the slow listener would stall once its buffer filled. (No
            // timing asserted: shared machines are noisy; the push benchmark measures latency.)
            let received = try await fast.wait(for: 200, timeout: .seconds(60))
            #expect(received.map(\.seq) == Array(1...200))
            // The slow one, reading at last, finds it was cut off, and why.
            var final: [String: Any]?
            for _ in 0..<400 {
                guard let reply = try slow.readReply() else { break }
                if reply["continues"] as? Bool != true { final = reply; break }
            }
            let error = final?["error"] as? [String: Any]
            #expect(error?["code"] as? String == "limit_exceeded")
            #expect((error?["message"] as? String)?.contains("listen again to resume") == true)
        }
    }

    @Test("notifications queued while a listener is still being sent its backlog follow the backlog, in order, none missing")
    func liveAfterASlowBacklog() async throws {
        try await PushStack.inProcess { stack in
            let payload = String(repeating: "x", count: 4000)
            // A backlog larger than the socket and the connection's buffer can hold...
            for index in 0..<200 {
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": .int(Int64(index)), "pad": .string(payload)]))
            }
            let listener = try RawConnection(path: stack.pushSocket)
            listener.sendJSON(["id": 1, "method": "push.listen", "params": [:], "auth": ["token": stack.family.parentCredential.token]])
            // ...so sending it stalls while the listener does not read, and these arrive meanwhile.
            try await stack.waitForListeners(1)
            for index in 200..<230 {
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": .int(Int64(index))]))
            }
            var seqs: [Int] = []
            while seqs.count < 230 {
                let reply = try #require(try listener.readReply(), "the stream ended after \(seqs.count) notifications")
                guard reply["continues"] as? Bool == true, let seq = reply.result?["seq"] as? Int else {
                    Issue.record("unexpected reply \(reply)")
                    break
                }
                seqs.append(seq)
            }
            #expect(seqs == Array(1...230))
            // And the stream goes on live.
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": 230]))
            #expect(try listener.readReply()?.result?["seq"] as? Int == 231)
        }
    }

    @Test("rpc.cancel ends a live listen with cancelled; the device listens again and gets what it had not acknowledged")
    func cancelAListen() async throws {
        try await PushStack.inProcess { stack in
            let connection = try RawConnection(path: stack.pushSocket)
            let auth = ["token": stack.family.parentCredential.token]
            connection.sendJSON(["id": 1, "method": "push.listen", "params": [:], "auth": auth])
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": 1]))
            #expect(try connection.readReply()?.result?["seq"] as? Int == 1)
            connection.sendJSON(["id": 2, "method": "rpc.cancel", "params": ["id": 1]])
            var replies: [Int: [String: Any]] = [:]
            while replies.count < 2, let reply = try connection.readReply() {
                if let id = reply["id"] as? Int { replies[id] = reply }
            }
            #expect(replies[2]?.result?["cancelled"] as? Bool == true)
            #expect(replies[1]?.errorCode == "cancelled")
            connection.sendJSON(["id": 3, "method": "push.listen", "params": [:], "auth": auth])
            #expect(try connection.readReply()?.result?["seq"] as? Int == 1, "not acknowledged: sent again")
        }
    }

    @Test("SIGTERM ends a live push.listen with unavailable (and the last number sent), as every stream of a stopping service ends")
    func stopEndsListenWithUnavailable() async throws {
        let stack = try await PushStack.start()
        defer { stack.stopNow() }
        let listener = try RawConnection(path: stack.pushSocket)
        listener.sendJSON(["id": "l", "method": "push.listen", "params": [:], "auth": ["token": stack.family.parentCredential.token]])
        _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "live")))
        let item = try #require(try listener.readReply())
        #expect(item["continues"] as? Bool == true && item.result?["seq"] as? Int == 1)
        stack.push.signal(SIGTERM)
        let end = try #require(try listener.readReply(), "no final reply")
        #expect(end["continues"] == nil)
        #expect(end.errorCode == "unavailable", "\(end)")
        #expect((end.errorData?["lastSeq"] as? NSNumber)?.intValue == 1)
        #expect(try listener.isClosedByPeer())
        #expect(try await stack.push.waitForExit() == 0)
    }

    @Test("kill -9 while a change's notification is held for the collapse window: after the restart it goes out, once")
    func heldNotificationSurvivesACrash() async throws {
        let stack = try await PushStack.start(pushArguments: ["--collapse-window", "10000"])
        defer { stack.stopNow() }
        let child = stack.client(token: stack.child.token)
        _ = try await child.call(PushMethods.subscribe, SubscribeParams(subscriptionId: "zone", kind: .zone, zone: stack.child.zone))
        try await stack.saveUsage("held")
        try await stack.waitUntilCaughtUp()
        let database = try DatabaseQueue(path: stack.harness.state + "/push.sqlite", configuration: {
            var configuration = Configuration()
            configuration.readonly = true
            return configuration
        }())
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM deferred") } == 1, "held, not queued yet")
        try await database.close()
        await stack.kill()
        try await stack.startPush()
        let listening = Listening(stack.client(token: stack.child.token), reconnecting: true)
        let heard = try await listening.wait(for: 1, timeout: .seconds(30))
        #expect(heard[0].reason == .zoneChanged && heard[0].recordName == "held")
        try await listening.expectQuiet(beyond: 1, for: .seconds(1))
    }

    @Test("half-closing a connection ends its push.listen with one final cancelled reply, then the service closes it")
    func halfCloseEndsListen() async throws {
        try await PushStack.inProcess { stack in
            let listener = try RawConnection(path: stack.pushSocket)
            listener.sendJSON(["id": "l", "method": "push.listen", "params": [:], "auth": ["token": stack.family.parentCredential.token]])
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, alert: Alert(title: "live")))
            #expect(try listener.readReply()?["continues"] as? Bool == true)
            listener.sendJSON(["id": 2, "method": "rpc.ping"])
            listener.shutdownWrite()
            var replies: [[String: Any]] = []
            while let reply = try listener.readReply() { replies.append(reply) }
            #expect(replies.contains { $0.idValue == AnyHashable(2) && $0.result != nil })
            let finals = replies.filter { $0["id"] as? String == "l" && $0["continues"] == nil }
            #expect(finals.count == 1)
            #expect(finals.first?.errorCode == "cancelled", "\(finals)")
        }
    }

    @Test("asleep (idle-exited) under socket activation, push is woken by the store and catches up")
    func wokenByTheStore() async throws {
        let harness = try await PairingHarness.start()
        defer { harness.stopNow() }
        let family = try await Bootstrapped.make(harness)
        let child = try await family.pairChild(harness)
        let socket = harness.directory.file("push.sock")
        let activator = try Activator(path: socket)
        let arguments = ["--runtime-dir", harness.directory.path, "--state-dir", harness.state, "--idle-exit", "1", "--log-level", "debug"]
        var pid = try activator.spawn(Binaries.path("screentime-pushd"), arguments, log: harness.directory.file("push-1.log"))
        let parent = RPCClient(configuration: ClientConfiguration(socketPath: socket, auth: Auth(token: family.parentCredential.token)))
        _ = try await parent.call(PushMethods.subscribe, SubscribeParams(kind: .query, recordType: "UsageRecord"))
        await parent.close()
        #expect(try await activator.waitForExit(pid, timeout: .seconds(15)) == 0, "idle, it exits")

        try await child.saveUsage("while-asleep", family: "smith")
        #expect(activator.hasPendingConnection(timeout: .seconds(5)), "the store connects to push.sock: systemd would start push")
        pid = try activator.spawn(Binaries.path("screentime-pushd"), arguments, log: harness.directory.file("push-2.log"))
        defer { kill(pid, SIGTERM) }
        let listener = RPCClient(configuration: ClientConfiguration(socketPath: socket, auth: Auth(token: family.parentCredential.token)))
        let listening = Listening(listener)
        let received = try await listening.wait(for: 1)
        #expect(received.first?.recordName == "while-asleep")
    }

    @Test("bad input gets a clear error and the service stays up", arguments: badCalls)
    func badInput(_ bad: BadCall) async throws {
        try await PushStack.inProcess { stack in
            let client = bad.asParent ? stack.parent : stack.local
            let error = await expectError(bad.code) { _ = try await client.call(bad.method, params: bad.params) }
            #expect(error?.message.contains(bad.message) == true, "\(error?.message ?? "")")
            _ = try await stack.local.call(Builtin.ping, Empty())
        }
    }

    static let badCalls: [BadCall] = [
        BadCall("push.subscribe", [:], .invalidParams, "kind", asParent: true),
        BadCall("push.subscribe", ["kind": "query"], .invalidParams, "is required for a query subscription", asParent: true),
        BadCall("push.subscribe", ["kind": "query", "recordType": "Nope"], .invalidParams, "unknown record type Nope", asParent: true),
        BadCall("push.subscribe", ["kind": "query", "recordType": "UsageRecord", "filters": [["field": "nope", "op": "==", "value": 1]]], .invalidParams, "UsageRecord has no field nope", asParent: true),
        BadCall("push.subscribe", ["kind": "query", "recordType": "UsageRecord", "firesOn": []], .invalidParams, "at least one of create, update, delete", asParent: true),
        BadCall("push.subscribe", ["kind": "query", "recordType": "UsageRecord", "filters": [["field": "sessionStart", "op": ">", "value": "yesterday"]]], .invalidParams, "must be an RFC 3339 date", asParent: true),
        BadCall("push.subscribe", ["kind": "zone"], .invalidParams, "is required for a zone subscription", asParent: true),
        BadCall("push.subscribe", ["kind": "zone", "zone": "ChildMonitoring-nobody"], .notFound, "has no zone ChildMonitoring-nobody", asParent: true),
        BadCall("push.subscribe", ["kind": "zone", "zone": "default", "subscriptionId": .string(String(repeating: "s", count: 256))], .invalidParams, "letters, digits", asParent: true),
        BadCall("push.subscribe", ["kind": "zone", "zone": "default", "recordType": "UsageRecord"], .invalidParams, "only query subscriptions take a record type", asParent: true),
        BadCall("push.subscribe", ["kind": "zone", "zone": "default", "subscriptionId": "has space"], .invalidParams, "letters, digits", asParent: true),
        BadCall("push.subscribe", ["kind": "family", "notification": ["ttlSeconds": 0]], .invalidParams, "between 1 second and 30 days", asParent: true),
        BadCall("push.subscribe", ["kind": "zone", "zone": "default"], .unauthorized, "acts for a device", asParent: false),
        BadCall("push.unsubscribe", ["subscriptionId": "missing"], .notFound, "no subscription missing", asParent: true),
        BadCall("push.ack", ["upTo": -1], .invalidParams, "must not be negative", asParent: true),
        BadCall("push.listSubscriptions", [:], .invalidParams, "is required for a local service", asParent: false),
        BadCall("push.notify", ["family": "smith"], .invalidParams, "exactly one of deviceId and parents", asParent: false),
        BadCall("push.notify", ["family": "nobody", "parents": true, "alert": ["title": "hi"]], .notFound, "nobody", asParent: false),
        BadCall("push.notify", ["family": "smith", "parents": true], .invalidParams, "needs an alert, data, or both", asParent: false),
        BadCall("push.notify", ["family": "smith", "parents": true, "alert": ["title": ""]], .invalidParams, "title of 1 to 200", asParent: false),
    ]
}

struct BadCall: Sendable, CustomTestStringConvertible {
    let method: String
    let params: JSONValue
    let code: ErrorCode
    let message: String
    let asParent: Bool

    init(_ method: String, _ params: JSONValue, _ code: ErrorCode, _ message: String, asParent: Bool) {
        self.method = method
        self.params = params
        self.code = code
        self.message = message
        self.asParent = asParent
    }

    var testDescription: String { "\(self.method) \(self.message)" }
}
