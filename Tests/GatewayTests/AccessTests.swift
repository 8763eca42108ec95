import AggregatorAPI
import Foundation
import Gateway
import PairingAPI
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// What a device may reach through the gateway: exactly what the services' declared lists
/// say, and nothing else.
@Suite("Gateway: access", .serialized, .timeLimit(.minutes(3)))
struct AccessTests {
    static let lists = [StoreMethods.list, PairingMethods.list, PushMethods.list, AggregatorMethods.list]

    @Test("the allowlist is the declared lists: every device method in, every local-only one out")
    func allowlistFollowsTheLists() async {
        let allowlist = Allowlist.standard
        for list in Self.lists {
            for method in list.methods {
                #expect((allowlist.method(named: method.name) != nil) == method.callers.includesDevices, "\(method.name)")
                #expect(allowlist.isDeclared(method.name))
            }
        }
        #expect(allowlist.method(named: "store.backup") == nil)
        #expect(allowlist.method(named: "pairing.enrollParent") != nil)
    }

    @Test("every local-only method is refused with a parent's token and with none; devices' methods need the right role")
    func localOnlyRefused() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let child = try await family.pairChild(stack.harness)
            let localOnly = Self.lists.flatMap(\.methods).filter { !$0.callers.includesDevices }.map(\.name)
            #expect(localOnly.contains("store.backup") && localOnly.contains("push.notify") && localOnly.contains("pairing.createFamily"))
            for method in localOnly {
                let withParent = try await stack.rpc(method, [:], token: family.parentCredential.token)
                #expect(withParent.status == 403 && withParent.errorCode == "forbidden", "\(method) with a parent's token: \(withParent.status) \(withParent.body)")
                let withNone = try await stack.rpc(method)
                #expect(withNone.status == 403 && withNone.errorCode == "forbidden", "\(method) with no token: \(withNone.status) \(withNone.body)")
            }
            // A device method with no credential: 401; a parent's method with a child's: 403.
            let anonymous = try await stack.rpc("store.whoami")
            #expect(anonymous.status == 401 && anonymous.errorCode == "unauthorized")
            let asChild = try await stack.rpc("pairing.createInvitation", ["childId": "max"], token: child.token)
            #expect(asChild.status == 403 && asChild.errorCode == "forbidden")
            // A token that is no credential: 401.
            let forged = try await stack.rpc("store.whoami", token: "not-a-token")
            #expect(forged.status == 401 && forged.errorCode == "unauthorized")
            // An unknown method: 404; a stream on HTTP: refused, pointing at the WebSocket.
            let unknown = try await stack.rpc("store.nothing", token: family.parentCredential.token)
            #expect(unknown.status == 404 && unknown.errorCode == "method_not_found")
            let stream = try await stack.rpc("push.listen", token: family.parentCredential.token)
            #expect(stream.status == 400 && stream.body.contains("/v1/ws"))
            // The device's own rights still hold in the service: it is the device that calls.
            let whoami = try await stack.result("store.whoami", token: child.token)
            #expect(whoami["deviceId"]?.stringValue == child.deviceId)

