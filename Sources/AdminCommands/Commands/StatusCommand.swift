import AggregatorAPI
import ArgumentParser
import Foundation
import PairingAPI
import RPCCore
import ServerStatus

/// `screentimectl status`: the server at a glance, for whoever runs it (the dashboard's
/// Settings show the same to admin parents).
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether the server is healthy: each service's state, the devices connected, disk, certificate, last backup.",
        discussion: """
            Each service writes its state to <runtime-dir>/status/<service>.json when it \
            starts and when it ends; this reads those files and connects to no service's \
            socket (which would start a resting one), except the aggregator's, for the \
            backups (--no-backup leaves it be). A service that exited because it was idle is \
            healthy: systemd starts it on the next connection.

            Exit status: 0 when everything is working; 1 when something needs attention (a \
            service failed, the disk is nearly full, the nightly backups fail).
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("The services' state directory.", discussion: "Default: $SCREENTIME_STATE_DIR, else .screentime/state when screentime-dev up runs here, else /var/lib/screentime.", valueName: "dir"))
    var stateDirectory: String?

    @Flag(name: .customLong("no-backup"), help: "Do not ask the aggregator for the backups (it would start if it rests).")
    var noBackup = false

    @Flag(help: "Print the status as JSON.") var json = false

    func run() async throws {
        let runtime = (self.connection.socketPath(for: "store") as NSString).deletingLastPathComponent
        let state = StateDirectoryOption.resolve(self.stateDirectory)
        var report = ServerStatus.report(runtimeDirectory: runtime, stateDirectory: state)
        if !self.noBackup {
            let client = self.connection.client(for: "aggregator")
            report.backup = try? await client.call(AggregatorMethods.backupState, Empty(), timeout: .seconds(5))
            await client.close()
        }
        let attention = Self.needsAttention(report)
        if self.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            print(String(decoding: (try? encoder.encode(report)) ?? Data(), as: UTF8.self))
        } else {
            print(Self.text(report, attention: attention, stateDirectory: state))
            if !FileManager.default.fileExists(atPath: ServiceRunState.directory(runtimeDirectory: runtime)) {
                print("\nNo service has started since the server booted (they start on their first connection), or \(runtime) is not this server's runtime directory (--runtime-dir).")
            }
        }
        if !attention.isEmpty { throw ExitCode(1) }
    }

    /// What needs the administrator, in sentences; empty when everything works.
    static func needsAttention(_ report: ServerStatusReport) -> [String] {
        var problems = report.services.filter { $0.state == .failed }.map { "\($0.displayName) failed." }
        if let disk = report.disk, disk.isLow { problems.append("The disk is nearly full.") }
        if report.backup?.failingSince != nil { problems.append("The nightly backups fail.") }
        return problems
    }

    static func text(_ report: ServerStatusReport, attention: [String], stateDirectory: String) -> String {
        // What a user outside the screentime group cannot read (the state directory is 0750).
        let unreadable = access(stateDirectory, R_OK | X_OK) != 0 && FileManager.default.fileExists(atPath: stateDirectory)
        let asMember = "cannot read \(stateDirectory): run as root or as a member of the screentime group"
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_GB")
        formatter.dateFormat = "d MMM yyyy, HH:mm"
        let time = { (date: Date) in formatter.string(from: date) }
        var lines = ["ScreenTime Rewards Server \(report.version): " + (attention.isEmpty ? "everything is working." : "something needs attention."), ""]
        let width = report.services.map(\.displayName.count).max() ?? 0
        for service in report.services {
            lines.append("  " + service.displayName.padding(toLength: width + 2, withPad: " ", startingAt: 0) + service.sentence(time: time, pid: true))
        }
        lines.append("")
        if let connected = report.devicesConnected {
            lines.append("Devices connected now: \(connected).")
        } else {
            lines.append("Devices connected now: none (the gateway is not running).")
        }
        if let disk = report.disk {
            lines.append("Disk under \(disk.path): \(disk.sentence)" + (disk.isLow ? " Make room: the server stops saving when it is full." : ""))
        } else if unreadable {
            lines.append("Disk: \(asMember).")
        }
        if let expiry = report.certificateNotValidAfter {
            lines.append("Gateway certificate: valid until \(time(expiry)); renewed by itself before then.")
        } else {
            lines.append(unreadable ? "Gateway certificate: \(asMember)." : "Gateway certificate: none yet (the gateway has not started).")
        }
        if let backup = report.backup {
            if let since = backup.failingSince {
                lines.append("Backups: failing since \(time(Date(timeIntervalSince1970: Double(since) / 1000))): \(backup.problem ?? "see journalctl -u screentime-backup").")
            }
            if let success = backup.lastSuccessAt {
                let size = backup.bytes.map { ", " + ByteCountFormatter.string(fromByteCount: $0, countStyle: .file) } ?? ""
                lines.append("Last backup: \(time(Date(timeIntervalSince1970: Double(success) / 1000)))\(size)\(backup.copiedTo.map { ", copied to \($0)" } ?? "").")
            } else if backup.lastRunAt == nil {
                lines.append("Last backup: none yet (screentime-backup.timer makes one each night; sudo screentimectl backup makes one now).")
            }
        } else {
            lines.append("Last backup: not asked (--no-backup), or the aggregator did not answer.")
        }
        for problem in attention where !problem.isEmpty { lines.append("! " + problem) }
        return lines.joined(separator: "\n")
    }
}

/// `--state-dir`: the option, else `$SCREENTIME_STATE_DIR`, else a `screentime-dev up`
/// stack's here, else `/var/lib/screentime`.
enum StateDirectoryOption {
    static func resolve(_ option: String?) -> String {
        let environment = ProcessInfo.processInfo.environment
        let devState = URL(fileURLWithPath: environment["SCREENTIME_DEV_DIR"] ?? ".screentime").appendingPathComponent("state").standardizedFileURL.path
        return option ?? environment["SCREENTIME_STATE_DIR"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (FileManager.default.fileExists(atPath: devState) ? devState : "/var/lib/screentime")
    }
}
