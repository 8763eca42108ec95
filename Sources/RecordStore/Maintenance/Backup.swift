import Foundation
import Glibc
import GRDB
import RPCCore
import StoreAPI

/// An online backup with SQLite's backup API, from one read snapshot: consistent, and
/// writers go on meanwhile (WAL).
///
/// Backups go into the store's own `backups/` directory only (`<state-dir>/backups`), named
/// by a plain file name: a caller cannot make the store write anywhere else, whether by an
/// absolute path, `..` or a symbolic link (the directory must be a real one, and the backup
/// is linked into place only if nothing has that name, a symbolic link included).
enum Backup {
    static func directory(stateDirectory: String) -> String {
        (stateDirectory as NSString).appendingPathComponent("backups")
    }

    /// Where the backup named `name` goes (default `store-<UTC time>.sqlite`).
    static func resolve(_ name: String?, stateDirectory: String, now: Date = Date()) throws -> String {
        let directory = Self.directory(stateDirectory: stateDirectory)
        guard let name, !name.isEmpty else {
            let stamp = now.formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
            return (directory as NSString).appendingPathComponent("store-\(stamp).sqlite")
        }
        guard Self.isPlainName(name) else {
            throw RPCError.invalidParams("params.path",
                "must be a plain file name (no '/', not '.' or '..', no control characters, at most 255 bytes): the store writes backups only into \(directory); copy one elsewhere afterwards")
        }
        return (directory as NSString).appendingPathComponent(name)
    }

    static func isPlainName(_ name: String) -> Bool {
        name != "." && name != ".." && !name.hasSuffix(".partial") && name.utf8.count <= 255 - ".partial".utf8.count
            && !name.unicodeScalars.contains { $0 == "/" || $0.properties.generalCategory == .control }
    }

    static func run(pool: DatabasePool, to path: String) async throws -> (bytes: Int64, lastSeq: Int64) {
        let directory = (path as NSString).deletingLastPathComponent
        try Self.prepare(directory)
        var status = stat()
        guard lstat(path, &status) != 0 else {
            throw RPCError(.conflict, "\(path) already exists; choose another name or move the old backup away", data: ["path": .string(path)])
        }
        let partial = path + ".partial"
        unlink(partial)  // left by a backup that failed half-way (a link itself, never what it points to)
        do {
            // Created here, never through a link, before SQLite opens it.
            let descriptor = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            close(descriptor)
            let destination = try DatabaseQueue(path: partial)
            let lastSeq = try await pool.read { db -> Int64 in
                let head = try StoreDatabase.head(db)
                try destination.writeWithoutTransaction { try db.backup(to: $0) }
                return head
            }
            try destination.close()
            // link(2) fails if anything has the name meanwhile, so nothing is ever replaced.
            guard link(partial, path) == 0 else {
                let error = errno
                if error == EEXIST {
                    throw RPCError(.conflict, "\(path) already exists; choose another name or move the old backup away", data: ["path": .string(path)])
                }
                throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
            }
            unlink(partial)
            let bytes = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return (bytes, lastSeq)
        } catch let error as RPCError {
            unlink(partial)
            throw error
        } catch {
            unlink(partial)
            throw RPCError(.unavailable, "the backup to \(path) failed: \(error)", data: ["path": .string(path)])
        }
    }

    /// Creates the backups directory (0700) if missing; refuses one that is a symbolic link
    /// or not a directory.
    private static func prepare(_ directory: String) throws {
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            let reason = String(cString: strerror(errno))
            throw RPCError(.unavailable, "cannot create the backups directory \(directory): \(reason)", data: ["path": .string(directory)])
        }
        var status = stat()
        guard lstat(directory, &status) == 0 else {
            throw RPCError(.unavailable, "cannot read the backups directory \(directory): \(String(cString: strerror(errno)))", data: ["path": .string(directory)])
        }
        switch status.st_mode & S_IFMT {
        case S_IFDIR:
            return
        case S_IFLNK:
            throw RPCError(.unavailable, "the backups directory \(directory) is a symbolic link, which the store does not follow; make it a real directory (a mount point works)",
                           data: ["path": .string(directory)])
        default:
            throw RPCError(.unavailable, "\(directory) is not a directory; move it away so the store can create its backups directory",
                           data: ["path": .string(directory)])
        }
    }
}
