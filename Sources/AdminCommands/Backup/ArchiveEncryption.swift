import _CryptoExtras
import Crypto
import Foundation

/// A backup archive encrypted with a passphrase, for when it leaves the box.
///
/// The key is derived with scrypt (memory-hard: guessing passphrases costs every guess
/// 64 MiB, on a GPU as on the server; swift-crypto has it, Argon2 it has not), from the
/// passphrase and a random salt. The archive is sealed in chunks of 1 MiB with
/// ChaCha20-Poly1305 (an AEAD: fast without AES instructions, as on a Raspberry Pi), each
/// with a random nonce and, as authenticated data, the header, its number and whether it
/// is the last: a chunk changed, moved, dropped or cut off is refused.
///
/// The file: a line `SCREENTIME-BACKUP-ENCRYPTED 1`, a line of JSON (the header: `kdf`,
/// `logN`, `r`, `p`, `salt`, `aead`, `chunk`), then the chunks, each nonce ‖ ciphertext ‖
/// tag (`chunk` + 28 bytes, the last one shorter).
enum ArchiveEncryption {
    static let magic = Data("SCREENTIME-BACKUP-ENCRYPTED 1\n".utf8)
    static let chunkSize = 1 << 20
    static let overhead = 12 + 16

    struct Header: Codable, Equatable {
        var kdf = "scrypt"
        var logN = 16
        var r = 8
        var p = 1
        /// Base64.
        var salt: String
        var aead = "ChaCha20-Poly1305"
        var chunk = ArchiveEncryption.chunkSize
    }

    enum Failure: ArchiveProblem {
        case passphrase(String)
        case damaged(String)

        var description: String {
            switch self {
            case .passphrase(let what), .damaged(let what): what
            }
        }
    }

    /// The passphrase in `file`: its first line, at least 8 characters.
    static func passphrase(file: String) throws -> Data {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw Failure.passphrase("cannot read the passphrase file \(file)")
        }
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard line.count >= 8 else { throw Failure.passphrase("the passphrase in \(file) is shorter than 8 characters: use a longer one (a few words)") }
        return Data(line.utf8)
    }

    static func isEncrypted(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: Self.magic.count)) == Self.magic
    }

    static func encrypt(_ source: String, to destination: String, passphrase: Data) throws {
        var salt = Data(count: 16)
        for index in salt.indices { salt[index] = UInt8.random(in: 0...255) }
        let header = Header(salt: salt.base64EncodedString())
        let headerLine = try JSONEncoder().encode(header) + Data("\n".utf8)
        let key = try Self.key(header, passphrase: passphrase)
        guard FileManager.default.createFile(atPath: destination, contents: nil, attributes: [.posixPermissions: 0o600]),
              let output = FileHandle(forWritingAtPath: destination), let input = FileHandle(forReadingAtPath: source) else {
            throw Failure.damaged("cannot write \(destination)")
        }
        defer {
            try? output.close()
            try? input.close()
        }
        try output.write(contentsOf: Self.magic + headerLine)
        var index: UInt64 = 0
        var chunk = try input.read(upToCount: Self.chunkSize) ?? Data()
        while true {
            let next = try input.read(upToCount: Self.chunkSize) ?? Data()
            let sealed = try ChaChaPoly.seal(chunk, using: key, authenticating: Self.aad(headerLine, index, last: next.isEmpty))
            try output.write(contentsOf: sealed.combined)
            if next.isEmpty { break }
            chunk = next
            index += 1
        }
        try output.synchronize()
    }

    static func decrypt(_ source: String, to destination: String, passphrase: Data) throws {
        guard let input = FileHandle(forReadingAtPath: source) else { throw Failure.damaged("cannot read \(source)") }
        defer { try? input.close() }
        guard (try input.read(upToCount: Self.magic.count)) == Self.magic else { throw Failure.damaged("\(source) is not an encrypted backup") }
        var headerLine = Data()
        while let byte = try input.read(upToCount: 1), let first = byte.first, headerLine.count < 4096 {
            headerLine.append(first)
            if first == UInt8(ascii: "\n") { break }
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: headerLine), header.kdf == "scrypt", header.aead == "ChaCha20-Poly1305",
              (10...22).contains(header.logN), (1...32).contains(header.r), (1...16).contains(header.p), header.chunk == Self.chunkSize else {
            throw Failure.damaged("\(source) has a header this version does not read: it is damaged, or from a newer version")
        }
        let key = try Self.key(header, passphrase: passphrase)
        guard FileManager.default.createFile(atPath: destination, contents: nil, attributes: [.posixPermissions: 0o600]),
              let output = FileHandle(forWritingAtPath: destination) else { throw Failure.damaged("cannot write \(destination)") }
        defer { try? output.close() }
        var index: UInt64 = 0
        var sealed = try input.read(upToCount: header.chunk + Self.overhead) ?? Data()
        while true {
            guard sealed.count > Self.overhead else { throw Failure.damaged("\(source) is cut short: its last part is missing") }
            let next = try input.read(upToCount: header.chunk + Self.overhead) ?? Data()
            let box = try ChaChaPoly.SealedBox(combined: sealed)
            let plain: Data
            do {
                plain = try ChaChaPoly.open(box, using: key, authenticating: Self.aad(headerLine, index, last: next.isEmpty))
            } catch {
                throw index == 0 ? Failure.passphrase("the passphrase does not open \(source) (or the archive is damaged)")
                                 : Failure.damaged("\(source) is damaged: part \(index + 1) does not open")
            }
            try output.write(contentsOf: plain)
            if next.isEmpty { break }
            sealed = next
            index += 1
        }
    }

    private static func key(_ header: Header, passphrase: Data) throws -> SymmetricKey {
        guard let salt = Data(base64Encoded: header.salt), salt.count >= 16 else { throw Failure.damaged("the archive's header has no salt") }
        return try KDF.Scrypt.deriveKey(from: passphrase, salt: salt, outputByteCount: 32, rounds: 1 << header.logN, blockSize: header.r,
                                        parallelism: header.p, maxMemory: 256 << 20)
    }

    /// The header, the chunk's number and whether it is the last.
    private static func aad(_ header: Data, _ index: UInt64, last: Bool) -> Data {
        var data = header
        withUnsafeBytes(of: index.bigEndian) { data.append(contentsOf: $0) }
        data.append(last ? 1 : 0)
        return data
    }
}
