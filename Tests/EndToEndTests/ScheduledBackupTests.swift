import Foundation
import Glibc
import StackSupport
import Testing
import TestSupport

/// `screentimectl backup scheduled`, what screentime-backup.service runs each night, on a
/// `screentime-dev` stack: the copy elsewhere, retention there, and the parents alerted once
/// per failure streak.
@Suite("Scheduled backups: the copy elsewhere, retention, the parents alerted once", .serialized)
struct ScheduledBackupTests {
    @Test("a missing copy directory fails the night and alerts every parent once, however many nights it lasts; the next success says so, copies, checks and prunes there")
    func failureStreakAndRecovery() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        try await Story(stack).bootstrap()
        let watch = stack.directory.file("parent-watch.txt")
        let watcher = try stack.ctlInBackground("watch", "--profile", "mum", "--seconds", "120", output: watch)
        defer { kill(watcher, SIGKILL); _ = ChildExit.poll(watcher) }
        try await stack.waitUntil("the parent's watch is listening") { StoryTests.read(watch).contains("watching") }

        let etc = stack.directory.file("etc"), nas = stack.directory.file("nas/screentime")
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        try "OPTIONS=\"--copy-to \(nas) --keep-daily 2\"\n".write(toFile: etc + "/backup.env", atomically: true, encoding: .utf8)
        let nightly = ["backup", "scheduled", "--config-dir", etc, "--copy-to", nas, "--keep-daily", "2", "--keep-weekly", "0", "--keep-monthly", "0"]

        // The NAS is not mounted: the night fails, in words, and the parents hear of it once.
        let first = try await stack.ctl(nightly)
        #expect(first.status == 1 && first.stderr.contains("The server's nightly backup failed: the backup disk is not mounted (\(nas) is not there)")
                && first.stdout.contains("The parents were alerted."), "\(first)")
        try await stack.waitUntil("the parent is alerted") { StoryTests.read(watch).contains("ALERT The server's backup failed — The server's nightly backup failed: the backup disk is not mounted") }
        let second = try await stack.ctl(nightly)
        #expect(second.status == 1 && !second.stdout.contains("alerted"), "the same streak: no second alert: \(second)")
        let wordless = try await stack.ctl("call", "aggregator", "aggregator.backupReport", #"{"succeeded":false}"#)
        #expect(wordless.status == 1 && wordless.stderr.contains("invalid_params") && wordless.stderr.contains("a sentence for the parents"), "\(wordless)")
        let failing = try await stack.ctl("call", "aggregator", "aggregator.backupState", "{}")
        #expect(failing.stdout.contains("\"failingSince\"") && failing.stdout.contains("not mounted") && failing.stdout.contains("\"lastSucceeded\":false"), "\(failing)")
        let listedMissing = try await stack.ctl("backup", "list", stack.stack + "/state/backups", nas)
        #expect(listedMissing.stdout.contains("\(nas) is not there"), "\(listedMissing)")

        // Mounted again, with two older archives of this schedule's and one named by hand.
        try FileManager.default.createDirectory(atPath: nas, withIntermediateDirectories: true)
        let older = [2, 3].map { "screentime-\(Self.stamp(daysAgo: $0)).tar" }
        for name in older + ["by-hand.tar"] { try Data("old".utf8).write(to: URL(fileURLWithPath: nas + "/" + name)) }
        let third = try await stack.ctl(nightly)
        #expect(third.status == 0 && third.stdout.contains("Copied to \(nas)/screentime-") && third.stdout.contains("and checked there")
                && third.stdout.contains("The parents were told that backups work again."), "\(third)")
        try await stack.waitUntil("the parent is told") { StoryTests.read(watch).contains("ALERT The server's backups work again") }
        let copies = try FileManager.default.contentsOfDirectory(atPath: nas).sorted()
        #expect(copies.count == 3 && copies.contains("by-hand.tar") && copies.contains(older[0]) && !copies.contains(older[1]), "kept: today's, the newest older day's, the one named by hand: \(copies)")
        let copy = try #require(copies.first { $0.hasPrefix("screentime-") && !older.contains($0) })
        #expect(try await stack.ctl("backup", "verify", nas + "/" + copy).status == 0)
        let state = try await stack.ctl("call", "aggregator", "aggregator.backupState", "{}")
        #expect(state.stdout.contains("\"lastSucceeded\":true") && !state.stdout.contains("failingSince") && state.stdout.contains(copy), "\(state)")
        // A good night after a good night: nobody is told.
        #expect(try await stack.ctl(nightly).stdout.contains("told") == false)
        // backup list shows both places, the copy directory found in backup.env.
        let listed = try await stack.ctl("backup", "list", "--config-dir", etc)
        #expect(listed.stdout.contains("/var/lib/screentime/backups") && listed.stdout.contains("\(nas):") && listed.stdout.contains("by-hand.tar"), "\(listed)")
    }

    static func stamp(daysAgo: Int) -> String {
        Date().addingTimeInterval(-Double(daysAgo) * 86_400)
            .formatted(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
    }
}
