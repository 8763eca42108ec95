import Foundation
import StackSupport
import Testing
import TestSupport

/// What a person typing screentimectl's device commands gets wrong, and what they read.
@Suite("screentimectl device mode: clear refusals with their exit status")
struct RefusalTests {
    @Test("no profile, a profile of the wrong role, a name taken, a bad link, a bad CSV, an unknown app, a stopped stack")
    func refusals() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let story = Story(stack)
        try await story.bootstrap()

        let unnamed = try await stack.ctl("devices")
        #expect(unnamed.status == 66 && unnamed.stderr.contains("--profile NAME"), "\(unnamed)")
        let unknown = try await stack.ctl("devices", "--profile", "dad")
        #expect(unknown.status == 66 && unknown.stderr.contains("no profile named dad") && unknown.stderr.contains("known: mum"), "\(unknown)")
        let badName = try await stack.ctl("devices", "--profile", "../etc/passwd")
        #expect(badName.status == 65 && badName.stderr.contains("profile name"), "\(badName)")
        let wrongRole = try await stack.ctl("commands", "--profile", "mum")
        #expect(wrongRole.status == 64 && wrongRole.stderr.contains("mum is a parent device"), "\(wrongRole)")
        let taken = try await stack.ctl("parent", "enroll", "--profile", "mum", "--family", "smith", "--code", "x.y")
        #expect(taken.status == 73 && taken.stderr.contains("exists already"), "\(taken)")
        let badLink = try await stack.ctl("child", "accept", "--profile", "kid", "https://example.org/pair")
        #expect(badLink.status == 65 && badLink.stderr.contains("not a pairing link"), "\(badLink)")
        let wrongSecret = try await stack.ctl("child", "accept", "--profile", "kid", "screentime://pair?v=1&server=home.example&family=smith&invitation=0123456789abcdef&secret=nope")
        #expect(wrongSecret.status == 1 && wrongSecret.stderr.contains("invitation_invalid"), "\(wrongSecret)")
        let badCategory = try await stack.ctl("apps", "set", "--profile", "mum", "org.khan", "--category", "fun")
        #expect(badCategory.status == 64 && badCategory.stderr.contains("learning or reward"), "\(badCategory)")
        let firstRule = try await stack.ctl("apps", "set", "--profile", "mum", "org.khan", "--points-per-minute", "3")
        #expect(firstRule.status == 65 && firstRule.stderr.contains("--category"), "\(firstRule)")

        let (invitation, _) = try await story.pair()
        #expect(try await stack.ctl("child", "confirm", "--profile", "mum", invitation).status == 0)
        let noRule = try await stack.ctl("usage", "add", "--profile", "emma-tablet", "org.unknown", "--minutes", "5")
        #expect(noRule.status == 65 && noRule.stderr.contains("no rule for org.unknown"), "\(noRule)")
        for (csv, complaint) in [
            ("start,end\n2026-11-20T10:00:00Z,2026-11-20T10:05:00Z\n", "must name its columns"),
            ("app,start,end\norg.khan,yesterday,2026-11-20T10:05:00Z\n", "line 2: start is not an RFC 3339 time"),
            ("app,start,end,category\norg.khan,2026-11-20T10:05:00Z,2026-11-20T10:00:00Z,learning\n", "line 2: the session ends before it starts"),
            ("app,start,end,category\norg.khan,2026-11-20T10:00:00Z,2026-11-20T10:05:00Z,fun\n", "category is learning or reward"),
            ("app,start,end\n", "holds no sessions"),
        ] {
            let imported = try await stack.ctl("usage", "import", "--profile", "emma-tablet", "-", stdin: csv)
            #expect(imported.status == 65 && imported.stderr.contains(complaint), "\(complaint): \(imported)")
        }
        let missing = try await stack.ctl("usage", "import", "--profile", "emma-tablet", stack.directory.file("nothing.csv"))
        #expect(missing.status == 65 && missing.stderr.contains("cannot read"), "\(missing)")

        // A device the parent does not recognise is rejected: its credential stops working.
        let invite = try await stack.ctl("child", "invite", "--profile", "mum", "emma", "--no-wait", "--no-qr")
        let link = try #require(invite.stdout.range(of: #"screentime://[^' \n]+"#, options: .regularExpression).map { String(invite.stdout[$0]) })
        let inviteId = try #require(invite.stdout.range(of: #"Invitation [0-9a-f]+"#, options: .regularExpression).map { String(invite.stdout[$0].dropFirst("Invitation ".count)) })
        #expect(try await stack.ctl("child", "accept", "--profile", "intruder", link).status == 0)
        let rejected = try await stack.ctl("child", "reject", "--profile", "mum", inviteId)
        #expect(rejected.status == 0 && rejected.stdout.contains("rejected"), "\(rejected)")
        let intruder = try await stack.ctl("usage", "add", "--profile", "intruder", "org.khan", "--minutes", "5", "--category", "learning")
        #expect(intruder.status == 77 && intruder.stderr.contains("device_revoked"), "\(intruder)")

        // A child the family does not have is an error, not an empty day.
        let nobody = try await stack.ctl("summary", "--profile", "mum", "--child", "nobody")
        #expect(nobody.status == 1 && nobody.stderr.contains("this family has no child nobody; its children are emma"), "\(nobody)")

        // The stack still answers after all that; then, stopped, the CLI says what to do.
        #expect(try await stack.ctl("devices", "--profile", "mum").status == 0)
        _ = try await stack.interrupt()
        let stopped = try await stack.ctl("devices", "--profile", "mum")
        #expect(stopped.status == 69 && stopped.stderr.contains("Is the server running?"), "\(stopped)")
    }

    @Test("shell completions for bash, zsh and fish name the device commands")
    func completions() async throws {
        for shell in ["bash", "zsh", "fish"] {
            let script = try await runCommand(Binaries.path("screentimectl"), ["--generate-completion-script", shell])
            #expect(script.status == 0 && script.stdout.contains("usage") && script.stdout.contains("demo") && script.stdout.contains("watch"), "\(shell): \(script.stderr)")
        }
    }
}
