import TestSupport
import Foundation
import RPCClient
import RPCCore
import Testing

/// Connections that hold a slot without using it are closed: idle ones, and ones whose
/// frame does not arrive.
@Suite("Idle and frame timeouts, against the real process")
struct TimeoutTests {
    @Test("a connection that sends nothing is closed after --idle-timeout, freeing its slot")
    func idleConnectionIsClosed() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--idle-timeout", "0.5", "--max-connections", "1"])
        defer { service.stopNow() }
        // The only slot: taken once a ping is answered (the readiness probe's connection
        // may still hold it for a moment, and is refused).
        var idle: RawConnection?
        try await waitUntil("a connection is served", detail: service.log) {
            let connection = try RawConnection(path: service.socketPath)
            connection.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
            guard try connection.readReply()?.result != nil else { return false }
            idle = connection
            return true
        }
        let connection = try #require(idle)
        #expect(try await offThePool { try connection.isClosedByPeer(timeout: .seconds(10)) }, "the idle connection was not closed")
        #expect(service.log.contains("closing an idle connection"))
        // Its slot is free again.
        try await waitUntil("a new connection is served", detail: service.log) {
            let next = try RawConnection(path: service.socketPath)
            next.sendFrame(#"{"id": 2, "method": "rpc.ping"}"#)
            return try next.readReply()?.result != nil
        }
    }

    @Test("a connection with a live stream or a request running is not idle, however long nothing arrives; after them, it is")
    func busyConnectionIsNotIdle() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--idle-timeout", "0.5"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        let started = ContinuousClock.now
        // Both outlast the idle timeout several times over.
        connection.sendFrame(#"{"id": "feed", "method": "test.count", "params": {"count": 25, "intervalMilliseconds": 100}}"#)
        connection.sendFrame(#"{"id": "slow", "method": "test.sleep", "params": {"milliseconds": 2000}}"#)
        let (items, feedSent, slept) = try await offThePool { () throws -> (Int, Int?, Int?) in
            var items = 0
            var ends: [String: [String: Any]] = [:]
            while ends.count < 2 {
                guard let reply = try connection.readReply() else {
                    throw TestFailure("closed after \(ContinuousClock.now - started) with \(items) items")
                }
                guard let id = reply["id"] as? String else { throw TestFailure("\(reply)") }
                if reply["continues"] as? Bool == true { items += 1 } else { ends[id] = reply }
            }
            return (items, ends["feed"]?.result?["sent"] as? Int, ends["slow"]?.result?["milliseconds"] as? Int)
        }
        #expect(items == 25)
        #expect(feedSent == 25)
        #expect(slept == 2000)
        #expect(try await offThePool { try connection.isClosedByPeer(timeout: .seconds(10)) }, "idle once its requests ended, the connection was not closed")
    }

    @Test("a frame that does not arrive within --frame-timeout of its first byte gets invalid_frame and the connection is closed")
    func slowFrameIsRefused() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--frame-timeout", "0.5"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        // A length prefix, then one byte of the 100 it declares.
        connection.sendRaw([0, 0, 0, 100, UInt8(ascii: "{")])
        // Half a length prefix counts too.
        let another = try RawConnection(path: service.socketPath)
        another.sendRaw([0, 0])
        let (code, nullID, received, closed) = try await offThePool { () throws -> (String?, Bool, Int?, Bool) in
            let reply = try connection.readReply(timeout: .seconds(10))
            return (reply?.errorCode, reply?.isNullID ?? false, (reply?.errorData?["receivedBytes"] as? NSNumber)?.intValue, try connection.isClosedByPeer())
        }
        #expect(code == "invalid_frame")
        #expect(nullID)
        #expect(received == 5)
        #expect(closed)
        let (otherCode, otherClosed) = try await offThePool { () throws -> (String?, Bool) in
            (try another.readReply(timeout: .seconds(10))?.errorCode, try another.isClosedByPeer())
        }
        #expect(otherCode == "invalid_frame")
        #expect(otherClosed)
        _ = try await RPCClient(socketPath: service.socketPath).call(Builtin.ping, Empty())
    }

    @Test("frames that arrive in pieces within --frame-timeout are served")
    func framesInPiecesAreServed() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--frame-timeout", "2"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        let payload = Array(#"{"id": 1, "method": "test.echo", "params": {"message": "pieces"}}"#.utf8)
        let frame = [0, 0, 0, UInt8(payload.count)] + payload
        for byte in frame { connection.sendRaw([byte]) }
        #expect(try connection.readReply()?.result?["message"] as? String == "pieces")
    }

    @Test("timeouts out of range are refused at start", arguments: [["--idle-timeout", "-1"], ["--frame-timeout", "0"]])
    func badOptions(_ arguments: [String]) async throws {
        let dir = TemporaryDirectory()
        let process = try ServiceProcess(
            executable: Binaries.path("screentime-testd"), arguments: ["--runtime-dir", dir.path] + arguments,
            socketPath: dir.file("test.sock"), logPath: dir.file("test.log"), environment: [:])
        #expect(try await process.waitForExit() != 0)
        #expect(process.log.contains(arguments[0]))
    }
}