            // /v1/info lists exactly the device methods; /healthz sees every service.
            let info = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
            let names = Set(info.json?["methods"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
            #expect(names == Set(Allowlist.standard.all.map(\.name) + ["gateway.authenticate"]))
            let health = try await curl(stack.url + "/healthz", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
            #expect(health.status == 200 && health.json?["status"] == "ok", "\(health.body)")
            // A service down: 503, and which one.
            try await stack.stopAggregator()
            let degraded = try await curl(stack.url + "/healthz", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
            #expect(degraded.status == 503 && degraded.json?["services"]?["aggregator"] == "unavailable" && degraded.json?["services"]?["store"] == "ok",
                    "\(degraded.body)")
        }
    }

    @Test("a device's unary calls are relayed on its socket's event loop once the service's connection is open, and answered as the general path answers them")
    func relayedOnTheEventLoop() async throws {
        // The credential stays fresh in the cache for the whole test: a stale one sends a
        // call the general way (to ask the store again), which is right, but not what this checks.
        try await GatewayStack.inProcess(configure: { $0.credentialRecheck = .seconds(300) }) { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let socket = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            /// The `path` of each WebSocket request logged for `store.whoami`, in order.
            func paths() -> [String] {
                stack.gateway.log.split(separator: "\n").filter { $0.contains(" request ") && $0.contains("method=store.whoami") }
                    .compactMap { line in line.split(separator: " ").first { $0.hasPrefix("path=") }.map { String($0.dropFirst(5)) } }
            }

            // The first call opens the loop's connection to the store: the general path.
            socket.request(1, "store.whoami")
            #expect(try await socket.reply(to: 1)["result"]?["deviceId"] == "mum-phone")
            try await waitUntil("the first call logged", timeout: .seconds(10), detail: String(stack.gateway.log.suffix(2000))) { paths().count == 1 }
            #expect(paths() == ["task"])

            // From then on, pipelined calls are relayed on the event loop, each answered under its
            // own id: waves of 20, 80 in all, more than the in-flight limit (32), so a call whose
            // place in flight was not given back would show as limit_exceeded or the general path.
            var answered: Set<Int> = []
            for wave in 0..<4 {
                let ids = (2 + wave * 20)..<(22 + wave * 20)
                for id in ids { socket.request(id, "store.whoami") }
                for _ in ids {
                    let reply = try await socket.next()
                    #expect(reply["result"]?["deviceId"] == "mum-phone", "\(reply)")
                    if let id = reply["id"]?.intValue { answered.insert(Int(id)) }
                }
            }
            #expect(answered == Set(2..<82))
            try await waitUntil("eighty calls logged", timeout: .seconds(10), detail: String(stack.gateway.log.suffix(2000))) { paths().count == 81 }
            #expect(paths().dropFirst().allSatisfy { $0 == "event-loop" }, "\(paths())")

            // What the event loop does not take is answered as before, on the same socket.
            socket.send(#"{"id":30,"method":"store.whoami","auth":{"token":"x"}}"#)
            #expect(try await socket.reply(to: 30)["error"]?["code"] == "invalid_request")
            socket.request(31, "store.createFamily", ["family": "other"])
            #expect(try await socket.reply(to: 31)["error"]?["code"] == "forbidden")
            socket.request(32, "store.nothing")
            #expect(try await socket.reply(to: 32)["error"]?["code"] == "method_not_found")
            // The service's own error comes back through the event loop's relay.
            socket.request(33, "store.fetch", ["family": .string(family.family)])
            #expect(try await socket.reply(to: 33)["error"]?["code"] == "invalid_params")
            socket.request(34, "rpc.ping")
            #expect(try await socket.reply(to: 34)["result"]?["service"] == "gateway")
            socket.send("[1, 2")
            #expect(try await socket.next()["error"]?["code"] == "invalid_json")
            await socket.close()
        }
    }

    @Test("a revoked device is cut off on its open WebSocket as the store commits the revocation, with no recheck period to wait for")
    func revokedDeviceCutOff() async throws {
        // An hour: only the store's change feed can tell the gateway in time.
        try await GatewayStack.inProcess(configure: { $0.credentialRecheck = .seconds(3600) }) { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let child = try await family.pairChild(stack.harness)
            let socket = try await DeviceWebSocket(stack: stack, token: child.token)
            socket.request(1, "store.whoami")
            #expect(try await socket.reply(to: 1)["result"]?["deviceId"]?.stringValue == child.deviceId)
            socket.request(2, "push.listen")
            _ = try await family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: child.deviceId))
            // Told why, then closed with a policy violation, with no request of its own.
            let told = try await socket.next()
            #expect(told["error"]?["code"] == "device_revoked" || told["error"]?["code"] == "cancelled", "\(told)")
            #expect(try await socket.waitForClose() == 1008)
            // And the same token is refused from then on, saying the device was removed.
            let again = try await stack.rpc("store.whoami", token: child.token)
            #expect(again.status == 401 && again.errorCode == "device_revoked", "\(again.body)")
            // A WebSocket opened with it: told in answer to its first message, then closed.
            let reopened = try await DeviceWebSocket(stack: stack, token: child.token)
            reopened.request(9, "store.whoami")
            let refused = try await reopened.next()
            #expect(refused["id"] == 9 && refused["error"]?["code"] == "device_revoked", "\(refused)")
            #expect(try await reopened.waitForClose() == 1008)
        }
    }

    @Test("a device whose token was replaced is cut off on a WebSocket opened with the old one; another device of the family stays")
    func replacedTokenCutOff() async throws {
        try await GatewayStack.inProcess(configure: { $0.credentialRecheck = .seconds(3600) }) { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let child = try await family.pairChild(stack.harness)
            let parent = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            let old = try await DeviceWebSocket(stack: stack, token: child.token)
            for socket in [parent, old] { socket.request(1, "store.whoami") }
            #expect(try await old.reply(to: 1)["result"]?["deviceId"]?.stringValue == child.deviceId)
            #expect(try await parent.reply(to: 1)["result"]?["deviceId"] == "mum-phone")

            // The child's token is replaced (re-paired, say): same device, same status, new token.
            let store = RPCClient(socketPath: stack.harness.socketPath(for: "store"))
            defer { Task { await store.close() } }
            _ = try await store.call(StoreMethods.putCredential, PutCredentialParams(
                family: family.family, deviceId: child.deviceId, role: .child, tokenSHA256: SHA256Hex.of("a-new-token-for-the-child"), status: .active))
            let told = try await old.next()
            #expect(told["error"]?["code"] == "unauthorized", "\(told)")
            #expect(try await old.waitForClose() == 1008)
            // The parent's socket, in the same family, was checked and goes on.
            parent.request(2, "store.whoami")
            #expect(try await parent.reply(to: 2)["result"]?["deviceId"] == "mum-phone")
            await parent.close()
        }
    }

