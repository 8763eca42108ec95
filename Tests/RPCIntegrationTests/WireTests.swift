import TestSupport
import Foundation
import Glibc
import RPCClient
import RPCCore
import Testing

@Suite("The wire, against the real process")
struct WireTests {
    @Test("pipelined requests on one connection are answered as they finish, matched by id")
    func pipelinedOutOfOrder() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": "slow", "method": "test.sleep", "params": {"milliseconds": 400}}"#)
        connection.sendFrame(#"{"id": 2, "method": "test.sleep", "params": {"milliseconds": 1}}"#)
        connection.sendFrame(#"{"id": 3, "method": "test.echo", "params": {"message": "hi"}}"#)
        var order: [AnyHashable] = []
        for _ in 0..<3 { order.append(try #require(try connection.readReply()).idValue!) }
        #expect(order.last == AnyHashable("slow"))
        #expect(Set(order) == Set([AnyHashable("slow"), AnyHashable(2), AnyHashable(3)]))
    }

    @Test("a stream delivers many replies with continues: true, then one final reply")
    func streamManyReplies() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": 9, "method": "test.count", "params": {"count": 2000}}"#)
        for index in 0..<2000 {
            let reply = try #require(try connection.readReply())
            #expect(reply["continues"] as? Bool == true)
            #expect(reply.result?["index"] as? Int == index)
        }
        let end = try #require(try connection.readReply())
        #expect(end["continues"] == nil)
        #expect(end.result?["sent"] as? Int == 2000)
    }

    @Test("rpc.cancel ends a stream with a cancelled reply; the connection goes on")
    func cancelAStream() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": "feed", "method": "test.count", "params": {"count": 1000000, "intervalMilliseconds": 20}}"#)
        _ = try #require(try connection.readReply())
        connection.sendFrame(#"{"id": "c", "method": "rpc.cancel", "params": {"id": "feed"}}"#)
        var cancelReply: [String: Any]?
        var feedEnd: [String: Any]?
        while cancelReply == nil || feedEnd == nil {
            let reply = try #require(try connection.readReply())
            if reply["id"] as? String == "c" { cancelReply = reply }
            if reply["id"] as? String == "feed", reply["continues"] == nil { feedEnd = reply }
        }
        #expect(cancelReply?.result?["cancelled"] as? Bool == true)
        #expect(feedEnd?.errorCode == "cancelled")

        connection.sendFrame(#"{"id": "again", "method": "rpc.cancel", "params": {"id": "feed"}}"#)
        #expect(try connection.readReply()?.result?["cancelled"] as? Bool == false)
        connection.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        #expect(try connection.readReply()?.result?["service"] as? String == "test")
    }

    @Test("a one-way request (no id) runs and gets no reply, not even an error")
    func oneWay() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"method": "test.log", "params": {"message": "one-way arrived"}}"#)
        connection.sendFrame(#"{"method": "no.such.method"}"#)
        connection.sendFrame(#"{"method": "test.echo", "params": {"message": 5}}"#)
        connection.sendFrame(#"{"method": "test.crash"}"#)
        connection.sendFrame(#"{"id": 1, "method": "test.sleep", "params": {"milliseconds": 100}}"#)
        let reply = try #require(try connection.readReply())
        #expect(reply.idValue == AnyHashable(1))
        #expect(service.log.contains("one-way arrived"))
    }

    // MARK: Bad input

    struct BadRequest: Sendable, CustomStringConvertible {
        var description: String
        var payload: [UInt8]
        var code: String
        var nullID = true
        var message: String? = nil
    }

    static let badRequests: [BadRequest] = [
        .init(description: "an empty frame", payload: [], code: "invalid_frame"),
        .init(description: "invalid UTF-8", payload: [0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d], code: "invalid_json", message: "not valid UTF-8"),
        .init(description: "not JSON", payload: Array("{id: 1".utf8), code: "invalid_json"),
        .init(description: "a JSON array", payload: Array("[1, 2]".utf8), code: "invalid_request"),
        .init(description: "a JSON string", payload: Array(#""ping""#.utf8), code: "invalid_request"),
        .init(description: "no method", payload: Array(#"{"id": 1}"#.utf8), code: "invalid_request", nullID: false, message: "\"method\" is required"),
        .init(description: "a numeric method", payload: Array(#"{"id": 1, "method": 5}"#.utf8), code: "invalid_request", nullID: false, message: "\"method\" must be a string"),
        .init(description: "an id that is an object", payload: Array(#"{"id": {}, "method": "rpc.ping"}"#.utf8), code: "invalid_request"),
        .init(description: "an id that is null", payload: Array(#"{"id": null, "method": "rpc.ping"}"#.utf8), code: "invalid_request"),
        .init(description: "params that are an array", payload: Array(#"{"id": 1, "method": "rpc.ping", "params": [1]}"#.utf8), code: "invalid_request", nullID: false, message: "\"params\" must be a JSON object"),
        .init(description: "auth without a token", payload: Array(#"{"id": 1, "method": "rpc.ping", "auth": {"tok": 1}}"#.utf8), code: "invalid_request", nullID: false),
        .init(description: "an unknown method", payload: Array(#"{"id": 1, "method": "store.nothing"}"#.utf8), code: "method_not_found", nullID: false),
        .init(description: "a missing parameter", payload: Array(#"{"id": 1, "method": "test.echo", "params": {}}"#.utf8), code: "invalid_params", nullID: false, message: "params.message is required"),
        .init(description: "a mistyped parameter", payload: Array(#"{"id": 1, "method": "test.echo", "params": {"message": 5}}"#.utf8), code: "invalid_params", nullID: false, message: "params.message must be a string"),
        .init(description: "a mistyped nested parameter", payload: Array(#"{"id": 1, "method": "test.taste", "params": {"flavour": "sweet", "tags": ["a", 2]}}"#.utf8), code: "invalid_params", nullID: false, message: "params.tags[1] must be a string"),
        .init(description: "a value outside an enum", payload: Array(#"{"id": 1, "method": "test.taste", "params": {"flavour": "bitter"}}"#.utf8), code: "invalid_params", nullID: false, message: "params.flavour must be one of \"sweet\", \"sour\", not \"bitter\""),
        .init(description: "null for a required parameter", payload: Array(#"{"id": 1, "method": "test.echo", "params": {"message": null}}"#.utf8), code: "invalid_params", nullID: false),
        .init(description: "an id past 64 bits", payload: Array(#"{"id": 1e30, "method": "rpc.ping"}"#.utf8), code: "invalid_request"),
        .init(description: "arrays nested past 512 levels", payload: Array((#"{"id": 1, "method": "test.echo", "params": {"message": "# + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}}").utf8), code: "invalid_json", message: "nested deeper than 512 levels"),
        // The request object is level 1 and params level 2: 510 arrays inside reach 512.
        .init(description: "arrays and objects nested exactly 512 levels", payload: Array((#"{"id": 1, "method": "test.echo", "params": {"message": "# + String(repeating: "[", count: 510) + String(repeating: "]", count: 510) + "}}").utf8), code: "invalid_params", nullID: false, message: "params.message must be a string"),
        .init(description: "arrays and objects nested 513 levels", payload: Array((#"{"id": 1, "method": "test.echo", "params": {"message": "# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}}").utf8), code: "invalid_json", message: "nested deeper than 512 levels"),
        .init(description: "not a request, without an id", payload: Array(#"{"method": 5}"#.utf8), code: "invalid_request", message: "\"method\" must be a string"),
        .init(description: "params that are not an object, without an id", payload: Array(#"{"method": "rpc.ping", "params": 3}"#.utf8), code: "invalid_request"),
        .init(description: "a number past a double's range", payload: Array(#"{"id": 1, "method": "rpc.ping", "params": {"x": 1e400}}"#.utf8), code: "invalid_json"),
        .init(description: "a number with a plus sign", payload: Array(#"{"id": +1, "method": "rpc.ping"}"#.utf8), code: "invalid_json"),
        .init(description: "a string with a raw control character", payload: Array("{\"id\": 1, \"method\": \"rpc.\u{1}ping\"}".utf8), code: "invalid_json"),
        .init(description: "rpc.cancel without an id", payload: Array(#"{"id": 1, "method": "rpc.cancel", "params": {}}"#.utf8), code: "invalid_params", nullID: false, message: "params.id is required"),
        .init(description: "rpc.cancel with a boolean id", payload: Array(#"{"id": 1, "method": "rpc.cancel", "params": {"id": true}}"#.utf8), code: "invalid_params", nullID: false, message: "params.id must be an integer or a string"),
        .init(description: "rpc.cancel with an object id", payload: Array(#"{"id": 1, "method": "rpc.cancel", "params": {"id": {}}}"#.utf8), code: "invalid_params", nullID: false, message: "params.id must be an integer or a string"),
        .init(description: "unknown keys inside params", payload: Array(#"{"id": 1, "method": "test.echo", "params": {"message": "hi", "colour": "red"}}"#.utf8), code: "", nullID: false),
        .init(description: "rpc.describe of an unknown method", payload: Array(#"{"id": 1, "method": "rpc.describe", "params": {"method": "test.nope"}}"#.utf8), code: "not_found", nullID: false),
        .init(description: "a handler's unexpected error", payload: Array(#"{"id": 1, "method": "test.crash"}"#.utf8), code: "internal", nullID: false),
    ]

    @Test("each kind of bad request gets its error code (or, with an empty code, is served) and the connection keeps serving", arguments: badRequests)
    func badRequest(_ bad: BadRequest) async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(bad.payload)
        let reply = try #require(try connection.readReply())
        #expect(reply.errorCode == (bad.code.isEmpty ? nil : bad.code), "\(reply)")
        #expect(reply.isNullID == bad.nullID)
        if let message = bad.message { #expect(reply.errorMessage?.contains(message) == true, "\(reply)") }
        if bad.code == "invalid_params" { #expect(reply.errorData?["parameter"] is String) }
        connection.sendFrame(#"{"id": "after", "method": "rpc.ping"}"#)
        #expect(try connection.readReply()?.result?["service"] as? String == "test")
    }

    @Test("an oversized length prefix gets frame_too_large and the connection is closed; the service stays up")
    func oversizedFrame() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--max-frame-size", "1024"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendRaw([0xff, 0xff, 0xff, 0xff])
        let reply = try #require(try connection.readReply())
        #expect(reply.errorCode == "frame_too_large")
        #expect(reply.errorData?["maximumFrameSize"] as? Int == 1024)
        #expect(try connection.isClosedByPeer())
        _ = try await RPCClient(socketPath: service.socketPath).call(Builtin.ping, Empty())
    }

    @Test("a frame of exactly the maximum size is accepted; one byte more is refused")
    func frameSizeBoundary() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--max-frame-size", "1024"])
        defer { service.stopNow() }
        func request(size: Int) -> [UInt8] {
            let head = #"{"id": 1, "method": "test.echo", "params": {"message": ""#
            let tail = #""}}"#
            return Array((head + String(repeating: "x", count: size - head.utf8.count - tail.utf8.count) + tail).utf8)
        }
        let exact = try RawConnection(path: service.socketPath)
        exact.sendFrame(request(size: 1024))
        #expect(try exact.readReply()?.result?["message"] != nil)
        let over = try RawConnection(path: service.socketPath)
        over.sendFrame(request(size: 1025))
        #expect(try over.readReply()?.errorCode == "frame_too_large")
    }

    @Test("half-closing ends streams with one final cancelled reply, lets unary requests finish and reply; then the service closes")
    func halfClose() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": "feed", "method": "test.count", "params": {"count": 1000000, "intervalMilliseconds": 50}}"#)
        #expect(try connection.readReply()?.result?["index"] as? Int == 0)
        connection.sendFrame(#"{"id": "slow", "method": "test.sleep", "params": {"milliseconds": 300}}"#)
        connection.sendFrame(#"{"id": "echo", "method": "test.echo", "params": {"message": "hi"}}"#)
        // Read before the half-close: started only after it, it ends at once, the same way.
        connection.sendFrame(#"{"id": "late", "method": "test.count", "params": {"count": 1000000, "intervalMilliseconds": 50}}"#)
        connection.shutdownWrite()
        // A stream that went on would keep the connection open (an item every 50 ms, for
        // a million items): the service closing it is the proof the stream ended.
        var unary: [String: [String: Any]] = [:]
        var finals: [String: [[String: Any]]] = [:]
        var afterFinal: [String] = []
        let deadline = ContinuousClock.now + .seconds(30)
        var closed = false
        while ContinuousClock.now < deadline {
            guard let reply = try connection.readReply() else { closed = true; break }
            guard let id = reply["id"] as? String else { continue }
            if id == "feed" || id == "late" {
                if finals[id] != nil { afterFinal.append(id) }
                if reply["continues"] as? Bool != true { finals[id, default: []].append(reply) }
            } else {
                unary[id] = reply
            }
        }
        #expect(closed, "the stream went on after the half-close")
        #expect(unary["echo"]?.result?["message"] as? String == "hi")
        #expect(unary["slow"]?.result?["milliseconds"] as? Int == 300)
        for id in ["feed", "late"] {
            #expect(finals[id]?.count == 1, "\(id): \(finals[id] ?? [])")
            #expect(finals[id]?.first?.errorCode == "cancelled")
        }
        #expect(afterFinal.isEmpty, "replies after a stream's final one: \(afterFinal)")
        _ = try await RPCClient(socketPath: service.socketPath).call(Builtin.ping, Empty())
    }

    @Test("a reply larger than the socket holds, to a request sent just before a half-close, arrives whole before the service closes")
    func halfCloseFlushesReplies() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        // An error reply of 600 kB: more than the socket holds, so most of it waits in the
        // service; and a request's final error is written without waiting for room, so the
        // request is over while its reply is still being written.
        connection.sendFrame(#"{"id": "big", "method": "test.fail", "params": {"code": "conflict", "message": "too big", "padding": 600000}}"#)
        connection.shutdownWrite()
        // The request has ended (a service closing without flushing would close now); only
        // then does the client read.
        try await waitUntil("the request ends", detail: service.log) { service.log.contains("request failed") }
        let reply = try #require(try connection.readReply(), "the connection closed before the reply")
        #expect(reply.errorCode == "conflict")
        #expect((reply.errorData?["padding"] as? String)?.count == 600_000)
        #expect(try connection.isClosedByPeer())
    }

    @Test("a frame cut short by the peer closing is dropped; the service stays up")
    func truncatedFrame() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendRaw([0, 0, 0, 100] + Array(#"{"id": 1, "meth"#.utf8))
        connection.shutdownWrite()
        let reply = try #require(try connection.readReply())
        #expect(reply.errorCode == "invalid_frame")
        #expect(try connection.isClosedByPeer())
        _ = try await RPCClient(socketPath: service.socketPath).call(Builtin.ping, Empty())
        #expect(service.log.contains("connection closed in the middle of a frame"))
    }

    @Test("1,000 connections sending garbage each get an error or a clean close; nothing leaks; the next request is answered")
    func garbageStorm() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let garbage: [[UInt8]] = [
            [0xff, 0xff, 0xff, 0xff, 1, 2, 3],                 // huge length
            [0, 0, 0, 3] + Array("abc".utf8),                  // not JSON
            [0, 0, 0, 0],                                      // empty frame
            [0, 0, 0, 2] + [0xc3, 0x28],                       // invalid UTF-8
            [0, 0],                                            // half a length, then close
            [0, 0, 0, 50] + Array("{\"id\"".utf8),             // cut-off frame
        ]
        let socket = service.socketPath
        let notErrors = try await withThrowingTaskGroup(of: Int.self) { group in
            for batch in 0..<10 {
                group.addTask {
                    try await offThePool {
                        var notErrors = 0
                        for index in 0..<100 {
                            let bytes = garbage[(batch * 100 + index) % garbage.count]
                            let connection = try RawConnection(path: socket)
                            connection.sendRaw(bytes)
                            connection.shutdownWrite()
                            // Either an error reply then close, or a clean close.
                            while let reply = try connection.readReply() {
                                if reply.errorCode == nil { notErrors += 1 }
                            }
                            connection.close()
                        }
                        return notErrors
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(notErrors == 0, "replies that are not errors")
        #expect(service.isRunning)
        let ping = try await RPCClient(socketPath: service.socketPath).call(Builtin.ping, Empty())
        #expect(ping.pid == service.pid)
        // Every connection was closed by the service: no descriptor is left but the
        // listener, the event loops' own and stdio.
        let fds = "/proc/\(service.pid)/fd"
        try await waitUntil("the service closing every client's connection",
                            detail: "it holds \((try? FileManager.default.contentsOfDirectory(atPath: fds).count) ?? -1) descriptors") {
            try FileManager.default.contentsOfDirectory(atPath: fds).count < 40
        }
    }

    @Test("past --max-connections a new connection gets limit_exceeded and is closed")
    func connectionLimit() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--max-connections", "2", "--log-level", "debug"])
        defer { service.stopNow() }
        let closed = { service.log.components(separatedBy: "connection closed").count - 1 }
        // The readiness probe's connection counts until the service has seen it close.
        try await waitUntil("the readiness probe's connection closed", detail: service.log) { closed() >= 1 }
        let first = try RawConnection(path: service.socketPath)
        let second = try RawConnection(path: service.socketPath)
        for connection in [first, second] {
            connection.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
            #expect(try connection.readReply()?.result != nil)
        }
        let third = try RawConnection(path: service.socketPath)
        let refusal = try #require(try third.readReply())
        #expect(refusal.errorCode == "limit_exceeded")
        #expect(try third.isClosedByPeer())
        let closedBefore = closed()
        first.close()
        try await waitUntil("the service seeing the first connection close", detail: service.log) { closed() > closedBefore }
        let fourth = try RawConnection(path: service.socketPath)
        fourth.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        #expect(try fourth.readReply()?.result != nil)
    }

    @Test("past --max-in-flight running requests (streams included) a request gets limit_exceeded; the connection goes on")
    func inFlightLimit() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--max-in-flight", "2"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        for id in ["a", "b"] {
            connection.sendFrame(#"{"id": "\#(id)", "method": "test.count", "params": {"count": 1000000, "intervalMilliseconds": 100}}"#)
        }
        connection.sendFrame(#"{"id": 3, "method": "rpc.ping"}"#)
        var refusal: [String: Any]?
        while refusal == nil {
            let reply = try #require(try connection.readReply())
            if reply.idValue == AnyHashable(3) { refusal = reply }
        }
        #expect(refusal?.errorCode == "limit_exceeded")
        // Once a stream has ended, there is room again.
        connection.sendFrame(#"{"id": "c", "method": "rpc.cancel", "params": {"id": "a"}}"#)
        while true {
            let reply = try #require(try connection.readReply())
            if reply["id"] as? String == "a", reply["continues"] == nil { break }
        }
        connection.sendFrame(#"{"id": 4, "method": "rpc.ping"}"#)
        var ping: [String: Any]?
        while ping == nil {
            let reply = try #require(try connection.readReply())
            if reply.idValue == AnyHashable(4) { ping = reply }
        }
        #expect(ping?.result?["service"] as? String == "test")
    }

    @Test("with --max-in-flight below the read-ahead, further unary requests wait for a slot instead of being refused")
    func inFlightLimitBelowReadAhead() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--max-in-flight", "2"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        for id in 1...5 {
            connection.sendFrame(#"{"id": \#(id), "method": "test.sleep", "params": {"milliseconds": 100}}"#)
        }
        var byID: [AnyHashable: [String: Any]] = [:]
        for _ in 1...5 {
            let reply = try #require(try connection.readReply())
            byID[reply.idValue!] = reply
        }
        for id in 1...5 { #expect(byID[id]?.result?["milliseconds"] as? Int == 100, "\(id): \(byID[id] ?? [:])") }
    }

    @Test("a request id already in flight is refused with a null id and the id in data, so the original's reply stays its own")
    func duplicateID() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": 1, "method": "test.sleep", "params": {"milliseconds": 300}}"#)
        connection.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        let refusal = try #require(try connection.readReply())
        #expect(refusal.errorCode == "invalid_request")
        #expect(refusal.isNullID)
        #expect((refusal.errorData?["id"] as? NSNumber)?.intValue == 1)
        let original = try #require(try connection.readReply())
        #expect(original.idValue == AnyHashable(1))
        #expect(original.result?["milliseconds"] as? Int == 300)
    }

    @Test("handlers see the peer's SO_PEERCRED credentials")
    func peerCredentials() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let who = try await RPCClient(socketPath: service.socketPath).call("test.whoami")
        #expect(who["pid"]?.intValue == Int64(getpid()))
        #expect(who["uid"]?.intValue == Int64(getuid()))
        #expect(who["gid"]?.intValue == Int64(getgid()))
    }

    @Test("rpc.describe lists every method with schemas derived from its Codable types")
    func describe() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let client = RPCClient(socketPath: service.socketPath)
        let description = try await client.call(Builtin.describe, DescribeParams())
        let names = description.methods.map(\.name)
        #expect(names.starts(with: ["rpc.ping", "rpc.describe", "rpc.cancel"]))
        #expect(Set(names).isSuperset(of: ["test.echo", "test.sleep", "test.count", "test.fail", "test.taste", "test.whoami"]))
        #expect(description.errorCodes == ErrorCode.protocolCodes)
        #expect(description.protocolVersion == 1)

        let echo = try #require(description.methods.first { $0.name == "test.echo" })
        #expect(echo.kind == .unary)
        #expect(echo.params.properties?["message"]?.type == "string")
        #expect(echo.params.properties?["times"]?.type == "integer")
        #expect(echo.params.required == ["message"])

        let count = try #require(description.methods.first { $0.name == "test.count" })
        #expect(count.kind == .stream)
        #expect(count.item?.properties?["index"]?.type == "integer")
        #expect(count.result.properties?["sent"]?.type == "integer")
        #expect(count.errors.contains(.cancelled))

        let taste = try #require(try await client.call(Builtin.describe, DescribeParams(method: "test.taste")).methods.first)
        #expect(taste.params.properties?["flavour"]?.enum == ["sweet", "sour"])
        #expect(taste.params.properties?["tags"]?.items?.type == "string")

        await #expect(throws: RPCError.self) { try await client.call(Builtin.describe, DescribeParams(method: "nope")) }
    }
}
