import Foundation

/// What a QR code carries: where the server is, which family and invitation, the secret,
/// and how to reach the gateway over TLS with no certificate authority.
///
/// ```
/// screentime://pair?v=2&server=<address>&family=<id>&invitation=<id>&secret=<secret>
///                  &url=https://home.example:8443&url=https://192.168.1.20:8443&pin=<base64>
/// ```
/// `url` (repeated, in order of preference) and `pin` (the SHA-256 of the gateway's
/// SubjectPublicKeyInfo, base64, as `curl --pinnedpubkey sha256//…` takes it) are new in
/// version 2; a version 1 URI (without them) still parses.
public struct PairingURI: Sendable, Hashable {
    public var server: String
    public var family: String
    public var invitationId: String
    public var secret: String
    /// The gateway's URLs, most preferred first; empty when the server has no gateway.
    public var urls: [String]
    /// The gateway's key pin; nil when the server has no gateway.
    public var pin: String?

    /// The version written.
    public static let version = 2

    public init(server: String, family: String, invitationId: String, secret: String, urls: [String] = [], pin: String? = nil) {
        self.server = server
        self.family = family
        self.invitationId = invitationId
        self.secret = secret
        self.urls = urls
        self.pin = pin
    }

    public var string: String {
        var components = URLComponents()
        components.scheme = "screentime"
        components.host = "pair"
        var items = [
            URLQueryItem(name: "v", value: String(Self.version)), URLQueryItem(name: "server", value: self.server),
            URLQueryItem(name: "family", value: self.family), URLQueryItem(name: "invitation", value: self.invitationId),
            URLQueryItem(name: "secret", value: self.secret),
        ]
        items += self.urls.map { URLQueryItem(name: "url", value: $0) }
        if let pin = self.pin { items.append(URLQueryItem(name: "pin", value: pin)) }
        components.queryItems = items
        // A base64 pin holds `+` and `/`: percent-encode `+`, which a query reads as a space.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.string ?? ""
    }

    /// Reads a pairing URI (version 1 or 2); nil when it is not one.
    public init?(_ text: String) {
        guard let components = URLComponents(string: text), components.scheme == "screentime", components.host == "pair" else { return nil }
        func value(_ name: String) -> String? { components.queryItems?.first { $0.name == name }?.value.flatMap { $0.isEmpty ? nil : $0 } }
        guard let version = value("v"), version == "1" || version == "2", let server = value("server"), let family = value("family"),
              let invitation = value("invitation"), let secret = value("secret") else { return nil }
        let urls = (components.queryItems ?? []).filter { $0.name == "url" }.compactMap { $0.value.flatMap { $0.isEmpty ? nil : $0 } }
        self.init(server: server, family: family, invitationId: invitation, secret: secret, urls: urls, pin: value("pin"))
    }
}
