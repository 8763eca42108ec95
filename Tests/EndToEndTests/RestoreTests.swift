import Foundation
import Glibc
import GRDB
import ProcessSpawn
import RPCClient
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
        try "a secret kept here by hand\n".write(toFile: etc + "/secret", atomically: true, encoding: .utf8)
        chmod(etc + "/secret", 0o600)
        #expect(try await stack.ctl("backup", "before", "--config-dir", etc).status == 0)
        let archive = stack.stack + "/state/backups/before.tar"

        // Life goes on after the backup: a rule change the tablet hears of (and acknowledges),
        // more usage, a changed option.
        let heard = directory.file("heard-before.txt")
        let listener = try stack.ctlInBackground("watch", "--profile", "emma-tablet", "--count", "1", "--seconds", "60", output: heard)
        try await stack.waitUntil("the tablet listens") { StoryTests.read(heard).contains("watching") }
        #expect(try await stack.ctl("apps", "set", "--profile", "mum", "com.roblox", "--category", "reward").status == 0)
        #expect(try await ChildExit.wait(listener, timeout: .seconds(60)) == 0, "\(StoryTests.read(heard))")
        // Life goes on after the backup: more usage, a changed option.
        #expect(try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--category", "learning", "--minutes", "20", "--start", "\(Self.day)T14:00:00Z").status == 0)
        try await story.waitFor("the day's 50 minutes", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("50m") }
        let after = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone)).token
        try "OPTIONS=--log-level debug\n".write(toFile: etc + "/store.env", atomically: true, encoding: .utf8)
        let passphrase = directory.file("passphrase"), wrong = directory.file("wrong")
        try "correct horse battery staple\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        try "incorrect horse battery staple\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        #expect(try await stack.ctl("backup", "sealed", "--config-dir", etc, "--passphrase-file", passphrase).status == 0)
        let sealed = stack.stack + "/state/backups/sealed.tar.enc"
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

        // A sealed archive without its passphrase, or with the wrong one; a damaged one: refused, nothing touched.
        let unsealed = try await restore([sealed], nil)
        #expect(unsealed.status == 65 && unsealed.stderr.contains("is encrypted: give its passphrase file"), "\(unsealed)")
        let wrongly = try await restore([sealed, "--passphrase-file", wrong], nil)
        #expect(wrongly.status == 65 && wrongly.stderr.contains("nothing was changed") && wrongly.stderr.contains("passphrase"), "\(wrongly)")
        let damaged = directory.file("damaged.tar")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: archive))
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: damaged))
        let refusedDamaged = try await restore([damaged], nil)
        #expect(refusedDamaged.status == 65 && refusedDamaged.stderr.contains("damaged") && refusedDamaged.stderr.contains("nothing was changed"), "\(refusedDamaged)")
        #expect(!FileManager.default.fileExists(atPath: stack.stack + "/state/restore-in-progress"))

        // Killed after moving two files: abandoned, everything is as it was.
        let killed = try await restore([archive], "move-2")
        #expect(killed.status == 128 + SIGKILL, "\(killed)")
        #expect(FileManager.default.fileExists(atPath: stack.stack + "/state/restore-in-progress/plan.json"))
        let other = try await restore([newer], nil)
        #expect(other.status == 1 && other.stderr.contains("is under way") && other.stderr.contains("--abandon"), "another archive meanwhile: \(other)")
        // Putting the data back, killed midway too: run again, it finishes, and what it put
        // back is never taken for the restore's.
        #expect(try await restore(["--abandon"], "undo-4").status == 128 + SIGKILL)
        let resumed = try await restore([], nil)
        #expect(resumed.status == 1 && resumed.stderr.contains("run `screentimectl restore --abandon` again"), "\(resumed)")
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
        let modes = try ["store.env", "secret"].map { (try FileManager.default.attributesOfItem(atPath: etc + "/" + $0)[.posixPermissions] as? NSNumber)?.intValue ?? -1 }
        #expect(modes == [0o644, 0o600], "a file kept secret stays so: \(modes.map { String($0, radix: 8) })")
        for file in ["store.sqlite", "gateway/key.pem"] {
            let mode = (try FileManager.default.attributesOfItem(atPath: stack.stack + "/state/" + file)[.posixPermissions] as? NSNumber)?.intValue
            #expect(mode == 0o600, "\(file): \(String(mode ?? -1, radix: 8))")
        }

        // Numbered beyond anything the lost server can have reached: the store's changes, and
        // each device's notifications (the tablet's queue goes on past what it acknowledged).
        let numbers = try await DatabaseQueue(path: stack.stack + "/state/push.sqlite").read { db in
            try Int64.fetchAll(db, sql: "SELECT last_seq FROM devices UNION ALL SELECT value FROM meta WHERE key = 'seq_floor'")
        }
        #expect(!numbers.isEmpty && numbers.allSatisfy { $0 >= 1 << 32 }, "\(numbers)")
        let head = try await DatabaseQueue(path: stack.stack + "/state/store.sqlite").read { db in
            try Int64.fetchOne(db, sql: "SELECT MAX(IFNULL((SELECT MAX(seq) FROM changes), 0), IFNULL((SELECT value FROM meta WHERE key = 'change_floor'), 0))")
        }
        #expect((head ?? 0) > 1 << 32)

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
        // The tablet acknowledged a notification numbered after the backup: the restored server
        // numbers its next ones beyond it, so the next rule change still reaches the tablet.
        let heardAfter = directory.file("heard-after.txt")
        let listenerAfter = try stack.ctlInBackground("watch", "--profile", "emma-tablet", "--count", "1", "--seconds", "60", output: heardAfter)
        try await stack.waitUntil("the tablet listens again") { StoryTests.read(heardAfter).contains("watching") }
        #expect(try await stack.ctl("apps", "set", "--profile", "mum", "org.wikipedia", "--category", "learning").status == 0)
        #expect(try await ChildExit.wait(listenerAfter, timeout: .seconds(60)) == 0, "a notification after the restore: \(StoryTests.read(heardAfter))")
        #expect(StoryTests.read(heardAfter).contains("ConfigurationCommand"), "\(StoryTests.read(heardAfter))")
        let fresh = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone))
        _ = try await stack.client("store").call(StoreMethods.zoneChanges, ZoneChangesParams(family: "smith", zone: zone, since: fresh.token))
    }

    @Test("an archive an older version made (its store at an older schema) is restored and migrated when the services start")
    func olderArchiveMigrated() async throws {
        // A store as an older version left it: schema 10, a family with its record.
        let old = TemporaryDirectory()
        let store = try await ServiceProcess.start("screentime-stored", service: "store", in: old, arguments: ["--schema-version", "10"])
        let client = RPCClient(configuration: ClientConfiguration(socketPath: store.socketPath))
        _ = try await client.call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
        _ = try await client.call(StoreMethods.modify, ModifyParams(family: "smith", zone: "default",
                                                                    saves: [RecordSave(recordType: "Family", recordName: "smith", fields: ["displayName": "The Smiths"])]))
        let copy = try await client.call(StoreMethods.backup, BackupParams(path: "older.sqlite"))
        await store.stop()

        // Its archive, as that version wrote it.
        let staging = old.file("archive")
        try FileManager.default.createDirectory(atPath: staging + "/databases", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: copy.path, toPath: staging + "/databases/store.sqlite")
        let data = try Data(contentsOf: URL(fileURLWithPath: staging + "/databases/store.sqlite"))
        let sum = try await runCommand("/usr/bin/sha256sum", [staging + "/databases/store.sqlite"]).stdout.split(separator: " ").first.map(String.init) ?? ""
        let manifest: [String: Any] = [
            "format": 1, "serverVersion": "0.7.0", "schemaVersion": 10, "createdAt": "2026-10-01T03:00:00Z", "files": [] as [Any],
            "databases": [["path": "databases/store.sqlite", "bytes": data.count, "sha256": sum, "position": 2] as [String: Any]],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: staging + "/manifest.json"))
        let archive = old.file("older.tar")
        #expect(try await runCommand("/usr/bin/tar", ["-cf", archive, "-C", staging, "."]).status == 0)

        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("stack/state"), withIntermediateDirectories: true)
        let restored = try await runCommand(Binaries.path("screentimectl"), ["restore", archive, "--state-dir", directory.file("stack/state"),
                                                                             "--config-dir", directory.file("etc"), "--services-stopped"])
        #expect(restored.status == 0 && restored.stdout.contains("by version 0.7.0"), "\(restored)")
        let stack = try await DevStack.start(in: directory)
        defer { stack.stopNow() }
        let schema = try await stack.client("store").call(StoreMethods.schema, Empty())
        #expect(schema.version > 10, "migrated on start")
        let family = try #require(try await stack.client("store").call(StoreMethods.fetch, FetchParams(family: "smith", zone: "default", recordNames: ["smith"])).records.first)
        #expect(family.fields["displayName"] == "The Smiths" && family.fields["timeZone"] == "UTC", "the record, with the newer fields' defaults: \(family.fields)")
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
