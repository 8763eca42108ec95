import ArgumentParser
import Foundation
import Glibc
import RPCCore

struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Put the server in a backup archive in place of this one (on the server, as root), every device still paired.",
        discussion: """
            The archive is checked first; one made by a newer version is refused. Then the services and their sockets stop, the \
            files here that the archive replaces are moved aside (into <state-dir>/before-restore-<time>, kept), the archive's \
            databases, the gateway's key and certificate and the configuration files go in their place, and everything starts \
            again and is checked. Killed at any point, running the command again finishes the restore (--abandon puts the data \
            that was moved aside back instead). Devices keep their pairing; each fetches its records again once.
            Examples:
              sudo screentimectl restore /var/lib/screentime/backups/screentime-20261128T020000.tar
              sudo screentimectl restore /mnt/usb/offsite.tar.enc --passphrase-file /root/backup-passphrase
              sudo screentimectl restore --abandon
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The archive (.tar, or .tar.enc). Not needed to finish or abandon a restore that was interrupted.") var archive: String?
    @Option(help: "The passphrase file, for an encrypted archive.") var passphraseFile: String?
    @Option(help: "The services' state directory.") var stateDir = "/var/lib/screentime"
    @Option(help: "The configuration directory.") var configDir = "/etc/screentime"
    @Flag(help: "Where systemd does not run them: the services are stopped already, and are started again by you afterwards.") var servicesStopped = false
    @Flag(help: "Put back the data an interrupted restore moved aside, instead of finishing it.") var abandon = false

    func run() async throws {
        try await Output.orExit {
            do {
                try await self.restore()
            } catch let failure as ServerRestore.Failure {
                throw CLIError(.refused, failure.description)
            } catch let problem as any ArchiveProblem {
                throw CLIError(.damagedArchive, "nothing was changed: \(problem)")
            } catch let failure as ServerUnits.Failure {
                throw CLIError(.refused, "\(failure); run the restore again to finish it, or with --abandon to put the data back")
            }
        }
    }

    private func restore() async throws {
        let state = (self.stateDir as NSString).standardizingPath, config = (self.configDir as NSString).standardizingPath
        let restore = ServerRestore(state: state, config: config)
        let systemd = !self.servicesStopped
        if systemd && !ServerUnits.systemdIsRunning {
            throw CLIError(.refused, "systemd does not run this machine: stop the services yourself (a screentime-dev stack: Ctrl-C), "
                           + "run this again with --services-stopped, then start them")
        }
        guard FileManager.default.fileExists(atPath: state) else {
            throw CLIError(.invalidInput, "\(state) does not exist: give the services' state directory (--state-dir), or install the server first")
        }
        let pending = try restore.pendingPlan()

        if self.abandon {
            guard var plan = pending else { throw CLIError(.refused, "no restore is under way in \(state): there is nothing to abandon") }
            guard plan.phase != .started else {
                throw CLIError(.refused, "the services have run on the restored data already (devices may hold its new numbers): "
                               + "finish with `screentimectl restore`, or restore the archive you want instead")
            }
            plan.phase = .abandoning
            try restore.save(plan)
            try restore.hold()
            if systemd { try ServerUnits.stopAll(alsoTimer: false) }
            try restore.undo(plan) { Self.halt(at: "undo-\($0)") }
            restore.finish()
            if systemd { try ServerUnits.startAll(alsoTimer: plan.timerWasActive) }
            print("Abandoned the restore of \(plan.archive): the data it had moved aside is back in place.")
            return
        }

        var plan: ServerRestore.Plan
        if let pending {
            guard pending.phase != .abandoning else {
                throw CLIError(.refused, "putting the data back from the restore of \(pending.archive) was interrupted: run `screentimectl restore --abandon` again to finish it")
            }
            if let archive = self.archive, Self.absolute(archive) != pending.archive {
                throw CLIError(.refused, "a restore of \(pending.archive) is under way (begun \(pending.startedAt.formatted(date: .abbreviated, time: .shortened))): "
                               + "run `screentimectl restore` again to finish it, or `screentimectl restore --abandon` to put the data back, then restore \(archive)")
            }
            Progress.note("Finishing the restore of \(pending.archive), begun \(pending.startedAt.formatted(date: .abbreviated, time: .shortened)).")
            plan = pending
        } else {
            guard let archive = self.archive.map(Self.absolute) else {
                throw ValidationError("give the archive to restore (screentimectl backup list shows them)")
            }
            guard FileManager.default.fileExists(atPath: archive) else { throw CLIError(.invalidInput, "\(archive) does not exist") }
            let passphrase: Data?
            do {
                passphrase = try self.passphraseFile.map(ArchiveEncryption.passphrase(file:))
            } catch {
                throw CLIError(.invalidInput, "\(error)")
            }
            if ArchiveEncryption.isEncrypted(archive) && passphrase == nil {
                throw CLIError(.invalidInput, "\(archive) is encrypted: give its passphrase file (--passphrase-file)")
            }
            let timerWasActive = systemd && ServerUnits.isActive(ServerUnits.backupTimer)
            plan = try await Progress.whileWaiting("checking and unpacking \(archive)") {
                try restore.stage(archive: archive, passphrase: passphrase, timerWasActive: timerWasActive)
            }
            Self.halt(at: "staged")
        }

        let timer = plan.timerWasActive
        if plan.phase == .staged {
            // Held first: a power cut from here on starts no service on half-moved files.
            try restore.hold()
            if systemd {
                try await Progress.whileWaiting("stopping the services and their sockets") { try ServerUnits.stopAll(alsoTimer: timer) }
            }
            try restore.swap(&plan) { Self.halt(at: "move-\($0)") }
            Self.halt(at: "swapped")
        }
        restore.release()
        if plan.phase != .started {
            plan.phase = .started
            try restore.save(plan)
        }
        if systemd {
            try await Progress.whileWaiting("starting the services") { try ServerUnits.startAll(alsoTimer: timer) }
            for service in ServerUnits.services where service != "gateway" {
                let client = self.connection.client(for: service, atLeast: 60)
                do {
                    _ = try await client.call(Builtin.ping, Empty())
                } catch {
                    throw CLIError(.refused, "the restored \(service) service does not answer (\(error)): see journalctl -u screentime-\(service); "
                                   + "run the restore again once it is fixed")
                }
            }
        }
        restore.finish()

        let store = plan.manifest.databases.first { $0.path == "databases/store.sqlite" }
        print("Restored the server from \(plan.archive), made \(plan.manifest.createdAt.formatted(date: .abbreviated, time: .shortened)) "
              + "by version \(plan.manifest.serverVersion): the store up to change \(store?.position ?? 0), the gateway's key and certificate "
              + "(the same pin: every device stays paired), \(plan.manifest.files.filter { $0.path.hasPrefix("etc/") }.count) configuration files.")
        print("What it replaced is in \(plan.aside): delete it when all is well.")
        print(systemd ? "Every service answers. Each device fetches its records again once, by itself."
                      : "Start the services again; each device fetches its records again once, by itself.")
    }

    static func absolute(_ path: String) -> String {
        ((path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path) as NSString).standardizingPath
    }

    /// For the tests of a restore killed midway: SCREENTIME_RESTORE_KILL_AT=<step> (staged,
    /// move-<n>, swapped, undo-<n>) has the process send itself SIGKILL there.
    private static func halt(at step: String) {
        guard ProcessInfo.processInfo.environment["SCREENTIME_RESTORE_KILL_AT"] == step else { return }
        kill(getpid(), SIGKILL)
    }
}
