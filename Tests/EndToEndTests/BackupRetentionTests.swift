import Foundation
import StackSupport
import Testing
import TestSupport

/// `screentimectl backup prune` and `list`: retention by count over the archives `backup`
/// named itself, the newest of each of the last days, weeks and months; nothing named by
/// hand is touched.
@Suite("Backups: retention by count")
struct BackupRetentionTests {
    @Test("prune keeps the newest archive of each of the last 3 days, 2 ISO weeks and 2 months, and nothing else of its own; an archive named by hand stays; --dry-run deletes nothing")
    func prune() async throws {
        let directory = TemporaryDirectory()
        var made = (1...28).map { String(format: "screentime-202611%02dT030000.tar", $0) }
        made += ["screentime-20261128T150000.tar.enc", "screentime-20261015T030000.tar", "screentime-20260915T030000.tar", "nightly-by-hand.tar", "notes.txt"]
        for name in made { try Data("x".utf8).write(to: URL(fileURLWithPath: directory.file(name))) }
        let ctl = Binaries.path("screentimectl")
        let arguments = ["backup", "prune", directory.path, "--keep-daily", "3", "--keep-weekly", "2", "--keep-monthly", "2"]

        let dry = try await runCommand(ctl, arguments + ["--dry-run"])
        #expect(dry.status == 0 && dry.stdout.hasPrefix("Would delete 26 of 31 archives; kept 5."), "\(dry)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).count == made.count)

        let pruned = try await runCommand(ctl, arguments)
        #expect(pruned.status == 0 && pruned.stdout.hasPrefix("Deleted 26 of 31 archives; kept 5."), "\(pruned)")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(left == ["nightly-by-hand.tar", "notes.txt", "screentime-20261015T030000.tar", "screentime-20261122T030000.tar", "screentime-20261126T030000.tar",
                         "screentime-20261127T030000.tar", "screentime-20261128T150000.tar.enc"], "\(left)")
        let again = try await runCommand(ctl, arguments)
        #expect(again.stdout.hasPrefix("Nothing to delete: 5 archives, all kept."), "\(again)")

        let listed = try await runCommand(ctl, ["backup", "list", directory.path])
        #expect(listed.status == 0 && listed.stdout.contains("screentime-20261128T150000.tar.enc") && listed.stdout.contains("nightly-by-hand.tar")
                && listed.stdout.contains("ENCRYPTED") && !listed.stdout.contains("notes.txt"), "\(listed)")
        let nothing = TemporaryDirectory()
        let empty = try await runCommand(ctl, ["backup", "list", nothing.path])
        #expect(empty.stdout.hasPrefix("No backups in "), "\(empty)")
        let refused = try await runCommand(ctl, ["backup", "prune", directory.path, "--keep-daily=-1"])
        #expect(refused.status != 0 && refused.stderr.contains("0 or more"), "\(refused)")
    }
}
