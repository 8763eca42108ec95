import Crypto
import Foundation
import Glibc
import GRDB
import ServerVersion

/// What makes an archive unusable (damaged, not one, a wrong passphrase): the CLI says it
/// with `damaged_archive`, whichever step found it.
protocol ArchiveProblem: Error, CustomStringConvertible {}

/// One archive of the whole server: the services' database copies, the gateway's key and
/// certificate (what every device's pin trusts), the configuration directory, and a
/// manifest of it all (versions, each database's position in the store's change log,
/// sizes, SHA-256). A tar file, written with the system's `tar` (Debian's essential one),
/// mode 0600: it holds the gateway's private key and the credentials' hashes.
struct ServerArchive {
    struct Manifest: Codable, Equatable {
        struct Entry: Codable, Equatable {
            /// The path inside the archive.
            var path: String
            var bytes: Int64
            var sha256: String
            /// A database's: its position in the store's change log (the store's: its newest change).
            var position: Int64?
        }

        /// The archive's own format, for `restore` to read it right.
        static let currentFormat = 1
        var format = Self.currentFormat
        var serverVersion: String
        var schemaVersion: Int
        var createdAt: Date
        var databases: [Entry]
        var files: [Entry]
    }

    enum Failure: ArchiveProblem {
        case unreadable(String)
        case mismatch(String)
        case tar(String)

        var description: String {
            switch self {
            case .unreadable(let what), .mismatch(let what), .tar(let what): what
            }
        }
    }

