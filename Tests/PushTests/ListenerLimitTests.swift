import Foundation
import PushAPI
import RPCClient
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// Once, one connection holding stalled `push.listen` streams took hundreds of
/// megabytes of push's memory. What a stream buffers is bounded in bytes, and streams per
/// device and per connection are limited (defaults: 512 KiB, 4, 64), and so are the bytes
/// all the streams of one connection hold together (4 MiB).
@Suite("Push: what listeners may hold, in bytes and in streams", .serialized)
struct ListenerLimitTests {
    @Test("a listener that reads nothing is cut off once 512 KiB wait for it in the service, long before 1,024 notifications, with an error that says so")
    func cutOffByBytes() async throws {
        try await PushStack.inProcess { stack in
            let stalled = try RawConnection(path: stack.pushSocket)
            stalled.sendJSON(["id": 1, "method": "push.listen", "params": [:], "auth": ["token": stack.family.parentCredential.token]])
            // 400 notifications of 4 kB: 1.6 MB, more than the socket holds plus 512 KiB.
            let payload = String(repeating: "x", count: 4000)
            for index in 0..<400 {
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": .int(Int64(index)), "pad": .string(payload)]))
            }
            var items = 0
            var final: [String: Any]?
            while final == nil {
                guard let reply = try stalled.readReply() else { break }
                if reply["continues"] as? Bool == true { items += 1 } else { final = reply }
            }
            let error = final?["error"] as? [String: Any]
            #expect(error?["code"] as? String == "limit_exceeded", "after \(items) notifications: \(String(describing: final))")
            #expect((error?["message"] as? String)?.contains("bytes") == true, "\(String(describing: error))")
            #expect(items < 400)
            // The device listens again and gets everything it had not acknowledged.
            let again = Listening(stack.parent)
            #expect(try await again.wait(for: 400, timeout: .seconds(30)).map(\.seq) == Array(1...400))
        }
    }

