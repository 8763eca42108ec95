import Foundation

/// A TCP port free on 127.0.0.1 now (bound, read back, released), for a server whose port
/// must be known before it starts (socket activation, chromedriver, a relay).
public enum FreePort {
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// A port from the kernel's ephemeral range (bound to port 0).
    public static func pick() throws -> Int {
        try self.bind(0)
    }

    /// A port below the ephemeral range (32768 and up): for a server stopped and started
    /// again on the same port, which a port-0 bind elsewhere could otherwise take meanwhile.
    public static func outsideEphemeralRange() throws -> Int {
        for _ in 0..<200 {
            if let port = try? self.bind(Int.random(in: 20_000..<32_768)) { return port }
        }
        throw Unavailable(description: "no free port on 127.0.0.1 between 20000 and 32767")
    }

    /// Binds `port` (0: any) on 127.0.0.1, reads the port, closes.
    private static func bind(_ port: Int) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Unavailable(description: "socket() failed: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw Unavailable(description: "cannot bind 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
