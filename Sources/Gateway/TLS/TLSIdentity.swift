import Crypto
import Foundation
import Logging
import NIOSSL
import SwiftASN1
import X509

/// The certificate and key the gateway serves, and what devices pin.
public struct TLSIdentity: Sendable {
    /// The chain's PEM file (for `curl --cacert`, `screentimectl gateway pin`).
    public var certificateFile: String
    public var pin: String
    public var notValidAfter: Date
    /// The names the certificate covers (subject alternative names).
    public var hostNames: [String]
    /// Whether the gateway made it (and renews it) rather than the administrator.
    public var selfMade: Bool
    let chain: [NIOSSLCertificate]
    let key: NIOSSLPrivateKey

    /// The TLS server configuration: TLS 1.2 and 1.3 only; on 1.2, one suite for each kind
    /// of key, ECDHE with AES-128-GCM (no CBC, no RSA key exchange, no SHA-1 MACs). One,
    /// because swift-nio-ssl has no switch for a server cipher order: with several, the
    /// client's order would pick among them. Every TLS 1.2 client of this decade has it, and
    /// the devices speak TLS 1.3 (all three of its suites, BoringSSL's choice).
    func serverConfiguration() -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: self.chain.map { .certificate($0) }, privateKey: .privateKey(self.key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.maximumTLSVersion = .tlsv13
        configuration.cipherSuiteValues = [.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, .TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
        configuration.renegotiationSupport = .none
        // A peer that never answers close_notify is not waited for long (NIO's default is 5 s).
        configuration.shutdownTimeout = .seconds(1)
        return configuration
    }
}

/// Finding, making and renewing the gateway's certificate in its state directory:
/// `key.pem` (P-256, PKCS#8) and `certificate.pem`, both mode 0600.
public struct CertificateKeeper: Sendable {
    public let settings: CertificateSettings
    public let directory: String
    let logger: Logger

    var keyFile: String { (self.directory as NSString).appendingPathComponent("key.pem") }
    var certificateFile: String { (self.directory as NSString).appendingPathComponent("certificate.pem") }

    /// The identity to serve: the administrator's files as given, else the gateway's own,
    /// made on first start and renewed (same key, so the same pin) when it nears expiry or
    /// no longer names the configured hosts.
    public func load(now: Date = Date()) throws -> TLSIdentity {
        // Made with the administrator's certificate too: it holds the endpoint file and the
        // dashboard's key as well.
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o750])
        if let certificate = self.settings.certificateFile, let key = self.settings.privateKeyFile {
            return try Self.identity(certificateFile: certificate, keyFile: key, selfMade: false)
        }
        let key: Certificate.PrivateKey
        if let pem = try? String(contentsOfFile: self.keyFile, encoding: .utf8) {
            do {
                key = try Certificate.PrivateKey(pemEncoded: pem)
            } catch {
                throw CertificateError("\(self.keyFile) is not a PEM private key (\(error)); move it away to have a new key made (devices must then pair again)")
            }
        } else {
            let made = P256.Signing.PrivateKey()
            try SecretFile.write(made.pemRepresentation, to: self.keyFile)
            key = Certificate.PrivateKey(made)
            self.logger.notice("made a new P-256 key for the gateway", metadata: ["file": "\(self.keyFile)"])
        }
        if let reason = self.renewalReason(now: now, key: key) {
            let certificate = try SelfSignedCertificate.make(key: key, hostNames: self.settings.hostNames, lifetime: self.settings.lifetime, now: now)
            try SecretFile.write(try certificate.serializeAsPEM().pemString, to: self.certificateFile)
            self.logger.notice("made the gateway's certificate", metadata: [
                "reason": "\(reason)", "file": "\(self.certificateFile)", "not_valid_after": "\(certificate.notValidAfter)",
                "hosts": "\(self.settings.hostNames.joined(separator: ","))",
            ])
        }
        return try Self.identity(certificateFile: self.certificateFile, keyFile: self.keyFile, selfMade: true)
    }

    /// Why the certificate on disk must be made again, or nil when it is fine.
    func renewalReason(now: Date, key: Certificate.PrivateKey) -> String? {
        guard let pem = try? String(contentsOfFile: self.certificateFile, encoding: .utf8) else { return "none yet" }
        guard let certificate = try? Certificate(pemEncoded: pem) else { return "unreadable" }
        if certificate.publicKey != key.publicKey { return "made for another key" }
        if certificate.notValidAfter.timeIntervalSince(now) < Double(self.settings.renewBefore.components.seconds) { return "expires soon" }
        let wanted = Set(self.settings.hostNames.map(SelfSignedCertificate.generalName))
        let has = Set((try? certificate.extensions.subjectAlternativeNames).map { Array($0) } ?? [])
        if wanted != has { return "host names changed" }
        return nil
    }

    static func identity(certificateFile: String, keyFile: String, selfMade: Bool) throws -> TLSIdentity {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        let leaf: Certificate
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificateFile)
            leaf = try Certificate(pemEncoded: try String(contentsOfFile: certificateFile, encoding: .utf8))
        } catch {
            throw CertificateError("cannot read the certificate \(certificateFile): \(error)")
        }
        do {
            key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
        } catch {
            throw CertificateError("cannot read the private key \(keyFile): \(error)")
        }
        guard !chain.isEmpty else { throw CertificateError("\(certificateFile) holds no certificate") }
        return TLSIdentity(
            certificateFile: certificateFile, pin: try leaf.keyPin(), notValidAfter: leaf.notValidAfter,
            hostNames: SelfSignedCertificate.hostNames(of: leaf), selfMade: selfMade, chain: chain, key: key)
    }
}

extension Certificate {
    /// The pin of the certificate's key: SHA-256 of its DER SubjectPublicKeyInfo, base64, the
    /// form `curl --pinnedpubkey sha256//<pin>` takes and ScreenTimeKit's `KeyPin` reads. It
    /// names the key, not the certificate, so a certificate renewed with the same key keeps it.
    func keyPin() throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(self.publicKey)
        return Data(SHA256.hash(data: serializer.serializedBytes)).base64EncodedString()
    }
}
