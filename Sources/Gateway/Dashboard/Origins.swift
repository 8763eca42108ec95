import Foundation
import Synchronization

/// The gateway's own web origins: the URLs it gives devices (its host names, with the
/// port it listens on and the one it advertises), never what a request's `Host` says.
/// The dashboard answers only requests addressed to one of them, takes forms and the
/// session cookie only from pages of one of them, and builds its links from them.
final class Origins: Sendable {
    private struct Own {
        /// `https://host:port`, lower-cased, as given to devices (the first preferred).
        var urls: [String] = []
        /// The authorities a request may name in `Host`: `host:port` for each host and
        /// port, and the bare host where the port is 443.
        var authorities: Set<String> = []
        /// `*.example.org` names of an administrator's certificate, as `.example.org`.
        var wildcardSuffixes: [String] = []
        var ports: Set<Int> = []
    }

    private let own = Mutex(Own())

    /// Sets the origins from the host names and the ports (listened on, advertised).
    func publish(hostNames: [String], ports: [Int]) {
        var own = Own()
        own.ports = Set(ports)
        for name in hostNames.map({ $0.lowercased() }) {
            if name.hasPrefix("*.") {
                own.wildcardSuffixes.append(String(name.dropFirst()))
                continue
            }
            let host = name.contains(":") ? "[\(name)]" : name
            for port in ports {
                own.authorities.insert("\(host):\(port)")
                if port == 443 { own.authorities.insert(host) }
            }
            if let port = ports.last { own.urls.append(port == 443 ? "https://\(host)" : "https://\(host):\(port)") }
        }
        self.own.withLock { $0 = own }
    }

    /// Whether `Host` (an authority, `host[:port]`) names this gateway.
    func isOwn(authority: String?) -> Bool {
        guard let authority = authority?.lowercased(), !authority.isEmpty else { return false }
        return self.own.withLock { own in
            if own.authorities.contains(authority) { return true }
            // An administrator's wildcard certificate: one more label before its suffix.
            let (host, port) = Self.split(authority)
            guard own.ports.contains(port), let dot = host.firstIndex(of: ".") else { return false }
            return own.wildcardSuffixes.contains(String(host[dot...])) && !host[..<dot].isEmpty
        }
    }

    /// Whether an `Origin` header names one of this gateway's origins.
    func isOwn(origin: String) -> Bool {
        let prefix = "https://"
        guard origin.lowercased().hasPrefix(prefix) else { return false }
        return self.isOwn(authority: String(origin.dropFirst(prefix.count)))
    }

    /// The origin to put in a link for a request addressed to `authority` (checked to be
    /// one of ours): the same origin, written as this gateway writes it; else the
    /// preferred one.
    func url(for authority: String?) -> String {
        let preferred = self.own.withLock { $0.urls.first } ?? "https://localhost"
        guard let authority, self.isOwn(authority: authority) else { return preferred }
        let (host, port) = Self.split(authority.lowercased())
        return port == 443 ? "https://\(host)" : "https://\(host):\(port)"
    }

    /// `host[:port]` → host (IPv6 in brackets) and port (443 when absent).
    private static func split(_ authority: String) -> (host: String, port: Int) {
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]"), let port = Int(authority[authority.index(after: colon)...]) {
            return (String(authority[..<colon]), port)
        }
        return (authority, 443)
    }
}
