import Foundation
import PairingAPI

/// What a pairing QR code carries, read by the device (version 1 and 2):
///
/// ```
/// screentime://pair?v=2&server=<address>&family=<id>&invitation=<id>&secret=<secret>
///                  &url=https://home.example:8443&url=https://192.168.1.20:8443&pin=<base64>
/// ```
///
/// Version 2 adds the gateway's URLs (repeated, most preferred first) and its key pin; a
/// version 1 URI (no gateway: the device is on the server) still reads.
// The gateway's branch teaches PairingAPI's PairingURI the same version 2; once merged,
// this reads through it.
public struct PairingLink: Sendable, Hashable {
    public var uri: PairingURI
    public var urls: [String]
    public var pin: String?

    public init?(_ text: String) {
        guard let components = URLComponents(string: text), components.scheme == "screentime", components.host == "pair" else { return nil }
        let items = components.queryItems ?? []
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value.flatMap { $0.isEmpty ? nil : $0 } }
        guard let version = value("v"), version == "1" || version == "2", let server = value("server"), let family = value("family"),
              let invitation = value("invitation"), let secret = value("secret") else { return nil }
        self.uri = PairingURI(server: server, family: family, invitationId: invitation, secret: secret)
        self.urls = items.filter { $0.name == "url" }.compactMap { $0.value.flatMap { $0.isEmpty ? nil : $0 } }
        self.pin = value("pin")
    }
}
