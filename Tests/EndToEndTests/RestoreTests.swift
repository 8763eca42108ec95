import Foundation
import Glibc
import ProcessSpawn
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// `screentimectl restore` on a `screentime-dev` stack's data (`--services-stopped`: no
/// systemd here; the systemd tests restore an installed server).
@Suite("Restoring the whole server from its archive", .serialized)
struct RestoreTests {
    static let day = "2026-11-20"

    @Test("a restore killed midway is finished by running it again, or abandoned with the data put back; the restored server has the same pin and devices, and every older change token expires")
    func restoreKilledFinishedAndAbandoned() async throws {
        let directory = TemporaryDirectory()
        var stack = try await DevStack.start(in: directory)
        defer { stack.stopNow() }
        let story = Story(stack)
        try await story.bootstrap()
        let (invitation, _) = try await story.pair()
        #expect(try await stack.ctl("child", "confirm", "--profile", "mum", invitation).status == 0)
        #expect(try await stack.ctl("apps", "set", "--profile", "mum", "org.khan", "--category", "learning", "--points-per-minute", "2").status == 0)
        let first = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--category", "learning", "--minutes", "30", "--start", "\(Self.day)T12:00:00Z")
        #expect(first.status == 0, "\(first)")
        try await story.waitFor("the day's 30 minutes", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("30m") }
        let pin = try await stack.ctl("gateway", "pin", "--state-dir", stack.stack + "/state")
        #expect(pin.status == 0, "\(pin)")
        let zone = try #require(try await stack.client("store").call(StoreMethods.listZones, FamilyParams(family: "smith")).zones.first?.name)
        let before = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone)).token

        let etc = directory.file("etc")
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        try "OPTIONS=--log-level info\n".write(toFile: etc + "/store.env", atomically: true, encoding: .utf8)
        #expect(try await stack.ctl("backup", "before", "--config-dir", etc).status == 0)
        let archive = stack.stack + "/state/backups/before.tar"

        // Life goes on after the backup: more usage, a changed option.
        #expect(try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--category", "learning", "--minutes", "20", "--start", "\(Self.day)T14:00:00Z").status == 0)
        try await story.waitFor("the day's 50 minutes", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("50m") }
        let after = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone)).token
        try "OPTIONS=--log-level debug\n".write(toFile: etc + "/store.env", atomically: true, encoding: .utf8)
        #expect(try await stack.interrupt() == 0)

        let restore = { (arguments: [String], killAt: String?) in
            try await runCommand(Binaries.path("screentimectl"), ["restore", "--state-dir", stack.stack + "/state", "--config-dir", etc, "--services-stopped"] + arguments,
                                 environment: stack.ctlEnvironment.merging(killAt.map { ["SCREENTIME_RESTORE_KILL_AT": $0] } ?? [:]) { _, new in new })
        }
        // Without --services-stopped on a machine systemd does not run: refused, nothing touched.
        let unmanaged = try await runCommand(Binaries.path("screentimectl"), ["restore", archive, "--state-dir", stack.stack + "/state"], environment: stack.ctlEnvironment)
        if !FileManager.default.fileExists(atPath: "/run/systemd/system") {
            #expect(unmanaged.status == 1 && unmanaged.stderr.contains("--services-stopped"), "\(unmanaged)")
        }
        // An archive a newer version made: refused, saying what to install.
        let newer = try await Self.rewriteManifest(of: archive, in: directory) { $0["serverVersion"] = "99.0.0" }
        let refused = try await restore([newer], nil)
        #expect(refused.status == 1 && refused.stderr.contains("made by version 99.0.0") && refused.stderr.contains("install version 99.0.0 or later"), "\(refused)")

        // Killed after moving two files: abandoned, everything is as it was.
        let killed = try await restore([archive], "move-2")
        #expect(killed.status == 128 + SIGKILL, "\(killed)")
        #expect(FileManager.default.fileExists(atPath: stack.stack + "/state/restore-in-progress/plan.json"))
        let other = try await restore([newer], nil)
        #expect(other.status == 1 && other.stderr.contains("is under way") && other.stderr.contains("--abandon"), "another archive meanwhile: \(other)")
        let abandoned = try await restore(["--abandon"], nil)
        #expect(abandoned.status == 0 && abandoned.stdout.contains("Abandoned the restore"), "\(abandoned)")
        #expect(try String(contentsOfFile: etc + "/store.env", encoding: .utf8).contains("debug"))
        stack = try await DevStack.start(in: directory)
        try await Story(stack).waitFor("the 50 minutes still there", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("50m") }
        #expect(try await stack.interrupt() == 0)

        // Killed after moving three files, then run again: finished.
        #expect(try await restore([archive], "move-3").status == 128 + SIGKILL)
        let finished = try await restore([], nil)
        #expect(finished.status == 0 && finished.stderr.contains("Finishing the restore") && finished.stdout.contains("Restored the server from \(archive)"), "\(finished)")
        #expect(!FileManager.default.fileExists(atPath: stack.stack + "/state/restore-in-progress"))
        let aside = try #require(try FileManager.default.contentsOfDirectory(atPath: stack.stack + "/state").first { $0.hasPrefix("before-restore-") })
        #expect(FileManager.default.fileExists(atPath: stack.stack + "/state/\(aside)/store.sqlite"), "what it replaced is kept")
        #expect(try String(contentsOfFile: etc + "/store.env", encoding: .utf8).contains("info"), "the configuration as it was backed up")

        stack = try await DevStack.start(in: directory)
        let restoredStory = Story(stack)
        let pinAfter = try await stack.ctl("gateway", "pin", "--state-dir", stack.stack + "/state")
        #expect(Self.pinLine(pinAfter.stdout) == Self.pinLine(pin.stdout) && Self.pinLine(pin.stdout) != nil, "the same key, the same pin: \(pin.stdout) \(pinAfter.stdout)")
        try await restoredStory.waitFor("the day as it was backed up", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("30m") && !$0.contains("50m") }
        // Both devices are still paired: the child's credential works, the parent's too.
        #expect(try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--category", "learning", "--minutes", "10", "--start", "\(Self.day)T16:00:00Z").status == 0)
        try await restoredStory.waitFor("the new usage counted", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("40m") }
        // Change tokens from before the restore, behind or ahead of the restored store: expired.
        for token in [before, after] {
            do {
                _ = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone, since: token))
                Issue.record("a token from before the restore was accepted")
            } catch {
                #expect(error.code == .changeTokenExpired, "\(error)")
            }
        }
        let fresh = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone))
        _ = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone, since: fresh.token))
    }

    static func pinLine(_ output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix("pin: ") }.map(String.init)
    }

    /// A copy of `archive` whose manifest `change` rewrote (the files as they were).
    static func rewriteManifest(of archive: String, in directory: TemporaryDirectory, _ change: (inout [String: Any]) -> Void) async throws -> String {
        let unpacked = directory.file("unpacked-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(atPath: unpacked, withIntermediateDirectories: true)
        #expect(try await runCommand("/usr/bin/tar", ["-xf", archive, "-C", unpacked]).status == 0)
        var manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: unpacked + "/manifest.json"))) as? [String: Any] ?? [:]
        change(&manifest)
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: unpacked + "/manifest.json"))
        let copy = unpacked + ".tar"
        #expect(try await runCommand("/usr/bin/tar", ["-cf", copy, "-C", unpacked, "."]).status == 0)
        return copy
    }
}
