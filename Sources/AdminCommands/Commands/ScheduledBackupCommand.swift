import AggregatorAPI
import ArgumentParser
import Foundation
import Glibc
import RPCCore

/// How many archives retention keeps: `backup prune` and `backup scheduled`.
struct RetentionOptions: ParsableArguments {
    @Option(help: "Days to keep the newest archive of.") var keepDaily = 7
    @Option(help: "ISO weeks to keep the newest archive of.") var keepWeekly = 4
    @Option(help: "Months to keep the newest archive of.") var keepMonthly = 6

    func validate() throws {
        guard [self.keepDaily, self.keepWeekly, self.keepMonthly].allSatisfy({ $0 >= 0 }) else { throw ValidationError("the --keep counts are 0 or more") }
    }

    func prune(_ directory: String, dryRun: Bool = false) throws -> (deleted: [String], kept: Int, of: Int) {
        try BackupRetention.prune(directory, daily: self.keepDaily, weekly: self.keepWeekly, monthly: self.keepMonthly, dryRun: dryRun)
    }
}

extension BackupCommand {
    struct Scheduled: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "scheduled", abstract: "What screentime-backup.service runs each night: a backup, retention, and a copy elsewhere; a failure alerts the parents.",
            discussion: """
                Makes an archive in the backups directory, deletes the ones retention does not keep there, then, with --copy-to, copies \
                the new one there, checks the copy and applies the same retention there. The outcome goes to the journal (a failure at \
                priority err) and to the aggregator: the first failure of a streak alerts every parent, and the first success after one \
                says so. The dashboard's Settings show the last backup. Options come from /etc/screentime/backup.env (OPTIONS=).
                Example:
                  sudo screentimectl backup scheduled --copy-to /mnt/nas/screentime --keep-daily 14
                """)
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var retention: RetentionOptions
        @Option(help: "A directory to copy each archive to as well (a NAS mount, a USB disk): it must exist, and is never made.") var copyTo: String?
        @Option(help: "The configuration directory to include.") var configDir = "/etc/screentime"
        @Option(help: "Encrypt the archives with the passphrase in this file.") var passphraseFile: String?

        func run() async throws {
            var report = BackupReport(succeeded: false)
            do {
                let made = try await ServerBackup.make(connection: self.connection, name: nil, to: nil, configDir: self.configDir, passphraseFile: self.passphraseFile)
                print(made.summary)
                report.archive = (made.path as NSString).lastPathComponent
                report.bytes = made.bytes
                try Self.say(pruned: self.retention.prune(made.backupsDirectory), in: made.backupsDirectory)
                Self.removeLeftovers(in: made.backupsDirectory)
                if let copyTo = self.copyTo {
                    try self.copy(made, to: copyTo)
                    report.copiedTo = copyTo
                    try Self.say(pruned: self.retention.prune(copyTo), in: copyTo)
                }
                report.succeeded = true
            } catch {
                report.problem = Self.problem(error, copyTo: self.copyTo)
                Self.logError("The server's nightly backup failed: \(report.problem ?? "") (\(error))")
            }
            do {
                let state = try await self.connection.client(for: "aggregator").call(AggregatorMethods.backupReport, report)
                if state.parentsAlerted == true { print(report.succeeded ? "The parents were told that backups work again." : "The parents were alerted.") }
            } catch {
                Self.logError("The parents could not be told how the backup went: \(error)")
            }
            if !report.succeeded { throw ExitCode(1) }
        }

        /// The new archive copied into `directory` (a partial file renamed when whole), then
        /// read back from there and checked.
        private func copy(_ made: ServerBackup.Made, to directory: String) throws {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else { throw CopyFailure.missing }
            let name = (made.path as NSString).lastPathComponent
            let target = (directory as NSString).appendingPathComponent(name), partial = target + ".partial"
            try? FileManager.default.removeItem(atPath: partial)
            do {
                try FileManager.default.copyItem(atPath: made.path, toPath: partial)
                chmod(partial, 0o600)
                let handle = try FileHandle(forUpdating: URL(fileURLWithPath: partial))
                try handle.synchronize()
                try handle.close()
                guard rename(partial, target) == 0 else { throw CopyFailure.io(String(cString: strerror(errno))) }
            } catch let failure as CopyFailure {
                try? FileManager.default.removeItem(atPath: partial)
                throw failure
            } catch {
                try? FileManager.default.removeItem(atPath: partial)
                throw CopyFailure.io(ServerBackup.reason(error))
            }
            let passphrase = try self.passphraseFile.map(ArchiveEncryption.passphrase(file:))
            do {
                _ = try ServerArchive.verify(target, passphrase: passphrase)
            } catch {
                try? FileManager.default.removeItem(atPath: target)
                throw CopyFailure.damaged("\(error)")
            }
            print("Copied to \(target), and checked there.")
        }

        enum CopyFailure: Error, CustomStringConvertible {
            case missing
            case io(String)
            case damaged(String)

            var description: String {
                switch self {
                case .missing: "the copy directory is not there"
                case .io(let reason): "the copy could not be written: \(reason)"
                case .damaged(let reason): "the copy is damaged: \(reason)"
                }
            }
        }

        /// What failed, as the parents' alert says it.
        static func problem(_ error: any Error, copyTo: String?) -> String {
            let disk = "the backup disk"
            switch error {
            case CopyFailure.missing: return "\(disk) is not mounted (\(copyTo ?? "the copy directory") is not there)"
            case CopyFailure.io(let reason): return reason.contains("space") ? "\(disk) is full" : "\(disk) cannot be written (\(reason))"
            case CopyFailure.damaged: return "the copy on \(disk) is damaged"
            case let error as CLIError where error.message.contains("No space left"): return "the server's disk is full"
            case let error as CLIError: return "the backup could not be made (\(error.message))"
            case let error as RPCError: return "a service of the server did not answer (\(error.message))"
            default: return "the backup could not be made (\(error))"
            }
        }

        /// What a backup killed midway left (a partial archive, a service's copy) more than a
        /// day ago: never what one running now is writing.
        static func removeLeftovers(in directory: String) {
            let dayAgo = Date().addingTimeInterval(-86_400)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            where name.hasPrefix("screentime-") && [".tar.partial", "-store.sqlite", "-push.sqlite", "-aggregator.sqlite"].contains(where: name.hasSuffix) {
                let path = (directory as NSString).appendingPathComponent(name)
                if let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date, modified < dayAgo {
                    try? FileManager.default.removeItem(atPath: path)
                }
            }
        }

        static func say(pruned: (deleted: [String], kept: Int, of: Int), in directory: String) {
            guard !pruned.deleted.isEmpty else { return }
            print("Deleted \(pruned.deleted.count) older archives from \(directory) (kept \(pruned.kept)): \(pruned.deleted.joined(separator: ", ")).")
        }

        /// On stderr; under systemd, at the journal's priority err (sd-daemon(3)'s prefix).
        static func logError(_ line: String) {
            let prefix = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] == nil ? "" : "<3>"
            FileHandle.standardError.write(Data((prefix + line + "\n").utf8))
        }
    }
}
