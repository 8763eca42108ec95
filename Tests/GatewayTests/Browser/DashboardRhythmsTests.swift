import Foundation
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// The week's rhythms on the dashboard, in Debian's chromium against the real services: a
/// child's downtime set from its page (on now, so the devices are shielded at once), a
/// schedule that overlaps itself refused in words, the same schedule read back by
/// `screentimectl`, and turned off; chores added, done on the child's tablet, approved and
/// sent back; a rule for one child only. Screenshots at 390 and 1280 px.
@Suite("Dashboard: downtime, chores and a child's own rules in a browser", .serialized, .timeLimit(.minutes(5)))
struct DashboardRhythmsTests {
    @Test("a parent sets downtime with an app always allowed on the child's page; it is on now and the reward apps are shielded; overlapping windows are refused in words; turned off again")
    func downtime() async throws {
        try await inBrowser(failureShot: "downtime-failure") { stack, browser, shots in
            let family = try await FamilyOnCommandLine.make(stack)
            _ = try await family.must(["apps", "set", "--profile", "mum", "com.apple.Maps", "--category", "reward", "--name", "Maps"])
            _ = try await family.must(["apps", "set", "--profile", "mum", "com.google.ios.youtube", "--category", "reward", "--name", "YouTube"])
            try await family.signInDad(browser)
            try await browser.go(stack.url + "/children/emma")
            try await browser.waitFor("the child's page", "h1") { $0 == "Emma" }
            #expect(try await browser.text("#downtime-state") == "No downtime: reward apps follow earned time only.")
            try await shots.take("child-downtime-empty", showing: ".downtime")

            // A window around now on every day, in the family's time zone: on at once.
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "Europe/Paris")!
            let clock = { (date: Date) in String(format: "%02d:%02d", calendar.component(.hour, from: date), calendar.component(.minute, from: date)) }
            let (start, end) = (clock(Date().addingTimeInterval(-3600)), clock(Date().addingTimeInterval(2 * 3600)))
            for day in ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] { try await browser.click("input[name='w0-\(day)']") }
            try await browser.script("document.querySelector(\"input[name='w0-start']\").value = '\(start)'; document.querySelector(\"input[name='w0-end']\").value = '\(end)'")
            try await browser.script("document.querySelector(\"input[name='allow-0']\").click()")  // Maps, first by name
            try await browser.click("#save-downtime")
            try await browser.waitFor("downtime on", "#notice") { $0.hasPrefix("Downtime saved: it is on now") }
            let state = try await browser.text("#downtime-state")
            #expect(state.hasPrefix("Downtime is on now, until ") && state.contains(end), "\(state)")
            #expect(try await browser.text("#downtime-windows") == "Every day \(start)–\(end)")
            #expect(try await browser.text("#downtime-allowed") == "Always allowed: Maps")
            try await browser.waitFor("the reward apps shielded by downtime", "[data-field='shield']") { $0.hasPrefix("Downtime until") }
            #expect(try await browser.script("return document.querySelector(\"input[name='allow-0']\").checked") == true)
            try await shots.take("child-downtime-on", showing: ".downtime")

            // The same schedule, as Mum's phone and Emma's tablet read it.
            let shown = try await family.must(["downtime", "--profile", "mum"])
            #expect(shown.contains("Emma: Every day \(start)–\(end). Always allowed: Maps. Downtime is on now, until"), "\(shown)")
            let asChild = try await family.must(["downtime", "--profile", "emma-tablet"])
            #expect(asChild.contains("Downtime is on now"), "\(asChild)")

            // A second window that overlaps the first: refused, in words, nothing changed.
            try await browser.script("document.querySelector('details').open = true")
            try await browser.click("input[name='w1-mon']")
            try await browser.script("document.querySelector(\"input[name='w1-start']\").value = '\(start)'; document.querySelector(\"input[name='w1-end']\").value = '\(end)'")
            try await browser.click("#save-downtime")
            let refused = try await browser.waitFor("the refusal", "p.error") { !$0.isEmpty }
            #expect(refused.contains("overlaps") && refused.contains("windows may touch but not overlap"), "\(refused)")
            try await shots.take("child-downtime-refused")

            try await browser.go(stack.url + "/children/emma")
            try await browser.script("document.querySelector('details').open = true")
            try await browser.click("#downtime-off")
            try await browser.waitFor("downtime off", "#notice") { $0 == "Downtime is off." }
            try await browser.waitFor("the reward apps open again", "[data-field='shield']") { !$0.hasPrefix("Downtime") }
            #expect(try await browser.text("#downtime-state") == "No downtime: reward apps follow earned time only.")
            let activity = try await family.must(["audit", "--profile", "mum"])
            #expect(activity.contains("Dad set Emma's downtime: Every day \(start)–\(end) (always allowed: Maps)") && activity.contains("Dad turned off Emma's downtime"),
                    "\(activity)")
        }
    }
}

