import Crypto
import Foundation
import SwiftASN1
import X509

/// The pin of a certificate's key: SHA-256 of its DER SubjectPublicKeyInfo, base64, the form
/// `curl --pinnedpubkey sha256//<pin>` and HPKP use. It names the key, not the
/// certificate, so a certificate renewed with the same key keeps it.
public enum KeyPin {
    public static func of(_ certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate.publicKey)
        return Data(SHA256.hash(data: serializer.serializedBytes)).base64EncodedString()
    }

    /// The pin of the first certificate in a PEM file.
    public static func of(pemFile path: String) throws -> String {
        try self.of(try Certificate(pemEncoded: try String(contentsOfFile: path, encoding: .utf8)))
    }
}
