import Foundation

/// What a QR code carries: where the server is, which family and invitation, and the secret.
/// `screentime://pair?v=1&server=<address>&family=<id>&invitation=<id>&secret=<secret>`
public struct PairingURI: Sendable, Hashable {
    public var server: String
    public var family: String
    public var invitationId: String
    public var secret: String

    public init(server: String, family: String, invitationId: String, secret: String) {
        self.server = server
        self.family = family
        self.invitationId = invitationId
        self.secret = secret
    }

    public var string: String {
        var components = URLComponents()
        components.scheme = "screentime"
        components.host = "pair"
        components.queryItems = [
            URLQueryItem(name: "v", value: "1"), URLQueryItem(name: "server", value: self.server),
            URLQueryItem(name: "family", value: self.family), URLQueryItem(name: "invitation", value: self.invitationId),
            URLQueryItem(name: "secret", value: self.secret),
        ]
        return components.string ?? ""
    }

    /// Reads a pairing URI; nil when it is not one.
    public init?(_ text: String) {
        guard let components = URLComponents(string: text), components.scheme == "screentime", components.host == "pair" else { return nil }
        func value(_ name: String) -> String? { components.queryItems?.first { $0.name == name }?.value.flatMap { $0.isEmpty ? nil : $0 } }
        guard value("v") == "1", let server = value("server"), let family = value("family"),
              let invitation = value("invitation"), let secret = value("secret") else { return nil }
        self.init(server: server, family: family, invitationId: invitation, secret: secret)
    }
}
