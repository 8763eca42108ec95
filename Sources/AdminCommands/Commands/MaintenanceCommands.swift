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
        subcommands: [Create.self, Verify.self, List.self, Prune.self, Scheduled.self], defaultSubcommand: Create.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "The archives here and in the nightly backup's copy directory, newest first, with their age and size.")
        @Argument(help: "The directories (default: /var/lib/screentime/backups, and the --copy-to of /etc/screentime/backup.env).") var directories: [String] = []
        @Option(help: "The configuration directory, where backup.env is.") var configDir = "/etc/screentime"

        func run() async throws {
            var directories = self.directories
            if directories.isEmpty {
                directories = ["/var/lib/screentime/backups"] + (Self.copyDirectory(configDir: self.configDir).map { [$0] } ?? [])
            }
            for (index, directory) in directories.enumerated() {
                if index > 0 { print("") }
                Self.list(directory, titled: directories.count > 1)
            }
        }

        static func list(_ directory: String, titled: Bool) {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                return print("\(directory) is not there (a backup disk not mounted?).")
            }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".tar") || $0.hasSuffix(".tar.enc") }
            let rows = names.compactMap { name -> (Date, [String])? in
                let path = (directory as NSString).appendingPathComponent(name)
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
                let modified = attributes[.modificationDate] as? Date ?? Date.distantPast
                let bytes = (attributes[.size] as? NSNumber)?.int64Value ?? 0
                return (modified, [name, modified.formatted(date: .abbreviated, time: .shortened), Self.age(modified),
                                   ByteCountFormatter.string(fromByteCount: bytes, countStyle: .file), name.hasSuffix(".enc") ? "yes" : "no"])
            }.sorted { $0.0 > $1.0 }.map(\.1)
            if titled { print("\(directory):") }
            if rows.isEmpty { return print("No backups in \(directory) yet (sudo screentimectl backup makes one).") }
            print(Table.render(["ARCHIVE", "MADE", "AGE", "SIZE", "ENCRYPTED"], rows), terminator: "")
        }

        /// The `--copy-to DIR` of the nightly backup's options, if it has one.
        static func copyDirectory(configDir: String) -> String? {
            guard let text = try? String(contentsOfFile: configDir + "/backup.env", encoding: .utf8) else { return nil }
            for line in text.split(separator: "\n") where line.hasPrefix("OPTIONS=") {
                let words = line.dropFirst("OPTIONS=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\"' ")).split(separator: " ").map(String.init)
                if let index = words.firstIndex(of: "--copy-to"), index + 1 < words.count { return words[index + 1] }
                if let word = words.first(where: { $0.hasPrefix("--copy-to=") }) { return String(word.dropFirst("--copy-to=".count)) }
            }
            return nil
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
        @OptionGroup var retention: RetentionOptions
        @Flag(help: "Say what would be deleted, and delete nothing.") var dryRun = false

        func run() async throws {
            let pruned = try await Output.orExit {
                try self.retention.prune(self.directory, dryRun: self.dryRun)
            }
            let verb = self.dryRun ? "Would delete" : "Deleted"
            print(pruned.deleted.isEmpty ? "Nothing to delete: \(pruned.of) archives, all kept." : "\(verb) \(pruned.deleted.count) of \(pruned.of) archives; kept \(pruned.kept).")
            for name in pruned.deleted { print("  \(name)") }
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
            let made = try await Output.orExit {
                try await ServerBackup.make(connection: self.connection, name: self.name, to: self.to, configDir: self.configDir, passphraseFile: self.passphraseFile)
            }
            print(made.summary)
            print(made.encrypted
                  ? "Checked: opened with the passphrase, every file read back, every database whole. Keep the passphrase apart from it: without it the archive cannot be restored."
                  : "Checked: every file read back, every database whole. It holds the gateway's private key (mode 0600): keep it where only you can read it.")
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
                } catch let problem as any ArchiveProblem {
                    throw CLIError(.damagedArchive, "\(problem)")
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
