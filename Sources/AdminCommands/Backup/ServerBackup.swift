import AggregatorAPI
import Foundation
import PushAPI
import RPCCore
import StoreAPI

/// One archive of the whole server while it runs: each service copies its own database
/// (the followers first, the store last, so that no restored follower is ahead of the
/// store), then ``ServerArchive`` puts them in one file with the gateway's key and
/// certificate and the configuration, reads it back and checks it, and seals it when a
/// passphrase is given.
enum ServerBackup {
    struct Made {
        /// The archive kept (`.tar`, or `.tar.enc` sealed).
        var path: String
        var bytes: Int64
        var encrypted: Bool
        var manifest: ServerArchive.Manifest
        /// The services' backups directory, where archives go unless told otherwise.
        var backupsDirectory: String
        var summary: String
    }

    /// Throws ``CLIError``s, each saying what went wrong.
    static func make(connection: ConnectionOptions, name: String?, to: String?, configDir: String, passphraseFile: String?) async throws -> Made {
        var base = name ?? "screentime-\(Self.stamp())"
        for suffix in [".tar", ".sqlite"] where base.hasSuffix(suffix) { base = String(base.dropLast(suffix.count)) }
        // Read first: a passphrase file that is not there stops the backup before it begins.
        let passphrase: Data?
        do {
            passphrase = try passphraseFile.map(ArchiveEncryption.passphrase(file:))
        } catch {
            throw CLIError(.invalidInput, "\(error)")
        }
        // A large database on an SD card may take minutes to copy.
        let aggregator = connection.client(for: "aggregator", atLeast: 3600), push = connection.client(for: "push", atLeast: 3600),
            store = connection.client(for: "store", atLeast: 3600)
        let prefix = base
        // Followers first: their positions in the store's change log are then at most the store copy's.
        let followed = try await Progress.whileWaiting("backing up the aggregator") {
            try await aggregator.call(AggregatorMethods.backup, BackupParams(path: "\(prefix)-aggregator.sqlite"))
        }
        let pushed = try await Progress.whileWaiting("backing up push") { try await push.call(PushMethods.backup, BackupParams(path: "\(prefix)-push.sqlite")) }
        let stored = try await Progress.whileWaiting("backing up the store") { try await store.call(StoreMethods.backup, BackupParams(path: "\(prefix)-store.sqlite")) }
        let copies = [followed.path, pushed.path, stored.path]
        // The copies the services made are not left behind half-archived.
        defer { for copy in copies { try? FileManager.default.removeItem(atPath: copy) } }
        // Each the file asked for, in the one backups directory: root takes nothing else.
        let backupsDirectory = (stored.path as NSString).deletingLastPathComponent
        for (copy, service) in zip(copies, ["aggregator", "push", "store"])
        where copy != (backupsDirectory as NSString).appendingPathComponent("\(prefix)-\(service).sqlite") {
            throw CLIError(.refused, "the \(service) service wrote its copy to \(copy), not where it was asked to: nothing was archived")
        }
        let schema = try await store.call(StoreMethods.schema, Empty()).version

        let backups = (stored.path as NSString).deletingLastPathComponent
        let state = (backups as NSString).deletingLastPathComponent
        let directory = to ?? backups
        // Two backups within one second (the timer's beside one by hand): the later one takes
        // the next second's name rather than fail.
        while name == nil, [".tar", ".tar.enc"].contains(where: { FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent(base + $0)) }) {
            try await Task.sleep(for: .milliseconds(100))
            base = "screentime-\(Self.stamp())"
        }
        let archive = (directory as NSString).appendingPathComponent(base + ".tar")
        let kept = passphrase == nil ? archive : archive + ".enc"
        var files = [("gateway/key.pem", state + "/gateway/key.pem"), ("gateway/certificate.pem", state + "/gateway/certificate.pem")]
        let configuration = (try? FileManager.default.contentsOfDirectory(atPath: configDir)) ?? []
        files += configuration.sorted().map { ("etc/\($0)", (configDir as NSString).appendingPathComponent($0)) }
        let others = files
        for path in [archive, kept] where FileManager.default.fileExists(atPath: path) {
            throw CLIError(.refused, "\(path) already exists; choose another name or move it away")
        }
        let manifest = try await Progress.whileWaiting("writing and checking \(kept)") {
            do {
                let manifest = try ServerArchive.write(
                    to: archive, databases: [("aggregator.sqlite", followed.path, followed.lastSeq), ("push.sqlite", pushed.path, pushed.lastSeq),
                                             ("store.sqlite", stored.path, stored.lastSeq)],
                    files: others, schemaVersion: schema)
                if let passphrase {
                    // Sealed, then opened again and checked; only the sealed one is kept.
                    defer { try? FileManager.default.removeItem(atPath: archive) }
                    do {
                        try ArchiveEncryption.encrypt(archive, to: kept, passphrase: passphrase)
                        _ = try ServerArchive.verify(kept, passphrase: passphrase)
                    } catch {
                        try? FileManager.default.removeItem(atPath: kept)
                        throw error
                    }
                }
                return manifest
            } catch let problem as any ArchiveProblem {
                throw CLIError(.damagedArchive, "the archive was not kept: \(problem)")
            } catch {
                throw CLIError(.cannotWrite, "the archive \(kept) could not be written: \(Self.reason(error))")
            }
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: kept)[.size] as? NSNumber)?.int64Value ?? 0
        let summary = "Backed up the server to \(kept)\(passphrase == nil ? "" : ", encrypted") (\(ByteCountFormatter.string(fromByteCount: bytes, countStyle: .file))): "
            + "the store up to change \(stored.lastSeq), push up to \(pushed.lastSeq), the aggregator up to \(followed.lastSeq); "
            + "\(manifest.files.count) other files (the gateway's key and certificate, configuration)."
        return Made(path: kept, bytes: bytes, encrypted: passphrase != nil, manifest: manifest, backupsDirectory: backups, summary: summary)
    }

    /// `20261128T020000`: the time in UTC, as `backup prune` reads it back.
    static func stamp() -> String {
        Date().formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
    }

    /// An I/O error in words, without Foundation's wrapping ("The operation could not be completed").
    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let posix = (nsError.userInfo[NSUnderlyingErrorKey] as? NSError), posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        if nsError.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(nsError.code))) }
        return error.localizedDescription
    }
}
