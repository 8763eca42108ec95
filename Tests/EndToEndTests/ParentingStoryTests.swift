import Foundation
import StackSupport
import Testing
import TestSupport

/// Everyday parenting through `screentimectl`, each person a separate device of the dev
/// stack: the child asks, two parents answer, grant, take away, pause and resume, and the
/// family's log says it in words.
@Suite("Everyday parenting through screentimectl", .serialized)
struct ParentingStoryTests {
    @Test("the child asks; Mum approves by the short id; Dad's later answer is told who answered; grants, take-aways, a pause and its end, in words")
    func askApproveGrantPause() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let story = Story(stack)
        try await story.bootstrap()
        let (invitation, _) = try await story.pair()
        #expect(try await stack.ctl("child", "confirm", "--profile", "mum", invitation).status == 0)
        let code = try await stack.ctl("parent", "invite", "--profile", "mum")
        let dadCode = try #require(code.stdout.split(separator: "\n").dropFirst().first?.trimmingCharacters(in: .whitespaces))
        #expect(try await stack.ctl("parent", "enroll", "--profile", "dad", "--family", "smith", "--code", dadCode, "--display-name", "Dad").status == 0)

        // Until the aggregator has seen the confirmation, the child is told to wait; then it asks.
        try await story.waitFor("the child's request taken", "ask", "--profile", "emma-tablet", "--minutes", "30", "--app", "com.youtube",
                                "--app-name", "YouTube", "--note", "homework done") { $0.contains("Asked for 30 min of YouTube. The parents have been told") }
        let listed = try await stack.ctl("requests", "--profile", "mum")
        #expect(listed.status == 0 && listed.stdout.contains("Emma asks for 30 min of YouTube: “homework done”") && listed.stdout.contains("waiting until"), "\(listed)")
        let shortId = try #require(listed.stdout.split(separator: "\n").dropFirst().first?.split(separator: " ").last.map(String.init))

        let approved = try await stack.ctl("requests", "approve", shortId, "--profile", "mum", "--minutes", "20", "--reply", "well done")
        #expect(approved.status == 0 && approved.stdout.contains("Approved 20 min for Emma. Emma's device has been told."), "\(approved)")
        let late = try await stack.ctl("requests", "deny", shortId, "--profile", "dad")
        #expect(late.status != 0 && !late.stderr.contains("{") && late.stderr.contains("conflict") && late.stderr.contains("mum already approved this request at") && late.stderr.contains("(20 min)"), "\(late)")
        let childView = try await stack.ctl("requests", "--profile", "emma-tablet")
        #expect(childView.stdout.contains("mum approved 20 min for Emma: “well done”"), "\(childView)")

        let granted = try await stack.ctl("grant", "--profile", "dad", "--child", "emma", "--minutes", "15", "--reason", "bonus for the dishes")
        #expect(granted.status == 0 && granted.stdout.contains("Added 15 min for Emma. Emma has 35m left (35 points); reward apps are open."), "\(granted)")
        let taken = try await stack.ctl("take-away", "--profile", "mum", "--child", "emma", "--minutes", "60", "--reason", "no screens after the fight")
        #expect(taken.status == 0 && taken.stdout.contains("Took away 35 points from Emma (all there was). Emma has 0 left (0 points); reward apps are shielded until more is earned."), "\(taken)")
        let paused = try await stack.ctl("pause", "--profile", "mum", "--child", "emma", "--minutes", "45", "--reason", "dinner")
        #expect(paused.status == 0 && paused.stdout.contains("reward apps are paused by mum until"), "\(paused)")
        let resumed = try await stack.ctl("resume", "--profile", "dad", "--child", "emma")
        #expect(resumed.status == 0 && resumed.stdout.contains("reward apps are shielded until more is earned"), "\(resumed)")

        // Bad input is refused with a sentence, by the CLI or by the server.
        let both = try await stack.ctl("ask", "--profile", "emma-tablet", "--minutes", "10", "--rest-of-day")
        #expect(both.status != 0 && both.stderr.contains("give --minutes N or --rest-of-day"), "\(both)")
        let asChild = try await stack.ctl("grant", "--profile", "emma-tablet", "--child", "emma", "--minutes", "5")
        #expect(asChild.status != 0 && asChild.stderr.contains("wrong_role"), "\(asChild)")
        let unknown = try await stack.ctl("pause", "--profile", "mum", "--child", "nobody")
        #expect(unknown.status != 0 && unknown.stderr.contains("no child nobody in this family"), "\(unknown)")
        let ledger = try await stack.ctl("ledger", "--profile", "mum", "--child", "emma")
        #expect(ledger.stdout.contains("deduction") && ledger.stdout.contains("-35"), "\(ledger)")
        // The family's log, in words, whoever acted from whichever device.
        try await story.waitFor("the family's log in words", "audit", "--profile", "dad") { log in
            ["Emma asked for 30 min of YouTube: “homework done”", "mum approved 20 min for Emma: “well done”", "Dad added 15 min for Emma: “bonus for the dishes”",
             "mum took away 35 points from Emma: “no screens after the fight”", "mum paused Emma's reward apps for 45 min: “dinner”",
             "Dad resumed Emma's reward apps", "mum confirmed"].allSatisfy { log.contains($0) }
        }
        let open = try await stack.ctl("requests", "--profile", "dad", "--open")
        #expect(open.stdout == "No requests waiting for an answer.\n", "\(open)")
    }
}
