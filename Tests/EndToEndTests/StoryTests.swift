import Foundation
import Glibc
import StackSupport
import Testing
import TestSupport

/// The brief's flows end to end: the stack started by `screentime-dev up`, and every step
/// driven through `screentimectl` subprocesses, a parent's profile and a child's.
@Suite("The whole story through screentimectl, parent and child as separate devices", .serialized)
struct StoryTests {
    static let day = "2026-11-20"

    @Test("bootstrap, pairing with the short code, a rule reaching the child, usage reaching the parent, a shield and its lifting, revocation")
    func wholeStory() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let story = Story(stack)

        // 1. Bootstrap.
        try await story.bootstrap()

        // 2. Pairing: the parent's invite waits, the child accepts, both show the same code.
        let (invitation, childDevice) = try await story.pair()
        let early = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--minutes", "5", "--category", "learning", "--start", "\(Self.day)T09:00:00Z")
        #expect(early.status == 1 && early.stderr.contains("pairing_unconfirmed"), "before confirmation: \(early)")
        let confirmed = try await stack.ctl("child", "confirm", "--profile", "mum", invitation)
        #expect(confirmed.status == 0 && confirmed.stdout.contains("confirmed"), "\(confirmed)")
        let devices = try await stack.ctl("devices", "--profile", "mum")
        #expect(devices.stdout.contains(childDevice) && devices.stdout.split(separator: "\n").contains { $0.contains(childDevice) && $0.contains("active") }, "\(devices.stdout)")

        // The parent watches from here on.
        let parentWatch = stack.directory.file("parent-watch.txt")
        let parentWatcher = try stack.ctlInBackground("watch", "--profile", "mum", "--seconds", "120", output: parentWatch)
        defer { kill(parentWatcher, SIGKILL); _ = ChildExit.poll(parentWatcher) }
        try await stack.waitUntil("the parent's watch is listening") { Self.read(parentWatch).contains("watching") }

        // 3. A rule change reaches the child as a notification and a pending command: the
        //    server's one configuration, with every rule, whoever saved them.
        let childWatch = stack.directory.file("child-watch.txt")
        let childWatcher = try stack.ctlInBackground("watch", "--profile", "emma-tablet", "--count", "1", "--seconds", "60", output: childWatch)
        try await stack.waitUntil("the child's watch is listening") { Self.read(childWatch).contains("watching") }
        #expect(try await stack.ctl("apps", "set", "--profile", "mum", "org.khan", "--category", "learning", "--points-per-minute", "2").status == 0)
        #expect(try await stack.ctl("apps", "set", "--profile", "mum", "com.roblox", "--category", "reward").status == 0)
        #expect(try await ChildExit.wait(childWatcher, timeout: .seconds(30)) == 0)
        #expect(Self.read(childWatch).contains("ConfigurationCommand"), "\(Self.read(childWatch))")
        try await story.waitFor("both rules in the child's pending configuration", "commands", "--profile", "emma-tablet") {
            $0.contains("applyConfiguration") && $0.contains("org.khan") && $0.contains("com.roblox")
        }
        let applied = try await stack.ctl("commands", "apply", "--profile", "emma-tablet")
        #expect(applied.stdout.contains("org.khan is learning, 2 points/min") && applied.stdout.contains("com.roblox is reward"), "\(applied)")
        #expect(try await stack.ctl("commands", "--profile", "emma-tablet").stdout.contains("No pending commands"))
        // The parent sees that the tablet has the family's rules.
        try await story.waitFor("the tablet's rules up to date, and the version it runs", "devices", "--profile", "mum") {
            $0.split(separator: "\n").contains { $0.contains(childDevice) && $0.contains("up to date") && $0.contains("screentimectl ") }
        }
        // The parent's own watch holds its connection open: connected now; the tablet, whose
        // watch ended, is not.
        try await story.waitFor("the parent's phone connected now", "devices", "--profile", "mum") { table in
            let rows = table.split(separator: "\n")
            return rows.contains { $0.contains(" admin ") && $0.contains("connected now") } && !rows.contains { $0.contains(childDevice) && $0.contains("connected now") }
        }
        // Asking again: the same configuration, applied again.
        let resynced = try await stack.ctl("commands", "resync", "--profile", "emma-tablet")
        #expect(resynced.status == 0 && resynced.stdout.contains("org.khan is learning, 2 points/min"), "\(resynced)")

