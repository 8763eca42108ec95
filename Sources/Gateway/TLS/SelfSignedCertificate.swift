import Crypto
import Foundation
import Glibc
import SwiftASN1
import X509

/// The gateway's own certificate: no certificate authority, the key pinned by the devices
/// instead (through the pairing QR code). P-256, the host names and addresses as subject
/// alternative names, `id-kp-serverAuth`, valid at most 825 days (Apple's limit for
/// server certificates).
enum SelfSignedCertificate {
    static func make(key: Certificate.PrivateKey, hostNames: [String], lifetime: Duration, now: Date = Date()) throws -> Certificate {
        let name = try DistinguishedName {
            CommonName(hostNames.first ?? "screentime")
            OrganizationName("ScreenTime Rewards home server")
        }
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([.serverAuth])
            SubjectAlternativeNames(hostNames.map(Self.generalName))
        }
        // Backdated an hour: a device whose clock is a little behind still accepts it. The
        // lifetime counts from there (Apple's 825 days is notAfter - notBefore).
        let start = now.addingTimeInterval(-3600)
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: key.publicKey,
            notValidBefore: start,
            notValidAfter: start.addingTimeInterval(Double(lifetime.components.seconds)),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: key
        )
    }

    /// An IP address as `iPAddress`, anything else as `dNSName`.
    static func generalName(_ host: String) -> GeneralName {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return .ipAddress(ASN1OctetString(contentBytes: ArraySlice(withUnsafeBytes(of: &v4) { Array($0) })))
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return .ipAddress(ASN1OctetString(contentBytes: ArraySlice(withUnsafeBytes(of: &v6) { Array($0) })))
        }
        return .dnsName(host)
    }

    /// The names a certificate covers, in the form `generalName` reads.
    static func hostNames(of certificate: Certificate) -> [String] {
        guard let names = try? certificate.extensions.subjectAlternativeNames else { return [] }
        return names.compactMap { name in
            switch name {
            case .dnsName(let host): return host
            case .ipAddress(let octets): return Self.addressText(Array(octets.bytes))
            default: return nil
            }
        }
    }

    private static func addressText(_ bytes: [UInt8]) -> String? {
        let family = bytes.count == 4 ? AF_INET : bytes.count == 16 ? AF_INET6 : -1
        guard family >= 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(truncatingIfNeeded: $0) }, as: UTF8.self) : nil
        }
    }
}