extension DashboardRhythmsTests {
    @Test("a parent adds a chore on the child's page; the child marks it done from its tablet; the parent approves it there (the points are in the ledger, naming him); done again the same day is refused in words; another is sent back with a reason")
    func chores() async throws {
        try await inBrowser(failureShot: "chores-failure") { stack, browser, shots in
            let family = try await FamilyOnCommandLine.make(stack)
            try await family.signInDad(browser)
            try await browser.go(stack.url + "/children/emma")
            try await browser.waitFor("the child's page", "h1") { $0 == "Emma" }
            #expect(try await browser.text("#chores-heading + p") == "No chores yet.")
            try await browser.script("document.querySelector('.chores details').open = true")
            try await browser.type("#chore-title", "Tidy your room")
            try await browser.type("#chore-points", "10")
            try await browser.click("#add-chore")
            try await browser.waitFor("the chore added", "#notice") { $0.hasPrefix("Chore added") }
            #expect(try await browser.text("#chore-list").contains("Tidy your room"))

            // Emma's tablet lists it and marks it done.
            let listed = try await family.must(["chores", "--profile", "emma-tablet"])
            let line = try #require(listed.split(separator: "\n").first { $0.contains("Tidy your room") })
            let choreId = try #require(line.split(separator: " ").last.map(String.init))
            #expect(line.contains("to do"), "\(listed)")
            let done = try await family.must(["chores", "done", choreId, "--profile", "emma-tablet", "--note", "even under the bed"])
            #expect(done.contains("Marked “Tidy your room” done. The parents have been told"), "\(done)")

            // On the Overview, to approve from there or from her page.
            try await browser.go(stack.url + "/")
            let overview = try await browser.waitFor("the chore on the Overview", "#overview-chores strong") { !$0.isEmpty }
            #expect(overview == "Emma did “Tidy your room” (10 points): “even under the bed”")
            try await shots.take("overview-chore")
            try await browser.go(stack.url + "/children/emma")
            let waiting = try await browser.waitFor("the chore waiting", "#chores-waiting strong") { !$0.isEmpty }
            #expect(waiting == "Emma did “Tidy your room” (10 points): “even under the bed”")
            try await shots.take("child-chore-waiting", showing: ".chores")
            try await browser.click("#chores-waiting button.approve")
            try await browser.waitFor("approved", "#notice") { $0.hasPrefix("Approved: the points are added") }
            try await browser.waitFor("the chore's points in the ledger", "#ledger-heading + .table-wrap") { $0.contains("Chore: Tidy your room (approved by Dad)") }
            #expect(try await browser.text("#chore-list").contains("Done today"))
            try await shots.take("child-chore-approved", showing: ".chores")

            // Done again the same day: refused, in words, on the tablet.
            let again = try await runCommand(Binaries.path("screentimectl"), ["chores", "done", choreId, "--profile", "emma-tablet", "--runtime-dir", stack.harness.directory.path],
                                             environment: ["SCREENTIME_PROFILES_DIR": family.profiles])
            #expect(again.status != 0 && (again.stderr + again.stdout).contains("“Tidy your room” is done today already: Dad approved it"), "\(again.stderr)\(again.stdout)")

            // A second chore, sent back with a reason.
            _ = try await family.must(["chores", "add", "--profile", "mum", "--child", "emma", "--title", "Dishes", "--points", "5"])
            let dishes = try #require(try await family.must(["chores", "--profile", "mum"]).split(separator: "\n").first { $0.contains("Dishes") }?.split(separator: " ").last.map(String.init))
            _ = try await family.must(["chores", "done", dishes, "--profile", "emma-tablet"])
            try await browser.go(stack.url + "/children/emma")
            try await browser.waitFor("the dishes waiting", "#chores-waiting strong") { $0.contains("Dishes") }
            try await browser.emulatePhone()
            try await browser.type("#chores-waiting input[name='reason']", "the pans are still dirty")
            try await browser.tap("#chores-waiting button.reject")
            try await browser.waitFor("sent back", "#notice") { $0.hasPrefix("Sent back") }
            try await browser.emulateLaptop()
            let lately = try await browser.text(".chores")
            #expect(lately.contains("Dad sent back Emma's “Dishes”: “the pans are still dirty”") && lately.contains("Sent back"), "\(lately)")
            let audit = try await family.must(["audit", "--profile", "mum"])
            #expect(audit.contains("Dad approved Emma's “Tidy your room”: +10 points") && audit.contains("Emma did “Tidy your room”: “even under the bed”"), "\(audit)")
        }
    }
}