        // 4. Usage reaches the parent's summary, ledger and balance: one session, then a CSV.
        let added = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--minutes", "30", "--start", "\(Self.day)T12:00:00Z")
        #expect(added.status == 0, "\(added)")
        let csv = stack.directory.file("sessions.csv")
        try "app,start,end\norg.khan,\(Self.day)T13:00:00Z,\(Self.day)T13:15:00Z\norg.khan,\(Self.day)T14:00:00Z,\(Self.day)T14:15:00Z\n".write(toFile: csv, atomically: true, encoding: .utf8)
        let imported = try await stack.ctl("usage", "import", "--profile", "emma-tablet", csv)
        #expect(imported.status == 0 && imported.stdout.contains("Imported 2 sessions") && imported.stderr.contains("uploaded: 2/2"), "\(imported)")
        try await story.waitFor("the day's summary", "summary", "--profile", "mum", "--child", "emma", "--day", Self.day) { $0.contains("1h 00m") && $0.contains("120") }
        try await story.waitFor("the balance", "balance", "--profile", "mum", "--child", "emma") { $0.contains("2h 00m") && $0.contains("120") }
        #expect(try await stack.ctl("ledger", "--profile", "mum", "--child", "emma").stdout.contains("accrual"))
        // A session that would end three hours from now (a clock set ahead): refused, saying why.
        let ahead = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3 * 3600))
        let future = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--minutes", "10", "--start", ahead)
        #expect(future.status != 0 && future.stderr.contains("after the server's time") && future.stderr.contains("check the device's date and time"), "\(future)")

        // 5. Earned time runs out: the shield command, applied; reward apps refused; a bonus lifts it.
        #expect(try await stack.ctl("usage", "add", "--profile", "emma-tablet", "com.roblox", "--minutes", "130", "--start", "\(Self.day)T15:00:00Z").status == 0)
        try await story.waitFor("the shield command", "commands", "--profile", "emma-tablet") { $0.contains("shieldRewardApps") }
        #expect(try await stack.ctl("commands", "apply", "--profile", "emma-tablet").stdout.contains("reward apps shielded"))
        let refused = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "com.roblox", "--minutes", "5")
        #expect(refused.status == 1 && refused.stderr.contains("shielded"), "\(refused)")
        try await stack.waitUntil("the parent is alerted") { Self.read(parentWatch).contains("ALERT Emma has used up their earned time") }
        let bonus = try await stack.ctl("ledger", "--profile", "mum", "--child", "emma", "--adjust", "30", "--reason", "tidied up")
        #expect(bonus.status == 0 && bonus.stdout.contains("adjustment") && bonus.stdout.contains("tidied up"), "\(bonus)")
        try await story.waitFor("the unshield command", "commands", "--profile", "emma-tablet") { $0.contains("unshieldRewardApps") }
        #expect(try await stack.ctl("commands", "apply", "--profile", "emma-tablet").stdout.contains("reward apps unlocked"))

        // What the parent saw live.
        let seen = Self.read(parentWatch)
        #expect(seen.contains("status=executed") && seen.contains("recordCreated DailySummary") && seen.contains("EarnedTimeBalance"), "\(seen)")

        // The report, as a table and as a chart.
        let svg = stack.directory.file("emma.svg")
        let report = try await stack.ctl("report", "--profile", "mum", "--child", "emma", "--from", Self.day, "--to", Self.day, "--svg", svg)
        #expect(report.status == 0 && report.stdout.contains(Self.day) && report.stdout.contains("1h 00m") && report.stdout.contains("2h 10m"), "\(report)")
        #expect(Self.read(svg).hasPrefix("<svg"))

        // A backup of the whole server while it runs: one archive, checked; the followers
        // copied first, so none is ahead of the store.
        let etc = stack.directory.file("etc")
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        try Data("SCREENTIME_GATEWAY_OPTIONS=\n".utf8).write(to: URL(fileURLWithPath: etc + "/gateway.env"))
        let backup = try await stack.ctl("backup", "story", "--config-dir", etc)
        #expect(backup.status == 0 && backup.stdout.contains("Backed up the server to") && backup.stdout.contains("Checked: every file read back"), "\(backup)")
        let archive = stack.stack + "/state/backups/story.tar"
        let mode = (try FileManager.default.attributesOfItem(atPath: archive)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600, "the archive holds the gateway's private key: \(String(describing: mode))")
        let listed = try await runCommand("/usr/bin/tar", ["-tf", archive]).stdout
        for entry in ["./manifest.json", "./databases/store.sqlite", "./databases/push.sqlite", "./databases/aggregator.sqlite", "./gateway/key.pem",
                      "./gateway/certificate.pem", "./etc/gateway.env"] {
            #expect(listed.contains(entry + "\n"), "\(entry) in \(listed)")
        }
        let positions = ["the store up to change ", "push up to ", "the aggregator up to "].map { label in
            backup.stdout.range(of: label + #"[0-9]+"#, options: .regularExpression).flatMap { Int64(backup.stdout[$0].dropFirst(label.count)) } ?? -1
        }
        #expect(positions[0] > 0 && positions[1] <= positions[0] && positions[2] <= positions[0], "no follower ahead of the store: \(positions)")
        let left = try FileManager.default.contentsOfDirectory(atPath: stack.stack + "/state/backups")
        #expect(left == ["story.tar"], "the services' copies are in the archive, not left beside it: \(left)")
        let verified = try await stack.ctl("backup", "verify", archive)
        #expect(verified.status == 0 && verified.stdout.contains("is whole"), "\(verified)")
        // One byte changed in a copy of it: refused, in words.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: archive))
        bytes[bytes.count / 2] ^= 0xFF
        let damaged = stack.directory.file("damaged.tar")
        try bytes.write(to: URL(fileURLWithPath: damaged))
        let damagedRefused = try await stack.ctl("backup", "verify", damaged)
        #expect(damagedRefused.status == 65 && damagedRefused.stderr.contains("damaged"), "\(damagedRefused)")
        let again = try await stack.ctl("backup", "story", "--config-dir", etc)
        #expect(again.status != 0 && again.stderr.contains("already exists"), "\(again)")

        // Encrypted for leaving the box: opened only with its passphrase.
        let secret = stack.directory.file("passphrase")
        try Data("correct horse battery staple\n".utf8).write(to: URL(fileURLWithPath: secret))
        let sealed = try await stack.ctl("backup", "story-sealed", "--config-dir", etc, "--passphrase-file", secret)
        #expect(sealed.status == 0 && sealed.stdout.contains("story-sealed.tar.enc, encrypted") && sealed.stdout.contains("opened with the passphrase"), "\(sealed)")
        let sealedArchive = stack.stack + "/state/backups/story-sealed.tar.enc"
        #expect(try FileManager.default.contentsOfDirectory(atPath: stack.stack + "/state/backups").sorted() == ["story-sealed.tar.enc", "story.tar"], "no plain copy left beside it")
        #expect(try await stack.ctl("backup", "verify", sealedArchive, "--passphrase-file", secret).stdout.contains("is whole"))
        let noPassphrase = try await stack.ctl("backup", "verify", sealedArchive)
        #expect(noPassphrase.status == 65 && noPassphrase.stderr.contains("is encrypted: give its passphrase file"), "\(noPassphrase)")
        let wrong = stack.directory.file("wrong")
        try Data("not the passphrase at all\n".utf8).write(to: URL(fileURLWithPath: wrong))
        let wrongPassphrase = try await stack.ctl("backup", "verify", sealedArchive, "--passphrase-file", wrong)
        #expect(wrongPassphrase.status == 65 && wrongPassphrase.stderr.contains("the passphrase does not open"), "\(wrongPassphrase)")
        var sealedBytes = try Data(contentsOf: URL(fileURLWithPath: sealedArchive))
        sealedBytes[sealedBytes.count - 100] ^= 0x01
        try sealedBytes.write(to: URL(fileURLWithPath: damaged))
        let tampered = try await stack.ctl("backup", "verify", damaged, "--passphrase-file", secret)
        #expect(tampered.status == 65 && tampered.stderr.contains("damaged"), "\(tampered)")
        let short = stack.directory.file("short")
        try Data("abc\n".utf8).write(to: URL(fileURLWithPath: short))
        let tooShort = try await stack.ctl("backup", "story-short", "--passphrase-file", short)
        #expect(tooShort.status == 65 && tooShort.stderr.contains("shorter than 8 characters"), "\(tooShort)")

        // 6. Revocation cuts the child off at once.
        let revoked = try await stack.ctl("device", "revoke", "--profile", "mum", childDevice)
        #expect(revoked.status == 0 && revoked.stdout.contains("revoked"), "\(revoked)")
        let after = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--minutes", "5")
        #expect(after.status == 77 && after.stderr.contains("device_revoked") && after.stderr.contains("removed"), "\(after)")
    }

    @Test("screentimectl demo runs the whole story against the dev stack and prints what each side sees")
    func demo() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let demo = try await stack.ctl("demo")
        #expect(demo.status == 0, "\(demo)")
        for line in ["the same: confirm", "pairing_unconfirmed", "applies", "DailySummary", "reward apps shielded", "reward apps unlocked", "refused: device_revoked", "Done in"] {
            #expect(demo.stdout.contains(line), "\(line) in:\n\(demo.stdout)")
        }
    }

    @Test("services killed in the middle of the story (aggregator and store during an import, push under a watching parent): re-running what failed finishes it with nothing lost and nothing counted twice")
    func killedMidStory() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let story = Story(stack)
        try await story.bootstrap()
        let (invitation, _) = try await story.pair()
        #expect(try await stack.ctl("child", "confirm", "--profile", "mum", invitation).status == 0)
        #expect(try await stack.ctl("apps", "set", "--profile", "mum", "org.khan", "--category", "learning", "--points-per-minute", "2").status == 0)
        #expect(try await stack.ctl("commands", "apply", "--profile", "emma-tablet").status == 0)

        // 1,200 one-minute sessions over three days: three batches of 400.
        var csv = "app,start,end\n"
        for day in ["2026-11-18", "2026-11-19", "2026-11-20"] {
            for minute in 0..<400 {
                let start = Date(timeIntervalSince1970: ISO8601DateFormatter().date(from: "\(day)T04:00:00Z")!.timeIntervalSince1970 + Double(minute * 120))
                csv += "org.khan,\(ISO8601DateFormatter().string(from: start)),\(ISO8601DateFormatter().string(from: start.addingTimeInterval(60)))\n"
            }
        }
        let file = stack.directory.file("sessions.csv")
        try csv.write(toFile: file, atomically: true, encoding: .utf8)

        let parentWatch = stack.directory.file("parent-watch.txt")
        let watcher = try stack.ctlInBackground("watch", "--profile", "mum", "--seconds", "60", output: parentWatch)
        defer { kill(watcher, SIGKILL); _ = ChildExit.poll(watcher) }
        try await stack.waitUntil("the parent's watch is listening") { StoryTests.read(parentWatch).contains("watching") }

        // The aggregator dies as the import begins, the store during it.
        let importLog = stack.directory.file("import.txt")
        let importer = try stack.ctlInBackground("usage", "import", "--profile", "emma-tablet", file, output: importLog)
        try await stack.waitUntil("the first batch is uploaded") { StoryTests.read(importLog).contains("uploaded: 400/1200") }
        try story.kill("aggregator")
        try story.kill("store")
        let firstRun = try await ChildExit.wait(importer, timeout: .seconds(60))
        // Either the store died between two batches (the import went on through the
        // restarted store) or under one (the import stopped: the service cannot be reached).
        #expect(firstRun == 0 || firstRun == 69, "\(StoryTests.read(importLog))")
        let again = try await stack.ctl("usage", "import", "--profile", "emma-tablet", file)
        #expect(again.status == 0, "importing again after the failure: \(again)")

        // The push service dies under the parent's watch; watching again loses nothing.
        try await stack.waitUntil("the parent sees summaries") { StoryTests.read(parentWatch).contains("DailySummary") }
        try story.kill("push")
        let watchEnded = try await ChildExit.wait(watcher, timeout: .seconds(30))
        #expect(watchEnded == 69, "the watch reports the lost connection: \(StoryTests.read(parentWatch))")

        try await story.waitFor("all three days counted", "report", "--profile", "mum", "--child", "emma", "--from", "2026-11-18", "--to", "2026-11-20") {
            $0.contains("20h 00m") && $0.contains("2400")
        }
        try await story.waitFor("the balance", "balance", "--profile", "mum", "--child", "emma") { $0.contains("2400") && $0.contains("40h 00m") }
        // What the dead push service had queued and not had acknowledged comes on the next watch.
        let rewatch = try await stack.ctl("watch", "--profile", "mum", "--seconds", "3")
        let lastSeen = StoryTests.read(parentWatch).split(separator: "\n").last { $0.hasPrefix("#") }.flatMap { Int($0.dropFirst().prefix { $0.isNumber }) } ?? 0
        let firstAgain = rewatch.stdout.split(separator: "\n").first { $0.hasPrefix("#") }.flatMap { Int($0.dropFirst().prefix { $0.isNumber }) }
        if let firstAgain {
            // (Numbers go on from there; those the killed service had reserved are skipped.)
            #expect(firstAgain >= lastSeen, "the queue resumes after the last acknowledgement (#\(lastSeen)):\n\(rewatch.stdout)")
        }
        // The balance's final value (2,400 points, 40 h) reached the parent, live or on the rewatch.
        #expect((StoryTests.read(parentWatch) + rewatch.stdout).contains("balanceSeconds=144000"), "\(StoryTests.read(parentWatch))\n---\n\(rewatch.stdout)")
        // Rebuilding the child from the stored records finds what the interrupted incremental path had.
        let recomputed = try await stack.ctl("recompute", "--family", "smith", "--child", "emma")
        #expect(recomputed.status == 0 && recomputed.stdout.contains("from 1200 usage records") && recomputed.stdout.contains("none changed"), "\(recomputed)")
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}

