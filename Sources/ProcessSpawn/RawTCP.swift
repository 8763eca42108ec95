import Glibc

/// Plain TCP to a port on 127.0.0.1, for sending exactly the bytes a test or a benchmark
/// wants (or none).
public enum RawTCP {
    /// A blocking TCP connection to 127.0.0.1:`port` that has sent nothing; the caller closes it.
    public static func open(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SpawnError("socket failed: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw SpawnError("connect failed: \(reason)")
        }
        return fd
    }

    /// Blocks until the other end closes `fd` (true), or `seconds` pass with it open
    /// (false); what it sent is dropped.
    @discardableResult
    public static func waitForClose(_ fd: Int32, seconds: Int32 = 10) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 512)
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&poller, 1, seconds * 1000) > 0 {
            if recv(fd, &buffer, buffer.count, 0) <= 0 { return true }
        }
        return false
    }
}