extension DashboardRhythmsTests {
    @Test("a parent blocks YouTube for Emma only on her page: the Apps page and screentimectl show whose rule applies, her tablet's configuration has it and the family's for the rest; using the family's rule again removes it")
    func childRules() async throws {
        try await inBrowser(failureShot: "child-rules-failure") { stack, browser, shots in
            let family = try await FamilyOnCommandLine.make(stack)
            _ = try await family.must(["apps", "set", "--profile", "mum", "com.google.ios.youtube", "--category", "reward", "--name", "YouTube"])
            _ = try await family.must(["apps", "set", "--profile", "mum", "org.khanacademy", "--category", "learning", "--points-per-minute", "2", "--name", "Khan Academy"])
            try await family.signInDad(browser)
            try await browser.go(stack.url + "/children/emma")
            try await browser.waitFor("the child's page", "h1") { $0 == "Emma" }
            #expect(try await browser.text("#no-own-rules") == "Emma follows the family's rules for every app.")
            try await browser.script("document.querySelector('.own-rules details').open = true")
            try await browser.script("document.getElementById('rule-app').value = 'com.google.ios.youtube'")
            try await browser.click("#rule-blocked")
            try await browser.click("#save-own-rule")
            try await browser.waitFor("the rule saved", "#notice") { $0.hasPrefix("Rule saved") }
            let own = try await browser.text("#own-rules")
            #expect(own.contains("YouTube: blocked (the family's: a reward app)"), "\(own)")
            try await shots.take("child-own-rules", showing: ".own-rules")

            // Whose rule applies, on the Apps page and on Mum's phone.
            try await browser.go(stack.url + "/apps")
            let overrides = try await browser.waitFor("the override under the family's rule", "form[data-app='com.google.ios.youtube'] .overrides") { !$0.isEmpty }
            #expect(overrides == "Own rules: Emma: blocked. The rest of the family follows this one.", "\(overrides)")
            try await shots.take("apps-overrides", showing: ".overrides")
            let listed = try await family.must(["apps", "--profile", "mum"])
            #expect(listed.contains("emma only") && listed.contains("everyone"), "\(listed)")
            // Her tablet's configuration: YouTube blocked for her, Khan Academy as the family's.
            try await eventually("the tablet's configuration with her own rule", timeout: .seconds(20)) { seen -> Void? in
                let commands = try await family.must(["commands", "--profile", "emma-tablet"])
                seen = commands
                return commands.contains("applyConfiguration") ? () : nil
            }
            let applied = try await family.must(["commands", "apply", "--profile", "emma-tablet"])
            #expect(applied.contains("com.google.ios.youtube is reward, blocked (this child's own rule)")
                    && applied.contains("org.khanacademy is learning, 2 points/min;"), "\(applied)")

            // Back to the family's rule, from her page.
            try await browser.go(stack.url + "/children/emma")
            try await browser.click("#own-rules button.link")
            try await browser.waitFor("the family's rule again", "#notice") { $0 == "The family's rule applies again." }
            #expect(try await browser.text("#no-own-rules") == "Emma follows the family's rules for every app.")
            try await eventually("both in the family's log", timeout: .seconds(20)) { seen -> Void? in
                let audit = try await family.must(["audit", "--profile", "mum"])
                seen = audit
                return audit.contains("Dad set Emma's own rule for YouTube: blocked") && audit.contains("Dad let Emma follow the family's rule for YouTube again") ? () : nil
            }
        }
    }
}