/// The steps that several tests take.
struct Story {
    let stack: DevStack

    init(_ stack: DevStack) { self.stack = stack }

    func bootstrap() async throws {
        let created = try await self.stack.ctl("family", "create", "smith", "--time-zone", "UTC")
        #expect(created.status == 0, "\(created)")
        let code = try #require(created.stdout.split(separator: "\n").dropFirst().first?.trimmingCharacters(in: .whitespaces))
        let enrolled = try await self.stack.ctl("parent", "enroll", "--profile", "mum", "--family", "smith", "--code", code)
        #expect(enrolled.status == 0 && enrolled.stdout.contains("enrolled in smith"), "\(enrolled)")
    }

    /// Invites (the parent's command waits), accepts; checks both sides show the same
    /// short code. Returns the invitation id and the child's device id.
    func pair() async throws -> (invitation: String, device: String) {
        let output = self.stack.directory.file("invite.txt")
        let inviter = try self.stack.ctlInBackground("child", "invite", "--profile", "mum", "emma", "--child-name", "Emma", "--wait", "60", output: output)
        try await self.stack.waitUntil("the invitation is shown") { StoryTests.read(output).contains("screentime://") }
        let invite = StoryTests.read(output)
        #expect(invite.contains("█") || invite.contains("▀") || invite.contains("▄"), "a QR code is drawn")
        let link = try #require(invite.range(of: #"screentime://[^' \n]+"#, options: .regularExpression).map { String(invite[$0]) })
        let invitation = try #require(invite.range(of: #"Invitation [0-9a-f]+"#, options: .regularExpression).map { String(invite[$0].dropFirst("Invitation ".count)) })
        let accepted = try await self.stack.ctl("child", "accept", "--profile", "emma-tablet", link)
        #expect(accepted.status == 0, "\(accepted)")
        let childCode = try #require(accepted.stdout.split(separator: "\n").first { $0.contains("(") && $0.contains(",") }?.trimmingCharacters(in: .whitespaces))
        #expect(try await ChildExit.wait(inviter, timeout: .seconds(30)) == 0)
        #expect(StoryTests.read(output).contains(childCode), "the parent's screen shows the child's code \(childCode):\n\(StoryTests.read(output))")
        let profile = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: self.stack.profiles + "/emma-tablet.json"))) as? [String: Any]
        return (invitation, try #require(profile?["deviceId"] as? String))
    }

    /// kill -9 of a service of the stack (screentime-dev starts it again on demand).
    func kill(_ service: String) throws {
        guard let pid = try self.stack.services()[service]?.pid else { throw TestFailure("\(service) is not running") }
        Glibc.kill(pid, SIGKILL)
    }

    /// Runs a screentimectl command until its output satisfies `condition`.
    func waitFor(_ what: String, _ arguments: String..., condition: (String) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        var last = ""
        while ContinuousClock.now < deadline {
            let run = try await runCommand(Binaries.path("screentimectl"), arguments, environment: self.stack.ctlEnvironment)
            last = run.stdout + run.stderr
            if run.status == 0 && condition(run.stdout) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("\(what) did not show within 20 s; last output:\n\(last)")
    }
}
