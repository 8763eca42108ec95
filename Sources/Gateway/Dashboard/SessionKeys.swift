import Crypto
import Foundation
import RPCCore
import Synchronization

/// The dashboard's secrets: the key its CSRF tokens are made with (kept in
/// `<state-dir>/gateway/dashboard.key`, mode 0600, so a restart does not invalidate open
/// pages), and the secrets of the child invitations a browser is showing.
final class SessionKeys: Sendable {
    /// 32 bytes (`SymmetricKey` is not `Sendable`; one is made from these when needed).
    private let key: Data

    init(directory: String) {
        let path = (directory as NSString).appendingPathComponent("dashboard.key")
        if let text = try? String(contentsOfFile: path, encoding: .utf8), let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), data.count == 32 {
            self.key = data
        } else {
            let key = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
            // Not fatal when the directory cannot be written: tokens then last until a restart.
            try? SecretFile.write(key.base64EncodedString() + "\n", to: path)
            self.key = key
        }
    }

    /// The CSRF token of a session: bound to its credential, so a token seen by another
    /// session (or before a sign-in) is worth nothing here.
    func csrfToken(session: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("screentime-csrf|\(session)".utf8), using: SymmetricKey(data: self.key))
        return Base64URL.encode(Data(mac))
    }

    func checkCSRF(_ given: String?, session: String) -> Bool {
        guard let given else { return false }
        return Self.constantTimeEqual(given, self.csrfToken(session: session))
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    static func random(bytes: Int = 16) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode(Data((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) }))
    }

}

/// The invitations a browser created and is showing: the pairing service never gives a
/// secret back, and the parent's short code is computed from it. Kept in memory until the
/// invitation expires (a restarted gateway shows "invite again" instead of a code).
final class InvitationSecrets: Sendable {
    struct Entry: Sendable {
        var secret: String
        var uri: String
        var deviceId: String
        var expiresAt: Date
    }

    private let entries = Mutex<[String: Entry]>([:])

    func keep(_ invitationId: String, _ entry: Entry) {
        self.entries.withLock { entries in
            let now = Date()
            entries = entries.filter { $0.value.expiresAt > now }
            if entries.count < 10_000 { entries[invitationId] = entry }
        }
    }

    /// The entry, only for the device that created the invitation.
    func entry(_ invitationId: String, deviceId: String) -> Entry? {
        self.entries.withLock { entries in
            guard let entry = entries[invitationId], entry.deviceId == deviceId else { return nil }
            return entry
        }
    }
}