    @Test("the listeners of one connection share its byte budget: two that read nothing are cut off once it is full, though each alone is far from its own bound")
    func cutOffByConnectionBytes() async throws {
        try await PushStack.inProcess(configure: { configuration in
            configuration.listenerBuffer = 100_000
            configuration.listenerBufferBytes = 64 << 20
            configuration.connectionBufferBytes = 256 * 1024
        }) { stack in
            let stalled = try RawConnection(path: stack.pushSocket)
            stalled.sendJSON(["id": 1, "method": "push.listen", "params": [:], "auth": ["token": stack.family.parentCredential.token]])
            stalled.sendJSON(["id": 2, "method": "push.listen", "params": [:], "auth": ["token": stack.child.token]])
            // 400 notifications of 4 kB to each: 1.6 MB a listener, far under 64 MiB, but
            // 3.2 MB together, more than the socket holds plus 256 KiB.
            let payload = String(repeating: "x", count: 4000)
            for index in 0..<400 {
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", parents: true, data: ["n": .int(Int64(index)), "pad": .string(payload)]))
                _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: stack.child.deviceId, data: ["n": .int(Int64(index)), "pad": .string(payload)]))
            }
            var items: [Int: Int] = [:]
            var finals: [Int: [String: Any]] = [:]
            while finals.count < 2 {
                guard let reply = try stalled.readReply(), let id = reply["id"] as? Int else { break }
                if reply["continues"] as? Bool == true { items[id, default: 0] += 1 } else { finals[id] = reply }
            }
            for id in [1, 2] {
                let error = finals[id]?["error"] as? [String: Any]
                #expect(error?["code"] as? String == "limit_exceeded", "listener \(id) after \(items[id] ?? 0) notifications: \(String(describing: finals[id]))")
                #expect((error?["message"] as? String)?.contains("--connection-buffer-bytes") == true, "\(String(describing: error))")
                #expect(items[id, default: 0] < 400)
            }
            // Both listen again, on a connection that reads, and get everything.
            let parent = Listening(stack.parent)
            let child = Listening(stack.client(token: stack.child.token))
            #expect(try await parent.wait(for: 400, timeout: .seconds(30)).map(\.seq) == Array(1...400))
            #expect(try await child.wait(for: 400, timeout: .seconds(30)).count == 400)
        }
    }

    @Test("a connection carries at most its --max-listeners-per-connection (here 8) and a device holds at most 4: one more is refused with limit_exceeded, the rest go on")
    func streamLimits() async throws {
        try await PushStack.inProcess(configure: { $0.maximumListenersPerConnection = 8 }) { stack in
            let leo = try await stack.family.pairChild(stack.harness, child: "leo", device: "leo-ipad")
            let parentToken = stack.family.parentCredential.token
            let connection = try RawConnection(path: stack.pushSocket)
            // Four listeners of the parent's phone and four of Emma's tablet, on one connection.
            for id in 1...8 {
                connection.sendJSON(["id": id, "method": "push.listen", "params": [:], "auth": ["token": id <= 4 ? parentToken : stack.child.token]])
            }
            // Each listener is live once it gets a notification for its device.
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: stack.family.parentCredential.deviceId, data: ["n": 1]))
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: stack.child.deviceId, data: ["n": 2]))
            var live = Set<Int>()
            for _ in 0..<8 {
                let reply = try #require(try connection.readReply())
                #expect(reply["continues"] as? Bool == true, "\(reply)")
                if let id = reply["id"] as? Int { live.insert(id) }
            }
            #expect(live == Set(1...8))

            // A ninth, of a third device: over the connection's limit.
            connection.sendJSON(["id": 9, "method": "push.listen", "params": [:], "auth": ["token": leo.token]])
            let ninth = try #require(try connection.readReply())
            #expect(ninth["id"] as? Int == 9)
            let connectionError = ninth["error"] as? [String: Any]
            #expect(connectionError?["code"] as? String == "limit_exceeded" && (connectionError?["message"] as? String)?.contains("connection") == true, "\(ninth)")

            // A fifth of the parent's phone, on another connection: over the device's limit.
            let other = try RawConnection(path: stack.pushSocket)
            other.sendJSON(["id": 1, "method": "push.listen", "params": [:], "auth": ["token": parentToken]])
            let fifth = try #require(try other.readReply())
            let deviceError = fifth["error"] as? [String: Any]
            #expect(deviceError?["code"] as? String == "limit_exceeded" && (deviceError?["message"] as? String)?.contains("device") == true, "\(fifth)")
            // Leo's own listener on that connection is fine.
            other.sendJSON(["id": 2, "method": "push.listen", "params": [:], "auth": ["token": leo.token]])
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: leo.deviceId, data: ["n": 3]))
            let leoReply = try #require(try other.readReply())
            #expect(leoReply["id"] as? Int == 2 && leoReply["continues"] as? Bool == true, "\(leoReply)")

            // Once the first connection goes, its listeners count no more: the parent listens again.
            connection.close()
            let back = Listening(stack.parent, reconnecting: true)
            _ = try await stack.local.call(PushMethods.notify, NotifyParams(family: "smith", deviceId: stack.family.parentCredential.deviceId, data: ["n": 4]))
            try await back.wait(for: 2)
        }
    }
}

/// The push service's own options out of range: a usage error (exit 64) that names the
/// option, before anything starts.
@Suite("Push: listener limits out of range")
struct ListenerLimitOptionTests {
    @Test("each listener limit out of range is refused at start with a usage error that names it", arguments: [
        ["--connection-buffer-bytes", "1024"], ["--listener-buffer-bytes", "0"], ["--listener-buffer", "1"],
        ["--max-listeners-per-connection", "0"], ["--max-listeners-per-device", "0"], ["--collapse-window", "10001"],
    ])
    func outOfRange(_ arguments: [String]) async throws {
        let directory = TemporaryDirectory()
        let result = try await runCommand(Binaries.path("screentime-pushd"),
                                          ["--runtime-dir", directory.path, "--state-dir", directory.path] + arguments)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("\(arguments[0]) must be between"), "\(result.stderr)")
    }
}
