import Foundation
import Glibc

/// Writing the key and certificate: created with mode 0600 under a temporary name, synced,
/// then renamed into place, so a crash leaves either the old file or the new one, and
/// never a moment where another user could read the key.
enum SecretFile {
    static func write(_ text: String, to path: String) throws {
        let temporary = path + ".tmp-\(getpid())"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CertificateError("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let result = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw CertificateError("cannot write \(temporary): \(reason)")
            }
            written += result
        }
        fsync(fd)
        close(fd)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CertificateError("cannot put \(path) in place: \(reason)")
        }
    }
}

/// The certificate or key could not be made, read or used; the message says which file
/// and why.
public struct CertificateError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
