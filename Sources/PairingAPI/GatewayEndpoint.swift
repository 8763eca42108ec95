import Foundation
import RPCCore

/// How devices reach the gateway: its URLs and its key pin. The gateway writes it to
/// `<state-dir>/gateway/endpoint.json` when it starts and whenever its certificate
/// changes; the pairing service puts it in invitations and enrollment codes, and
/// `screentimectl gateway pin` prints it.
public struct GatewayEndpoint: Codable, Sendable, Hashable {
    /// `https://host:port` for each host name and address in the certificate, most
    /// preferred first.
    public var urls: [String]
    /// SHA-256 of the certificate's SubjectPublicKeyInfo, base64 (`curl --pinnedpubkey
    /// sha256//<pin>`).
    public var pin: String
    /// The certificate file the gateway serves (PEM), for `curl --cacert`.
    public var certificate: String
    /// When that certificate expires.
    public var notValidAfter: Date

    public init(urls: [String], pin: String, certificate: String, notValidAfter: Date) {
        self.urls = urls
        self.pin = pin
        self.certificate = certificate
        self.notValidAfter = notValidAfter
    }

    /// `<state-dir>/gateway/endpoint.json`.
    public static func path(stateDirectory: String) -> String {
        (stateDirectory as NSString).appendingPathComponent("gateway/endpoint.json")
    }

    /// Reads the file; nil when it does not exist (the gateway never started).
    public static func read(from path: String) throws -> GatewayEndpoint? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try RPCJSON.decode(GatewayEndpoint.self, from: data)
    }

    /// Writes the file atomically, readable by the screentime group's services only.
    public func write(to path: String) throws {
        try Data(try RPCJSON.encodeSorted(self)).write(to: URL(fileURLWithPath: path), options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
    }
}
