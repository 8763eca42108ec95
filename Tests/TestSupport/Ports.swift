import Glibc

/// TCP ports on 127.0.0.1 for tests.
public enum LoopbackPort {
    /// A port free now, below the kernel's ephemeral range (32768 and up): for a server a
    /// test stops and starts again on the same port, which a port-0 bind elsewhere in the
    /// test run could otherwise take meanwhile.
    public static func outsideEphemeralRange() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_768)
            if (try? self.bound(port)) != nil { return port }
        }
        throw PortError("no free port on 127.0.0.1 between 20000 and 32767")
    }

    /// A port free now, from the ephemeral range (bound to 0, read, closed).
    public static func free() throws -> Int {
        try self.bound(0)
    }

    /// Binds `port` (0: any), reads the port, closes.
    private static func bound(_ port: Int) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PortError("socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw PortError("bind 127.0.0.1:\(port): errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

public struct PortError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
