import TestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// A peer that does not read holds back its own replies, not the service.
@Suite("Back-pressure, against the real process")
struct BackPressureTests {
    @Test("a stream to a peer that stops reading waits for it, can still be cancelled, and goes on in order when the peer reads")
    func streamWaitsForASlowReader() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let slow = try RawConnection(path: service.socketPath)
        slow.sendFrame(#"{"id": "feed", "method": "test.count", "params": {"count": 2000000}}"#)
        // Unread, the stream fills the socket and the channel's buffer, then waits.
        try await waitUntil("the stream waiting for its reader", detail: service.log) {
            service.log.contains("the peer is not reading")
        }

        // Another connection is served meanwhile.
        let other = try RawConnection(path: service.socketPath)
        other.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        #expect(try other.readReply()?.result?["service"] as? String == "test")

        slow.sendFrame(#"{"id": "c", "method": "rpc.cancel", "params": {"id": "feed"}}"#)
        var next = 0
        var end: [String: Any]?
        while end == nil {
            let reply = try #require(try slow.readReply())
            if reply["id"] as? String == "feed", reply["continues"] as? Bool == true {
                #expect(reply.result?["index"] as? Int == next)
                next += 1
            } else if reply["id"] as? String == "feed" {
                end = reply
            }
        }
        // The items written before the cancellation arrive in order, then the end; a service
        // that did not wait would have produced all two million before reading the cancel.
        #expect(end?.errorCode == "cancelled")
        #expect(next > 0 && next < 2_000_000)
    }

    @Test("requests written in one go past the read-ahead wait in the socket and are all answered, none refused", arguments: [33, 129, 200, 1000])
    func pipelinedBurstIsNotRefused(_ count: Int) async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        var burst: [UInt8] = []
        for id in 0..<count {
            let payload = Array(#"{"id": \#(id), "method": "rpc.ping"}"#.utf8)
            let n = UInt32(payload.count)
            burst += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
        }
        connection.sendRaw(burst)
        var answered = Set<Int>()
        var refused: [Int] = []
        for _ in 0..<count {
            let reply = try #require(try connection.readReply())
            let id = try #require(reply["id"] as? Int)
            if reply.result?["service"] as? String == "test" { answered.insert(id) } else { refused.append(id) }
        }
        #expect(refused.isEmpty, "refused: \(refused.count), from id \(refused.min() ?? -1)")
        #expect(answered == Set(0..<count))
    }

    @Test("an id may be used again as soon as its reply has arrived: 32 in flight, each sent again the moment it is answered")
    func idReusedOnItsReply() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        func request(_ id: Int) { connection.sendFrame(#"{"id": \#(id), "method": "test.echo", "params": {"message": "again"}}"#) }
        for id in 0..<32 { request(id) }
        var refused: [String] = []
        for sent in 32..<3000 {
            let reply = try #require(try connection.readReply())
            guard let id = reply["id"] as? Int else {
                refused.append("\(reply)")
                break
            }
            if sent < 2968 { request(id) }
        }
        #expect(refused.isEmpty, "\(refused)")
    }

    @Test("a peer that sends requests without reading the replies is not read from until it reads; then every reply arrives")
    func requestsWaitForTheirReplies() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--max-in-flight", "4096"])
        defer { service.stopNow() }
        let before = try service.residentBytes() / 1024
        let greedy = try RawConnection(path: service.socketPath)
        let requests = 3000
        // (A thread of its own: once the service stops reading, these sends block.)
        let sent = Mutex(0)
        Thread.detachNewThread {
            for id in 0..<requests {
                greedy.sendFrame(#"{"id": \#(id), "method": "test.echo", "params": {"message": "0123456789", "times": 1000}}"#)
                sent.withLock { $0 += 1 }
            }
        }
        // 3,000 replies of 10 KB would be 30 MB held in the service if it kept reading.
        try await Task.sleep(for: .seconds(1))
        let grown = try service.residentBytes() / 1024 - before
        #expect(grown < 12 * 1024, "the service grew by \(grown) KiB while its replies were not read")

        let other = try RawConnection(path: service.socketPath)
        other.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        #expect(try other.readReply()?.result?["service"] as? String == "test")

        let (ids, short) = try await offThePool { () throws -> (Set<Int>, Int) in
            var ids = Set<Int>()
            var short = 0
            for _ in 0..<requests {
                guard let reply = try greedy.readReply() else { throw TestFailure("closed after \(ids.count) replies") }
                if (reply.result?["message"] as? String)?.count != 10_000 { short += 1 }
                if let id = reply["id"] as? Int { ids.insert(id) }
            }
            return (ids, short)
        }
        #expect(short == 0)
        #expect(ids.count == requests)
        #expect(sent.withLock { $0 } == requests)
    }
}