    /// The databases as the services copied them (name in the archive, copy, position), and
    /// the other files to keep (name in the archive, path): written as `archive`, then read
    /// back and checked; the staging copies are removed either way.
    static func write(to archive: String, databases: [(name: String, copy: String, position: Int64)], files: [(name: String, path: String)],
                      schemaVersion: Int) throws -> Manifest {
        // Staged in a directory of root's own (not in the services' backups directory, which
        // their user can write), then packed into a file only this process could create.
        let staging = NSTemporaryDirectory() + "screentime-backup-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: staging + "/databases", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: staging) }
        var manifest = Manifest(serverVersion: ServerVersion.current, schemaVersion: schemaVersion, createdAt: Date(), databases: [], files: [])
        for database in databases {
            let path = "databases/\(database.name)"
            try Self.requireRegularFile(database.copy)
            try FileManager.default.moveItem(atPath: database.copy, toPath: staging + "/" + path)
            manifest.databases.append(try Self.entry(path, in: staging, position: database.position))
        }
        for file in files where FileManager.default.fileExists(atPath: file.path) {
            try Self.requireRegularFile(file.path)
            let directory = ((staging + "/" + file.name) as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.copyItem(atPath: file.path, toPath: staging + "/" + file.name)
            manifest.files.append(try Self.entry(file.name, in: staging, position: nil))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        try encoder.encode(manifest).write(to: URL(fileURLWithPath: staging + "/manifest.json"))
        let partial = archive + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        // Made here, 0600, never through a link, before tar writes into it: the key is never
        // readable by others, and nothing can be put in its way.
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure.unreadable("cannot create \(partial): \(String(cString: strerror(errno)))") }
        let output = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try Self.tar(["-cf", "-", "-C", staging, "."], output: output)
            try output.synchronize()
            try output.close()
            _ = try Self.verify(partial)
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
        guard link(partial, archive) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: partial)
            throw Failure.unreadable("cannot put the archive at \(archive): \(reason)")
        }
        unlink(partial)
        return manifest
    }

    /// A file to archive is a plain file: a symbolic link (to anything on the system) is
    /// never followed into an archive.
    static func requireRegularFile(_ path: String) throws {
        var status = stat()
        guard lstat(path, &status) == 0 else { throw Failure.unreadable("\(path): \(String(cString: strerror(errno)))") }
        guard status.st_mode & S_IFMT == S_IFREG else { throw Failure.unreadable("\(path) is not a plain file (a symbolic link?): refused") }
    }

    /// Reads an archive back: every file the manifest names there with its size and SHA-256,
    /// every database whole (`PRAGMA integrity_check`). Returns its manifest.
    static func verify(_ archive: String, passphrase: Data? = nil) throws -> Manifest {
        let scratch = NSTemporaryDirectory() + "screentime-verify-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        return try Self.extract(archive, into: scratch + "/files", passphrase: passphrase, scratch: scratch)
    }

    /// Unpacks an archive into `directory` (made here, mode 0700) and checks it as `verify`
    /// does; `scratch` takes the decrypted tar of an encrypted one meanwhile.
    static func extract(_ archive: String, into directory: String, passphrase: Data?, scratch: String) throws -> Manifest {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var tarFile = archive
        if let passphrase, ArchiveEncryption.isEncrypted(archive) {
            tarFile = scratch + "/archive.tar"
            try ArchiveEncryption.decrypt(archive, to: tarFile, passphrase: passphrase)
        }
        defer { if tarFile != archive { try? FileManager.default.removeItem(atPath: tarFile) } }
        // What it holds is read from its headers and checked before anything is unpacked:
        // only what a backup holds, plain files and directories, within their sizes.
        let members: [ArchiveMembers.Member]
        do {
            members = try ArchiveMembers.list(tarFile)
            try ArchiveMembers.check(members, room: ArchiveMembers.room(at: directory))
        } catch let refusal as ArchiveMembers.Refusal {
            throw Failure.unreadable("\(archive) is not a ScreenTime Rewards backup, or it is damaged: \(refusal); nothing was unpacked")
        }
        do {
            // Owners and modes are not taken from the archive: the restore sets them. Only the
            // files listed are asked for (their directories come with them).
            let files = members.filter { $0.type == UInt8(ascii: "0") || $0.type == 0 }.map(\.name)
            try Self.tar(["-xf", tarFile, "-C", directory, "--no-same-owner", "--no-same-permissions", "--"] + files)
        } catch let failure as Failure {
            throw Failure.unreadable("\(archive) is not a ScreenTime Rewards backup, or it is damaged (\(failure))")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let data = FileManager.default.contents(atPath: directory + "/manifest.json"), let manifest = try? decoder.decode(Manifest.self, from: data) else {
            throw Failure.unreadable("\(archive) has no readable manifest: it is not a ScreenTime Rewards backup, or it is damaged")
        }
        for expected in manifest.databases + manifest.files {
            guard Self.isInside(expected.path) else { throw Failure.mismatch("\(archive) is damaged: its manifest names \(expected.path), outside the archive") }
            // Every step of the path a directory, the file itself a plain one with one name:
            // no link in an archive reaches a file outside it.
            var path = directory
            let parts = expected.path.split(separator: "/")
            for (index, part) in parts.enumerated() {
                path += "/" + part
                var status = stat()
                let kind = lstat(path, &status) == 0 ? status.st_mode & S_IFMT : 0
                let wanted = index == parts.count - 1 ? S_IFREG : S_IFDIR
                guard kind == wanted, kind != S_IFREG || status.st_nlink == 1 else {
                    throw Failure.mismatch("\(archive) is damaged: \(expected.path) is not a plain file in it")
                }
            }
            let found = try Self.entry(expected.path, in: directory, position: expected.position)
            guard found == expected else {
                throw Failure.mismatch("\(archive) is damaged: \(expected.path) is not what its manifest says (size or SHA-256 differ)")
            }
        }
        for database in manifest.databases {
            let queue = try DatabaseQueue(path: directory + "/" + database.path)
            let check = try queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
            try queue.close()
            guard check == ["ok"] else { throw Failure.mismatch("\(archive) is damaged: \(database.path) fails SQLite's integrity check (\(check.prefix(2).joined(separator: "; ")))") }
        }
        return manifest
    }

    /// A relative path that stays inside the archive: no `..`, not absolute.
    static func isInside(_ path: String) -> Bool {
        !path.hasPrefix("/") && !path.split(separator: "/").contains("..") && !path.isEmpty
    }

    private static func entry(_ path: String, in directory: String, position: Int64?) throws -> Manifest.Entry {
        guard let data = FileManager.default.contents(atPath: directory + "/" + path) else { throw Failure.unreadable("\(path) is missing from the archive") }
        return Manifest.Entry(path: path, bytes: Int64(data.count), sha256: SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined(), position: position)
    }

    private static func tar(_ arguments: [String], output: FileHandle? = nil) throws {
        let outcome: SystemCommand.Outcome
        do { outcome = try SystemCommand.run("/usr/bin/tar", arguments, output: output) } catch { throw Failure.tar("cannot run /usr/bin/tar: \(error)") }
        guard outcome.status == 0 else {
            throw Failure.tar("tar \(arguments.first ?? ""): \(outcome.firstError.replacingOccurrences(of: "/usr/bin/tar: ", with: ""))")
        }
    }
}
