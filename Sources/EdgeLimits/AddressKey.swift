import Glibc

/// What the per-address limits count as one address: an IPv4 address (also when it comes
/// as an IPv4-mapped IPv6 address, as on a dual-stack socket), or an IPv6 /64: a home
/// connection is given a whole /64, so one household could otherwise use as many
/// addresses as it likes.
public enum AddressKey {
    public static func of(_ address: String) -> String {
        var bytes = in6_addr()
        guard address.contains(":"), inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        let octets = withUnsafeBytes(of: &bytes) { Array($0) }
        // ::ffff:a.b.c.d
        if octets[0..<10].allSatisfy({ $0 == 0 }), octets[10] == 0xFF, octets[11] == 0xFF {
            return octets[12...].map(String.init).joined(separator: ".")
        }
        var prefix = in6_addr()
        withUnsafeMutableBytes(of: &prefix) { raw in
            for index in 0..<8 { raw[index] = octets[index] }
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &prefix, &text, socklen_t(text.count)) != nil else { return address }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(truncatingIfNeeded: $0) }, as: UTF8.self) + "/64"
    }
}
