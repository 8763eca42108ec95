import Crypto
import Foundation
import SwiftASN1
import X509

/// A certificate authority of its own and a server certificate it signed for `localhost`
/// (tests and benchmarks): what the relay and the APNs stand-in serve, and what their
/// clients trust (a CA, as Apple's and a publisher's are; the gateway's own certificate is
/// pinned instead). Files in `directory`, named after `name`.
public struct LocalCA {
    public let caFile: String
    public let certificateFile: String
    public let keyFile: String

    public init(in directory: String, name: String) throws {
        let caKey = P256.Signing.PrivateKey(), serverKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("\(name) test CA") }
        let now = Date()
        let ca = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86_400), issuer: caName, subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey))
        let server = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86_400), issuer: caName,
            subject: try DistinguishedName { CommonName("localhost") }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost")])
            },
            issuerPrivateKey: .init(caKey))
        self.caFile = directory + "/\(name)-ca.pem"
        self.certificateFile = directory + "/\(name)-certificate.pem"
        self.keyFile = directory + "/\(name)-key.pem"
        try ca.serializeAsPEM().pemString.write(toFile: self.caFile, atomically: true, encoding: .utf8)
        try server.serializeAsPEM().pemString.write(toFile: self.certificateFile, atomically: true, encoding: .utf8)
        try serverKey.pemRepresentation.write(toFile: self.keyFile, atomically: true, encoding: .utf8)
    }
}
