import Foundation
import Glibc

/// The names devices may reach this machine by, for a self-made certificate: its host
/// name (and, for a short one, its mDNS name `<name>.local`, which avahi-daemon answers
/// on a home network), its non-loopback addresses, then the loopback ones (for curl on
/// the server). The dashboard answers requests for these names only.
enum HostNames {
    static func defaults() -> [String] {
        let host = ProcessInfo.processInfo.hostName
        var names = [host]
        if !host.isEmpty, !host.contains("."), host != "localhost" { names.append(host + ".local") }
        var addresses: UnsafeMutablePointer<ifaddrs>?
        if getifaddrs(&addresses) == 0 {
            var cursor = addresses
            while let entry = cursor {
                defer { cursor = entry.pointee.ifa_next }
                guard let address = entry.pointee.ifa_addr else { continue }
                let family = Int32(address.pointee.sa_family)
                guard family == AF_INET || family == AF_INET6 else { continue }
                var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
                let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
                guard getnameinfo(address, length, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
                let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(truncatingIfNeeded: $0) }, as: UTF8.self)
                // Link-local IPv6 needs a zone; loopback comes last.
                if name.contains("%") || name == "127.0.0.1" || name == "::1" { continue }
                names.append(name)
            }
            freeifaddrs(addresses)
        }
        names += ["localhost", "127.0.0.1", "::1"]
        var seen = Set<String>()
        return names.filter { !$0.isEmpty && seen.insert($0).inserted }
    }
}
