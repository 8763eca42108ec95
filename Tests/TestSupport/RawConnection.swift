import Foundation
import Glibc

/// A plain blocking Unix socket speaking raw frames: for sending exactly the bytes a test
/// wants (garbage, cut-off frames, huge length prefixes) and reading what comes back.
public final class RawConnection: @unchecked Sendable {
    private(set) var fd: Int32

    public init(path: String) throws {
        self.fd = makeUnixSocket(SOCK_STREAM)
        guard self.fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        let result = withUnixAddress(path) { connect(self.fd, $0, $1) }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(self.fd)
            self.fd = -1
            throw TestFailure("connect \(path): \(reason)")
        }
    }

    public func sendRaw(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// One frame: the 4-byte big-endian length, then the payload.
    public func sendFrame(_ payload: [UInt8]) {
        let n = UInt32(payload.count)
        self.sendRaw([UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload)
    }

    public func sendFrame(_ json: String) { self.sendFrame(Array(json.utf8)) }

    public func sendJSON(_ object: [String: Any]) {
        self.sendFrame(Array(try! JSONSerialization.data(withJSONObject: object)))
    }

    /// Reads one reply frame as a JSON object; nil when the service closed the connection.
    public func readReply(timeout: Duration = .seconds(10)) throws -> [String: Any]? {
        guard let header = try self.readExactly(4, timeout: timeout) else { return nil }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard let payload = try self.readExactly(length, timeout: timeout) else { throw TestFailure("connection closed mid-frame") }
        guard let object = try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else {
            throw TestFailure("reply is not a JSON object: \(String(decoding: payload, as: UTF8.self))")
        }
        return object
    }

    /// True when the service closed the connection (EOF) within `timeout`.
    public func isClosedByPeer(timeout: Duration = .seconds(5)) throws -> Bool {
        (try self.readExactly(1, timeout: timeout)) == nil
    }

    private func readExactly(_ count: Int, timeout: Duration) throws -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var offset = 0
        let deadline = ContinuousClock.now + timeout
        while offset < count {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw TestFailure("no reply within \(timeout)") }
            var poller = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
            let millis = Int32(max(1, remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            guard poll(&poller, 1, millis) > 0 else { continue }
            let got = buffer[offset...].withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if got == 0 { return nil }
            if got < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { return nil }
                throw TestFailure("recv: \(String(cString: strerror(errno)))")
            }
            offset += got
        }
        return buffer
    }

    public func shutdownWrite() { Glibc.shutdown(self.fd, Int32(SHUT_WR)) }

    public func close() {
        if self.fd >= 0 { Glibc.close(self.fd) }
        self.fd = -1
    }

    deinit { self.close() }
}

extension Dictionary where Key == String, Value == Any {
    public var errorCode: String? { (self["error"] as? [String: Any])?["code"] as? String }
    public var errorMessage: String? { (self["error"] as? [String: Any])?["message"] as? String }
    public var errorData: [String: Any]? { (self["error"] as? [String: Any])?["data"] as? [String: Any] }
    public var result: [String: Any]? { self["result"] as? [String: Any] }
    /// The reply's id as `Int` or `String` (JSONSerialization hands numbers over as
    /// NSNumber, which does not compare equal to an `Int` inside `AnyHashable` on Linux).
    public var idValue: AnyHashable? {
        switch self["id"] {
        case let string as String: AnyHashable(string)
        case let number as NSNumber: AnyHashable(number.intValue)
        default: nil
        }
    }
    public var isNullID: Bool { self["id"] is NSNull }
}

/// Runs blocking work (a ``RawConnection`` waiting on the service) on a thread of its own:
/// tests run in parallel on a cooperative pool of one thread per core, and one test
/// blocked in `poll` there holds up the others, whose clocks keep running.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
