import AggregatorAPI
import ArgumentParser
import Foundation
import PushAPI
import StoreAPI

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup", abstract: "Back up the server's databases while they run: the aggregator's, push's, then the store's (consistent SQLite copies).",
        discussion: """
            Each service writes its copy into its own backups directory (<state-dir>/backups; under systemd /var/lib/screentime/backups), never elsewhere: \
            name the store's copy with a plain file name; the others are named after it (NAME-aggregator.sqlite, NAME-push.sqlite). \
            The followers are copied first and the store last, so a restored follower is never ahead of the restored store. Copy the files where you keep backups.
            Example:
              sudo screentimectl backup nightly-$(date +%F).sqlite
            """
    )
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The store's copy's file name in the backups directory (default: store-<UTC time>.sqlite).") var path: String?

    func run() async throws {
        let stamp = Date().formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
        let storeName = self.path ?? "store-\(stamp).sqlite"
        let base = storeName.hasSuffix(".sqlite") ? String(storeName.dropLast(".sqlite".count)) : storeName
        // Followers first: their positions in the store's change log are then at most the store copy's.
        let aggregator = self.connection.client(for: "aggregator"), push = self.connection.client(for: "push"), store = self.connection.client(for: "store")
        let copies = try await Output.orExit {
            let followed = try await Progress.whileWaiting("backing up the aggregator") {
                try await aggregator.call(AggregatorMethods.backup, BackupParams(path: "\(base)-aggregator.sqlite"))
            }
            let pushed = try await Progress.whileWaiting("backing up push") { try await push.call(PushMethods.backup, BackupParams(path: "\(base)-push.sqlite")) }
            let stored = try await Progress.whileWaiting("backing up the store") { try await store.call(StoreMethods.backup, BackupParams(path: storeName)) }
            return [("the aggregator", followed), ("push", pushed), ("the store", stored)]
        }
        for (name, copy) in copies {
            print("Backed up \(name): \(ByteCountFormatter.string(fromByteCount: copy.bytes, countStyle: .file)), up to change \(copy.lastSeq), to \(copy.path) in \(Int(copy.milliseconds)) ms.")
        }
        print("To restore, put all three back together (docs/operations.md, \"Backup and restore\").")
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