extension DashboardRhythmsTests {
    @Test("the week's digest on the dashboard and from screentimectl, in the same words; the family chooses when it is sent in Settings")
    func digest() async throws {
        try await inBrowser(failureShot: "digest-failure") { stack, browser, shots in
            let family = try await FamilyOnCommandLine.make(stack)
            // The digest's week ends with the family's digest day: today's (in Paris), so that
            // the session of two hours ago is in it at any hour (on a Monday just after
            // midnight, a week ending on Sunday has no two hours behind it yet).
            var paris = Calendar(identifier: .gregorian)
            paris.timeZone = TimeZone(identifier: "Europe/Paris")!
            let today = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"][paris.component(.weekday, from: Date()) - 1]
            _ = try await family.must(["call", "store", "store.modify", #"{"family":"smith","zone":"default","savePolicy":"changedKeys","saves":[{"recordType":"Family","recordName":"smith","fields":{"digestDay":"\#(today)"}}]}"#])
            _ = try await family.must(["apps", "set", "--profile", "mum", "org.khanacademy", "--category", "learning", "--points-per-minute", "2", "--name", "Khan Academy"])
            _ = try await family.must(["usage", "add", "--profile", "emma-tablet", "org.khanacademy", "--minutes", "45", "--category", "learning",
                                       // A whole second: a session across the family's midnight is split
                                       // into days of whole seconds, which still add up to 45 minutes.
                                       "--start", StoreDates.format(Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 2 * 3600).rounded(.down)))])
            let printed = try await eventually("the digest with the learning", timeout: .seconds(20)) { seen -> String? in
                let text = try await family.must(["digest", "--profile", "mum"])
                seen = text
                return text.contains("Emma: 45 min learning (+45 min)") ? text : nil
            }
            #expect(printed.hasPrefix("The week of ") && printed.contains("most used: Khan Academy"), "\(printed)")

            try await family.signInDad(browser)
            try await browser.go(stack.url + "/reports")
            try await browser.click("#digest-link")
            try await browser.waitFor("the digest page", "h1") { $0.hasPrefix("The week of ") }
            let card = try await browser.text(".digest[data-child='emma']")
            #expect(card.contains("Learning") && card.contains("45 min") && card.contains("+45 min on the week before") && card.contains("Khan Academy: 45 min"), "\(card)")
            try await shots.take("digest")
            try await browser.click("#previous-week")
            try await browser.waitFor("the week before", ".digest[data-child='emma']") { $0.contains("as the week before") }

            try await browser.go(stack.url + "/settings")
            try await browser.script("document.getElementById('digestDay').value = 'mon'; document.getElementById('digestTime').value = '07:30'")
            try await browser.click("#save-settings")
            try await browser.waitFor("the settings saved", "#notice") { !$0.isEmpty }
            #expect(try await browser.script("return document.getElementById('digestDay').value + ' ' + document.getElementById('digestTime').value") == "mon 07:30")
            try await shots.take("settings-digest", showing: "#digestDay")
            try await eventually("the change in the family's log", timeout: .seconds(20)) { seen -> Void? in
                let audit = try await family.must(["audit", "--profile", "mum"])
                seen = audit + String(stack.aggregatorLog.suffix(3000))
                return audit.contains("Dad changed the family's settings: the weekly digest on Mondays at 07:30") ? () : nil
            }
        }
    }

    @Test("Settings tell how the server's nightly backups go: none yet, failing since when and why (in the parents' words), the last one that worked")
    func backups() async throws {
        try await inBrowser(failureShot: "backups-failure") { stack, browser, shots in
            let family = try await FamilyOnCommandLine.make(stack)
            try await family.signInDad(browser)
            try await browser.go(stack.url + "/settings")
            try await browser.waitFor("no backup yet", "#backup-never") { $0.contains("No nightly backup has run yet") }

            // What screentimectl backup scheduled reports: a success, then a night the NAS was not mounted.
            _ = try await family.must(["call", "aggregator", "aggregator.backupReport",
                                       #"{"succeeded":true,"archive":"screentime-20261127T030000.tar","bytes":2400000,"copiedTo":"/mnt/nas/screentime"}"#])
            _ = try await family.must(["call", "aggregator", "aggregator.backupReport",
                                       #"{"succeeded":false,"problem":"the backup disk is not mounted (/mnt/nas/screentime is not there)"}"#])
            try await browser.go(stack.url + "/settings")
            try await browser.waitFor("the failure", "#backup-failing") {
                $0.hasPrefix("The nightly backup has failed since ") && $0.hasSuffix("the backup disk is not mounted (/mnt/nas/screentime is not there).")
            }
            let last = try await browser.text("#backup-last")
            #expect(last.hasPrefix("The last backup that worked: ") && last.contains("2.4 MB, copied to /mnt/nas/screentime."), "\(last)")
            try await shots.take("settings-backups", showing: "#backups")
        }
    }

    @Test("Settings show an admin parent how the server is, in words: each service (running or resting), the devices connected now, the disk, the certificate")
    func serverStatus() async throws {
        try await inBrowser(failureShot: "server-failure") { stack, browser, shots in
            let family = try await FamilyOnCommandLine.make(stack)
            try await family.signInDad(browser)
            try await browser.go(stack.url + "/settings")
            #expect(try await browser.waitFor("the server's health", "#server-health") { !$0.isEmpty } == "Everything is working.")
            #expect(try await browser.text("#service-store").hasPrefix("Running since "))
            #expect(try await browser.text("#service-gateway").hasPrefix("Running since "))
            #expect(try await browser.text("#server-devices").hasSuffix("connected now."))
            #expect(try await browser.text("#server-disk").contains(" free of "))
            #expect(try await browser.text("#server-certificate").hasPrefix("The gateway's certificate is valid until "))
            #expect(try await browser.text("#server-version").hasPrefix("ScreenTime Rewards Server "))
            try await shots.take("settings-server", showing: "#server")
        }
    }
}
