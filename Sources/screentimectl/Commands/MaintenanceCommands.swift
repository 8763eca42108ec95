import AggregatorAPI
import ArgumentParser
import Foundation
import StoreAPI

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup", abstract: "Back up the record store while it runs (store.backup): a consistent SQLite copy.",
        discussion: "The store service writes the file into its own backups directory (<state-dir>/backups; under systemd /var/lib/screentime/backups), never elsewhere: name it with a plain file name, then copy it where you keep backups.\nExample:\n  sudo screentimectl backup nightly-$(date +%F).sqlite"
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The backup's file name in the store's backups directory (default: store-<UTC time>.sqlite).") var path: String?

    func run() async throws {
        let store = self.connection.client(for: "store")
        let result = try await Output.orExit {
            try await Progress.whileWaiting("backing up the store") { try await store.call(StoreMethods.backup, BackupParams(path: self.path)) }
        }
        print("Backed up \(ByteCountFormatter.string(fromByteCount: result.bytes, countStyle: .file)) up to change \(result.lastSeq) to \(result.path) in \(Int(result.milliseconds)) ms.")
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
