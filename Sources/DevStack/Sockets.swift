import Foundation
import Glibc

/// A listening Unix stream socket bound to a path, held for a service that starts on the
/// first connection (systemd's `.socket` unit, in miniature).
final class ListeningSocket {
    let path: String
    let fd: Int32

    /// Binds a TCP address (the gateway's socket): `port` 0 picks a free port, read back
    /// in ``port``.
    init(tcpHost host: String, port: Int) throws {
        self.path = ""
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DevError("socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            Glibc.close(fd)
            throw DevError("\(host) is not an IPv4 address")
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw DevError("cannot listen on \(host):\(port): \(reason) (choose another --gateway-port)")
        }
        self.fd = fd
    }

    /// The TCP port bound, for a TCP socket.
    var port: Int? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(self.fd, $0, &length) }
        }
        guard result == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Binds `path`. A socket file left by a stack that died is replaced; one that still
    /// answers belongs to a running stack, which is an error.
    init(path: String) throws {
        self.path = path
        if FileManager.default.fileExists(atPath: path) {
            if Self.answers(path) { throw DevError("\(path) is in use: is another screentime-dev up running on this directory?") }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DevError("socket: \(String(cString: strerror(errno)))") }
        let bound = UnixAddress.with(path) { bind(fd, $0, $1) }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw DevError("cannot bind \(path): \(reason)")
        }
        guard listen(fd, 512) == 0 else {
            Glibc.close(fd)
            throw DevError("cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        chmod(path, 0o660)
        self.fd = fd
    }

    func close() {
        Glibc.close(self.fd)
        if !self.path.isEmpty { unlink(self.path) }
    }

    /// Whether something accepts connections on `path`.
    static func answers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        return UnixAddress.with(path) { connect(fd, $0, $1) } == 0
    }
}

/// A `NOTIFY_SOCKET` for one service: the datagrams `sd_notify` sends (`READY=1`,
/// `STATUS=…`, `STOPPING=1`).
final class NotifySocket {
    let path: String
    let fd: Int32

    init(path: String) throws {
        self.path = path
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw DevError("socket: \(String(cString: strerror(errno)))") }
        guard UnixAddress.with(path, { bind(fd, $0, $1) }) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw DevError("cannot bind \(path): \(reason)")
        }
        self.fd = fd
    }

    /// The assignments of every datagram waiting, in order.
    func receive() -> [(key: String, value: String)] {
        var assignments: [(String, String)] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(self.fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            for line in String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                assignments.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
            }
        }
        return assignments
    }

    func close() {
        Glibc.close(self.fd)
        unlink(self.path)
    }
}

enum UnixAddress {
    /// Longest path a `sockaddr_un` holds.
    static let maximumPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    static func with(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= Self.maximumPathLength else { errno = ENAMETOOLONG; return -1 }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}

public struct DevError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A pipe whose ends are closed on exec (only what a child is handed explicitly reaches it).
func makePipe(nonblocking: Bool = false) throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw DevError("pipe: \(String(cString: strerror(errno)))") }
    for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        if nonblocking { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }
    return (fds[0], fds[1])
}
