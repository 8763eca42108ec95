import TestSupport
import Foundation
import Glibc
import NIOPosix
import RPCClient
import RPCCore
import Testing

struct Echo: Codable, Sendable { var message: String; var times: Int? }
struct Echoed: Codable, Sendable { var message: String }
struct Count: Codable, Sendable { var count: Int; var intervalMilliseconds: Int? }
struct Index: Codable, Sendable { var index: Int }
struct Sent: Codable, Sendable { var sent: Int }
struct Sleep: Codable, Sendable { var milliseconds: Int; var tag: String? }

enum Test_ {
    static let echo = MethodSpec<Echo, Echoed>("test.echo", summary: "", callers: .anyone)
    static let sleep = MethodSpec<Sleep, Sleep>("test.sleep", summary: "", callers: .anyone)
    static let count = StreamSpec<Count, Index, Sent>("test.count", summary: "", callers: .anyone)
}

@Suite("The async client")
struct ClientTests {
    @Test("typed calls from many tasks share one connection and each gets its own reply")
    func concurrentTypedCalls() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let client = RPCClient(socketPath: service.socketPath)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let reply = try await client.call(Test_.sleep, Sleep(milliseconds: (200 - index) % 7, tag: "t\(index)"))
                    #expect(reply.tag == "t\(index)")
                }
            }
            try await group.waitForAll()
        }
        let who = try await client.call("test.whoami")
        #expect(who["pid"]?.intValue == Int64(getpid()))
        // Counted in the service, which only this test talks to (the test process's own
        // descriptors include those of every suite running alongside).
        let serviceDescriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(service.pid)/fd").count
        #expect(serviceDescriptors < 50, "the service has \(serviceDescriptors) descriptors open: the calls did not share a connection")
    }

    @Test("calls made after the service restarted, before the client saw its old connection close, are sent again on a new connection and succeed")
    func callsRightAfterARestart() async throws {
        let dir = TemporaryDirectory()
        var service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = RPCClient(configuration: ClientConfiguration(socketPath: service.socketPath), eventLoopGroup: loop)
        #expect(try await client.call(Test_.echo, Echo(message: "before")).message == "before")

        // The client's only event loop is held while the service restarts (as `systemctl
        // restart` does), so it cannot see its old connection close: the calls made
        // meanwhile find that connection open and queue their requests on it.
        let held = DispatchSemaphore(value: 0)
        let holding = loop.next().submit { held.wait() }
        await service.stop()
        service = try await ServiceProcess.startByHand(in: dir)
        let calls = (0..<20).map { index in
            Task { try await client.call(Test_.echo, Echo(message: "after \(index)")).message }
        }
        for _ in 0..<100 { await Task.yield() }
        held.signal()
        try await holding.get()
        for (index, call) in calls.enumerated() {
            #expect(try await call.value == "after \(index)")
        }
        await client.close()
        try await loop.shutdownGracefully()
    }

    @Test("errors keep the service's code, message and data")
    func errorsKeepTheirCode() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let client = RPCClient(socketPath: service.socketPath)
        do {
            _ = try await client.call("test.fail", params: ["code": "conflict", "message": "changed since you read it"])
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .conflict)
            #expect(error.message == "changed since you read it")
        }
        do {
            _ = try await client.call("test.echo", params: ["message": 1])
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidParams)
            #expect(error.data?["parameter"] == "params.message")
        }
    }

    @Test("a typed stream yields every item then the end")
    func typedStream() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let client = RPCClient(socketPath: service.socketPath)
        var items: [Int] = []
        var end: Sent?
        for try await event in client.stream(Test_.count, Count(count: 50)) {
            switch event {
            case .item(let item): items.append(item.index)
            case .end(let sent): end = sent
            }
        }
        #expect(items == Array(0..<50))
        #expect(end?.sent == 50)
    }

    @Test("breaking out of a stream cancels it on the service")
    func abandonedStreamIsCancelled() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let client = RPCClient(socketPath: service.socketPath)
        var seen = 0
        for try await event in client.stream(Test_.count, Count(count: 1_000_000, intervalMilliseconds: 5)) {
            if case .item = event { seen += 1 }
            if seen == 3 { break }
        }
        // The cancellation reaches the service soon after (later on a loaded machine).
        try await waitUntil("the service logging the cancellation", detail: service.log) { service.log.contains("error_code=cancelled") }
        // The connection still serves.
        #expect(try await client.call(Test_.echo, Echo(message: "still here")).message == "still here")
    }

    @Test("a call past its timeout fails with timeout; the next call works")
    func timeout() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let client = RPCClient(socketPath: service.socketPath)
        do {
            _ = try await client.call(Test_.sleep, Sleep(milliseconds: 2000), timeout: .milliseconds(100))
            Issue.record("expected a timeout")
        } catch {
            #expect(error.code == .timeout)
        }
        #expect(try await client.call(Test_.echo, Echo(message: "ok")).message == "ok")
    }

    @Test("no service: unavailable naming the socket; after a restart the same client reconnects")
    func reconnects() async throws {
        let dir = TemporaryDirectory()
        let path = dir.file("test.sock")
        let client = RPCClient(configuration: ClientConfiguration(socketPath: path, connectTimeout: .milliseconds(200)))
        do {
            _ = try await client.call(Builtin.ping, Empty())
            Issue.record("expected unavailable")
        } catch {
            #expect(error.code == .unavailable)
            #expect(error.message.contains(path))
        }
        let first = try await ServiceProcess.startByHand(in: dir)
        #expect(try await client.call(Builtin.ping, Empty()).pid == first.pid)
        await first.stop()
        let second = try await ServiceProcess.startByHand(in: dir)
        defer { second.stopNow() }
        #expect(try await client.call(Builtin.ping, Empty()).pid == second.pid)
    }
}
