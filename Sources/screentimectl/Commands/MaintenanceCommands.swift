import AggregatorAPI
import ArgumentParser
import Foundation
import PushAPI
import RPCCore
import StoreAPI

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup", abstract: "Back up the whole server while it runs, as one archive (on the server, as root); check an archive.",
        discussion: """
            The archive holds each service's database (the aggregator's and push's copied first, the store's last, so that no restored \
            follower is ahead of the store), the gateway's key and certificate (the pin every device trusts), the configuration directory, \
            and a manifest. It is read back and checked before it is kept; it is written mode 0600: it holds the gateway's private key.
            Examples:
              sudo screentimectl backup        # /var/lib/screentime/backups/screentime-<UTC time>.tar
              sudo screentimectl backup nightly --to /mnt/nas/screentime
              sudo screentimectl backup verify /mnt/nas/screentime/nightly.tar
            """,
        subcommands: [Create.self, Verify.self, List.self, Prune.self], defaultSubcommand: Create.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The archives in a directory, newest first, with their age and size.")
        @Argument(help: "The directory (default: /var/lib/screentime/backups).") var directory = "/var/lib/screentime/backups"

        func run() async throws {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: self.directory)) ?? []).filter { $0.hasSuffix(".tar") || $0.hasSuffix(".tar.enc") }
            let rows = names.compactMap { name -> (Date, [String])? in
                let path = (self.directory as NSString).appendingPathComponent(name)
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
                let modified = attributes[.modificationDate] as? Date ?? Date.distantPast
                let bytes = (attributes[.size] as? NSNumber)?.int64Value ?? 0
                return (modified, [name, modified.formatted(date: .abbreviated, time: .shortened), Self.age(modified),
                                   ByteCountFormatter.string(fromByteCount: bytes, countStyle: .file), name.hasSuffix(".enc") ? "yes" : "no"])
            }.sorted { $0.0 > $1.0 }.map(\.1)
            if rows.isEmpty { return print("No backups in \(self.directory) yet (sudo screentimectl backup makes one).") }
            print(Table.render(["ARCHIVE", "MADE", "AGE", "SIZE", "ENCRYPTED"], rows), terminator: "")
        }

        static func age(_ date: Date) -> String {
            let hours = Int(Date().timeIntervalSince(date) / 3600)
            return hours < 1 ? "under an hour" : hours < 48 ? "\(hours) h" : "\(hours / 24) days"
        }
    }

    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune", abstract: "Delete the archives backup named itself that retention does not keep: the newest of each of the last days, weeks and months.",
            discussion: "Archives named by hand are never deleted, and the newest always stays.\nExample:\n  sudo screentimectl backup prune --keep-daily 7 --keep-weekly 4 --keep-monthly 6")
        @Argument(help: "The directory (default: /var/lib/screentime/backups).") var directory = "/var/lib/screentime/backups"
        @Option(help: "Days to keep the newest archive of.") var keepDaily = 7
        @Option(help: "ISO weeks to keep the newest archive of.") var keepWeekly = 4
        @Option(help: "Months to keep the newest archive of.") var keepMonthly = 6
        @Flag(help: "Say what would be deleted, and delete nothing.") var dryRun = false

        func validate() throws {
            guard [self.keepDaily, self.keepWeekly, self.keepMonthly].allSatisfy({ $0 >= 0 }) else { throw ValidationError("the --keep counts are 0 or more") }
        }

        func run() async throws {
            let archives = BackupRetention.archives(in: self.directory)
            let kept = BackupRetention.keep(archives, daily: self.keepDaily, weekly: self.keepWeekly, monthly: self.keepMonthly)
            let doomed = archives.filter { !kept.contains($0.name) }
            for archive in doomed where !self.dryRun {
                try await Output.orExit {
                    do {
                        try FileManager.default.removeItem(atPath: (self.directory as NSString).appendingPathComponent(archive.name))
                    } catch {
                        throw CLIError(.cannotWrite, "cannot delete \(archive.name): \(error.localizedDescription)")
                    }
                }
            }
            let verb = self.dryRun ? "Would delete" : "Deleted"
            print(doomed.isEmpty ? "Nothing to delete: \(archives.count) archives, all kept." : "\(verb) \(doomed.count) of \(archives.count) archives; kept \(kept.count).")
            for archive in doomed { print("  \(archive.name)") }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Make one archive of the whole server.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The archive's name (default: screentime-<UTC time>); `.tar` is added.") var name: String?
        @Option(help: "Where the archive goes (default: the services' backups directory, <state-dir>/backups).") var to: String?
        @Option(help: "The configuration directory to include.") var configDir = "/etc/screentime"
        @Option(help: "Encrypt the archive with the passphrase in this file (its first line, 8 characters or more): for an archive that leaves the box.")
        var passphraseFile: String?

        func run() async throws {
            let stamp = Date().formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
            var name = self.name ?? "screentime-\(stamp)"
            for suffix in [".tar", ".sqlite"] where name.hasSuffix(suffix) { name = String(name.dropLast(suffix.count)) }
            let base = name
            // Read first: a passphrase file that is not there stops the backup before it begins.
            let passphrase = try await Output.orExit { () async throws -> Data? in
                do {
                    return try self.passphraseFile.map(ArchiveEncryption.passphrase(file:))
                } catch {
                    throw CLIError(.invalidInput, "\(error)")
                }
            }
            let aggregator = self.connection.client(for: "aggregator"), push = self.connection.client(for: "push"), store = self.connection.client(for: "store")
            let (followed, pushed, stored, schema) = try await Output.orExit {
                // Followers first: their positions in the store's change log are then at most the store copy's.
                let followed = try await Progress.whileWaiting("backing up the aggregator") {
                    try await aggregator.call(AggregatorMethods.backup, BackupParams(path: "\(base)-aggregator.sqlite"))
                }
                let pushed = try await Progress.whileWaiting("backing up push") { try await push.call(PushMethods.backup, BackupParams(path: "\(base)-push.sqlite")) }
                let stored = try await Progress.whileWaiting("backing up the store") { try await store.call(StoreMethods.backup, BackupParams(path: "\(base)-store.sqlite")) }
                return (followed, pushed, stored, try await store.call(StoreMethods.schema, Empty()).version)
            }
            let backups = (stored.path as NSString).deletingLastPathComponent
            let state = (backups as NSString).deletingLastPathComponent
            let archive = ((self.to ?? backups) as NSString).appendingPathComponent(base + ".tar")
            let kept = passphrase == nil ? archive : archive + ".enc"
            var files = [("gateway/key.pem", state + "/gateway/key.pem"), ("gateway/certificate.pem", state + "/gateway/certificate.pem")]
            let configuration = (try? FileManager.default.contentsOfDirectory(atPath: self.configDir)) ?? []
            files += configuration.sorted().map { ("etc/\($0)", (self.configDir as NSString).appendingPathComponent($0)) }
            let others = files
            let manifest = try await Output.orExit {
                do {
                    for path in [archive, kept] where FileManager.default.fileExists(atPath: path) {
                        throw CLIError(.refused, "\(path) already exists; choose another name or move it away")
                    }
                    return try await Progress.whileWaiting("writing and checking \(kept)") {
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
                        } catch let failure as ServerArchive.Failure {
                            throw CLIError(.damagedArchive, "the archive was not kept: \(failure)")
                        } catch let failure as ArchiveEncryption.Failure {
                            throw CLIError(.damagedArchive, "the archive was not kept: \(failure)")
                        } catch let error as CLIError {
                            throw error
                        } catch {
                            throw CLIError(.cannotWrite, "the archive \(archive) could not be written: \(error.localizedDescription)")
                        }
                    }
                } catch {
                    // The copies the services made are not left behind half-archived.
                    for copy in [followed.path, pushed.path, stored.path] { try? FileManager.default.removeItem(atPath: copy) }
                    throw error
                }
            }
            let bytes = (try? FileManager.default.attributesOfItem(atPath: kept)[.size] as? NSNumber)?.int64Value ?? 0
            print("Backed up the server to \(kept)\(passphrase == nil ? "" : ", encrypted") (\(ByteCountFormatter.string(fromByteCount: bytes, countStyle: .file))): the store up to change \(stored.lastSeq), "
                  + "push up to \(pushed.lastSeq), the aggregator up to \(followed.lastSeq); \(manifest.files.count) other files (the gateway's key and certificate, configuration).")
            print(passphrase == nil
                  ? "Checked: every file read back, every database whole. It holds the gateway's private key (mode 0600): keep it where only you can read it."
                  : "Checked: opened with the passphrase, every file read back, every database whole. Keep the passphrase apart from it: without it the archive cannot be restored.")
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "verify", abstract: "Check an archive: every file as its manifest says, every database whole.")
        @Argument(help: "The archive (.tar, or .tar.enc).") var archive: String
        @Option(help: "The passphrase file, for an encrypted archive.") var passphraseFile: String?

        func run() async throws {
            let manifest = try await Output.orExit {
                do {
                    let passphrase = try self.passphraseFile.map(ArchiveEncryption.passphrase(file:))
                    if ArchiveEncryption.isEncrypted(self.archive) && passphrase == nil {
                        throw CLIError(.invalidInput, "\(self.archive) is encrypted: give its passphrase file (--passphrase-file)")
                    }
                    return try ServerArchive.verify(self.archive, passphrase: passphrase)
                } catch let error as CLIError {
                    throw error
                } catch let failure as ArchiveEncryption.Failure {
                    throw CLIError(.damagedArchive, "\(failure)")
                } catch let failure as ServerArchive.Failure {
                    throw CLIError(.damagedArchive, "\(failure)")
                } catch {
                    throw CLIError(.damagedArchive, "\(self.archive) cannot be read as a backup: \(error.localizedDescription)")
                }
            }
            let store = manifest.databases.first { $0.path == "databases/store.sqlite" }
            print("\(self.archive) is whole: made \(manifest.createdAt.formatted(date: .abbreviated, time: .shortened)) by version \(manifest.serverVersion) "
                  + "(schema \(manifest.schemaVersion)), the store up to change \(store?.position ?? 0), \(manifest.databases.count) databases, \(manifest.files.count) other files.")
        }
    }
}

struct RecomputeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recompute", abstract: "Rebuild one child's summaries, ledger and balance from the stored records (aggregator.recompute, server administration).",
        discussion: "Example:\n  screentimectl recompute --family smith --child emma"
    )
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The family.") var family: String
    @Option(help: "The child's id.") var child: String

    func run() async throws {
        let aggregator = self.connection.client(for: "aggregator")
        let result = try await Output.orExit {
            try await Progress.whileWaiting("recomputing \(self.child)") {
                try await aggregator.call(AggregatorMethods.recompute, RecomputeParams(family: self.family, child: self.child))
            }
        }
        print("Recomputed \(result.child) from \(result.usageRecords) usage records and \(result.ledgerEntries) ledger entries: \(result.days) days, "
              + (result.daysChanged.isEmpty ? "none changed" : "\(result.daysChanged.count) changed (\(result.daysChanged.prefix(5).joined(separator: ", "))\(result.daysChanged.count > 5 ? ", …" : ""))")
              + (result.balanceSeconds.map { "; earned time \(Table.time($0))" } ?? "") + ".")
    }
}
