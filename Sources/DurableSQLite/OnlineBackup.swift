import Foundation
import Glibc
import GRDB
import RPCCore

/// A service's online backup of its database with SQLite's backup API, from one read
/// snapshot: consistent, and writers go on meanwhile (WAL). The copy is checked
/// (`PRAGMA integrity_check`) before it is put in place.
///
/// Backups go into the service's own `backups/` directory only (`<state-dir>/backups`),
/// named by a plain file name: a caller cannot make a service write anywhere else, whether
/// by an absolute path, `..` or a symbolic link (the directory must be a real one, and the
/// backup is linked into place only if nothing has that name, a symbolic link included).
public enum OnlineBackup {
    public static func directory(stateDirectory: String) -> String {
        (stateDirectory as NSString).appendingPathComponent("backups")
    }

    /// Where the backup named `name` goes (default `<service>-<UTC time>.sqlite`).
    public static func resolve(_ name: String?, service: String, stateDirectory: String, now: Date = Date()) throws -> String {
        let directory = Self.directory(stateDirectory: stateDirectory)
        guard let name, !name.isEmpty else {
            let stamp = now.formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
            return (directory as NSString).appendingPathComponent("\(service)-\(stamp).sqlite")
        }
        guard Self.isPlainName(name) else {
            throw RPCError.invalidParams("params.path",
                "must be a plain file name (no '/', not '.' or '..', no control characters, at most 255 bytes): the \(service) service writes backups only into \(directory); copy one elsewhere afterwards")
        }
        return (directory as NSString).appendingPathComponent(name)
    }

    public static func isPlainName(_ name: String) -> Bool {
        name != "." && name != ".." && !name.hasSuffix(".partial") && name.utf8.count <= 255 - ".partial".utf8.count
            && !name.unicodeScalars.contains { $0 == "/" || $0.properties.generalCategory == .control }
    }

    /// A service's backup method: the copy named `name` (or the default) in its backups
    /// directory, timed; refused to any caller but a local one (`remote`: the call came with
    /// a device's credential).
    public static func take(_ name: String?, remote: Bool, service: String, stateDirectory: String, pool: DatabasePool,
                            position: @escaping @Sendable (Database) throws -> Int64) async throws -> (path: String, bytes: Int64, lastSeq: Int64, milliseconds: Double) {
        guard !remote else { throw RPCError(.forbidden, "\(service).backup is for local administration (screentimectl backup on the server)") }
        let path = try Self.resolve(name, service: service, stateDirectory: stateDirectory)
        let started = ContinuousClock.now
        let (bytes, lastSeq) = try await Self.run(pool: pool, to: path, position: position)
        let elapsed = ContinuousClock.now - started
        return (path, bytes, lastSeq, Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
    }

    /// Writes the copy; returns its size and `position` as read in the copied snapshot (the
    /// store's newest change, or a follower's position in the store's change log).
    public static func run(pool: DatabasePool, to path: String, position: @escaping @Sendable (Database) throws -> Int64) async throws -> (bytes: Int64, lastSeq: Int64) {
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
                let head = try position(db)
                try destination.writeWithoutTransaction { try db.backup(to: $0) }
                return head
            }
            let check = try await destination.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
            try destination.close()
            guard check == ["ok"] else {
                throw RPCError(.internal, "the backup to \(path) failed its integrity check: \(check.prefix(3).joined(separator: "; "))", data: ["path": .string(path)])
            }
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
            throw RPCError(.unavailable, "the backups directory \(directory) is a symbolic link, which the service does not follow; make it a real directory (a mount point works)",
                           data: ["path": .string(directory)])
        default:
            throw RPCError(.unavailable, "\(directory) is not a directory; move it away so the service can create its backups directory",
                           data: ["path": .string(directory)])
        }
    }
}
