import Crypto
import Foundation

/// How a home server signs a wake for the relay, with its gateway's own P-256 key (the
/// key its pin names, which every device of the family pinned when it paired):
///
///     Screentime-Wake-Key:       base64 of the key's SubjectPublicKeyInfo (DER)
///     Screentime-Wake-Time:      Unix seconds when signed
///     Screentime-Wake-Signature: base64 of the ECDSA P-256 / SHA-256 signature (raw r‖s)
///                                of "screentime-wake-v1\n<time>\n<body>"
///
/// The relay accepts it within `WakeSignature.maximumAge` of its own clock, and only for a
/// handle sealed with the same pin: a stolen handle is useless to another server.
public enum WakeSignature {
    public static let keyHeader = "Screentime-Wake-Key"
    public static let timeHeader = "Screentime-Wake-Time"
    public static let signatureHeader = "Screentime-Wake-Signature"
    /// How far a wake's time may be from the relay's clock, either way.
    public static let maximumAge: TimeInterval = 300

    /// The three headers for `body`, signed with `key` at `time`.
    public static func headers(body: [UInt8], key: P256.Signing.PrivateKey, time: Date = Date()) throws -> [(String, String)] {
        let seconds = String(Int64(time.timeIntervalSince1970))
        let signature = try key.signature(for: Self.message(time: seconds, body: body))
        return [
            (Self.keyHeader, key.publicKey.derRepresentation.base64EncodedString()),
            (Self.timeHeader, seconds),
            (Self.signatureHeader, signature.rawRepresentation.base64EncodedString()),
        ]
    }

    /// Checks the headers against `body` and returns the signer's pin; `badSignature` when
    /// anything is missing, malformed, out of date or does not verify.
    public static func verify(body: [UInt8], key: String?, time: String?, signature: String?, now: Date = Date()) throws(RelayError) -> String {
        guard let key, let time, let signature else {
            throw .badSignature("the \(Self.keyHeader), \(Self.timeHeader) and \(Self.signatureHeader) headers are required")
        }
        guard let seconds = Int64(time) else { throw .badSignature("\(Self.timeHeader) must be Unix seconds") }
        guard abs(now.timeIntervalSince1970 - Double(seconds)) <= Self.maximumAge else {
            throw .badSignature("\(Self.timeHeader) is more than \(Int(Self.maximumAge)) s from the relay's clock: check the server's clock")
        }
        guard let spki = Data(base64Encoded: key), let publicKey = try? P256.Signing.PublicKey(derRepresentation: spki) else {
            throw .badSignature("\(Self.keyHeader) must be a base64 P-256 SubjectPublicKeyInfo")
        }
        guard let raw = Data(base64Encoded: signature), let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: raw),
              publicKey.isValidSignature(parsed, for: Self.message(time: time, body: body))
        else { throw .badSignature("the signature does not verify") }
        return Self.pin(spki: spki)
    }

    /// SHA-256 of what a wake's signature signs (its time and body): what the relay keeps
    /// of a wake it took, to refuse it sent again. Not the signature itself, which an
    /// ECDSA signer or anyone who saw it can turn into a second valid one ((r, n - s)).
    public static func signedDigest(time: String, body: [UInt8]) -> SHA256.Digest {
        SHA256.hash(data: Self.message(time: time, body: body))
    }

    /// base64 SHA-256 of a SubjectPublicKeyInfo: the form devices pin.
    public static func pin(spki: Data) -> String {
        Data(SHA256.hash(data: spki)).base64EncodedString()
    }

    private static func message(time: String, body: [UInt8]) -> Data {
        Data("screentime-wake-v1\n\(time)\n".utf8) + Data(body)
    }
}