    @Test("devices' streams share connections to push; one ending, by rpc.cancel or its socket closing, leaves the others on them going")
    func streamsShareConnections() async throws {
        try await GatewayStack.inProcess(configure: { $0.streamsPerConnection = 2 }) { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let push = RPCClient(socketPath: stack.harness.socketPath(for: "push"))
            defer { Task { await push.close() } }
            // Three sockets of the parent's device, each listening: two connections to push.
            var sockets: [DeviceWebSocket] = []
            for _ in 0..<3 { sockets.append(try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)) }
            for socket in sockets { socket.request(1, "push.listen") }
            try await waitUntil("three listeners registered with push", timeout: .seconds(20), detail: String(stack.gateway.log.suffix(3000))) {
                stack.gateway.log.split(separator: "\n").filter { $0.contains("stream opened") }.count == 3
            }
            func notifyAll(_ title: String) async throws {
                _ = try await push.call(PushMethods.notify, NotifyParams(family: family.family, parents: true, alert: Alert(title: title)))
            }
            func heard(_ socket: DeviceWebSocket, _ title: String) async throws {
                let item = try await socket.reply(to: 1)
                #expect(item["continues"] == true && item["result"]?["alert"]?["title"]?.stringValue == title, "expected \(title): \(item)")
            }
            try await notifyAll("first")
            for socket in sockets { try await heard(socket, "first") }

            // The first ends its stream: told `cancelled`; the one sharing its connection goes on.
            sockets[0].request(2, "rpc.cancel", ["id": 1])
            let answers = [try await sockets[0].next(), try await sockets[0].next()]
            #expect(answers.contains { $0["id"] == 2 && $0["result"]?["cancelled"] == true }, "\(answers)")
            #expect(answers.contains { $0["id"] == 1 && $0["error"]?["code"] == "cancelled" }, "\(answers)")
            try await notifyAll("second")
            for socket in sockets[1...] { try await heard(socket, "second") }

            // The second closes its socket; the third still hears, and a new listener joins.
            await sockets[1].close()
            let late = try await DeviceWebSocket(stack: stack, token: family.parentCredential.token)
            late.request(1, "push.listen")
            try await waitUntil("the new listener registered", timeout: .seconds(20), detail: String(stack.gateway.log.suffix(3000))) {
                stack.gateway.log.split(separator: "\n").filter { $0.contains("stream opened") }.count == 4
            }
            try await notifyAll("third")
            try await heard(sockets[2], "third")
            // A new listener starts with what the device has not acknowledged yet.
            for title in ["first", "second", "third"] { try await heard(late, title) }
            // The first socket, its stream ended, heard none of it.
            sockets[0].request(3, "rpc.ping")
            #expect(try await sockets[0].next()["id"] == 3)
            await sockets[0].close()
            await sockets[2].close()
            await late.close()
        }
    }

    @Test("a browser authenticates with a first gateway.authenticate message, or the session cookie")
    func browserAuthentication() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let socket = try await DeviceWebSocket(stack: stack)
            socket.request(1, "store.whoami")
            #expect(try await socket.reply(to: 1)["error"]?["code"] == "unauthorized")
            socket.request(2, "gateway.authenticate", ["token": .string(family.parentCredential.token)])
            #expect(try await socket.reply(to: 2)["result"]?["role"] == "parent")
            socket.request(3, "store.whoami")
            #expect(try await socket.reply(to: 3)["result"]?["deviceId"]?.stringValue == "mum-phone")
            await socket.close()
            // Sent together, without waiting: what follows gateway.authenticate is served as
            // its device, in order, the ping and the describe included.
            let eager = try await DeviceWebSocket(stack: stack)
            eager.request(1, "gateway.authenticate", ["token": .string(family.parentCredential.token)])
            eager.request(2, "store.whoami")
            eager.request(3, "rpc.ping")
            eager.request(4, "store.whoami")
            var replies: [Int64: JSONValue] = [:]
            for _ in 1...4 {
                let reply = try await eager.next()
                if let id = reply["id"]?.intValue { replies[id] = reply }
            }
            #expect(replies[1]?["result"]?["role"] == "parent", "\(replies)")
            #expect(replies[2]?["result"]?["deviceId"]?.stringValue == "mum-phone", "\(replies)")
            #expect(replies[3]?["result"]?["service"] == "gateway", "\(replies)")
            #expect(replies[4]?["result"]?["deviceId"]?.stringValue == "mum-phone", "\(replies)")
            await eager.close()
            let cookie = try await DeviceWebSocket(stack: stack, headers: [("Cookie", "theme=dark; screentime_session=\(family.parentCredential.token)")])
            cookie.request(1, "store.whoami")
            #expect(try await cookie.reply(to: 1)["result"]?["deviceId"]?.stringValue == "mum-phone")
            await cookie.close()
        }
    }
}

extension JSONValue {
    var arrayValue: [JSONValue]? { if case .array(let values) = self { return values } else { return nil } }
}
