import Foundation
import PairingAPI
import RPCCore
import StackSupport
import StoreAPI
import Testing
import TestSupport

/// The parent's dashboard in a real browser (Debian's chromium, headless) against the real
/// gateway and services; the child's device is played by `screentimectl` on the services'
/// local sockets. Screenshots at phone (390 px) and laptop width go to
/// `.build/artifacts/dashboard/` (or `$SCREENTIME_ARTIFACTS_DIR/dashboard`); any
/// JavaScript console error fails the test.
@Suite("Dashboard: the parent's story in a browser", .serialized, .timeLimit(.minutes(5)))
struct DashboardStoryTests {
    @Test("sign in with an invitation, pair a child comparing the emoji, change an app rule and see it executed, live usage, CSV, revoke, sign out")
    func parentStory() async throws {
        try await inBrowser(failureShot: "failure") { stack, browser, shots in try await self.story(stack, browser, shots) }
    }

    func story(_ stack: GatewayStack, _ browser: Browser, _ shots: Screenshots) async throws {
        let profiles = stack.harness.directory.file("profiles")
        let ctl = { (arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) in
            try await runCommand(Binaries.path("screentimectl"), arguments + ["--runtime-dir", stack.harness.directory.path],
                                 environment: ["SCREENTIME_PROFILES_DIR": profiles])
        }
        let must = { (arguments: [String]) async throws -> String in
            let result = try await ctl(arguments)
            guard result.status == 0 else { throw TestFailure("screentimectl \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)\(result.stdout)") }
            return result.stdout
        }

        // The administrator creates the family; its first parent enrolls with screentimectl,
        // then invites a co-parent: the printed link signs the browser in.
        let zone = Self.zoneAwayFromMidnight()
        let created = try await must(["family", "create", "smith", "--time-zone", zone])
        let adminCode = try #require(created.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.contains(".") && !$0.contains(" ") && !$0.hasPrefix("https://") })
        _ = try await must(["parent", "enroll", "--profile", "mum", "--family", "smith", "--code", adminCode])
        let invite = try await must(["parent", "invite", "--profile", "mum"])
        let link = try #require(invite.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("https://") && $0.contains("/signin?") },
                                "parent invite prints no sign-in link:\n\(invite)")
        #expect(link.hasPrefix(stack.url + "/signin?family=smith&code="))

        // 1. Sign in: the form comes filled from the link; the browser names itself.
        try await browser.go(link)
        try await browser.type("#deviceName", "Laptop")
        try await browser.type("#displayName", "Dad")
        try await shots.take("signin")
        try await browser.click("#signin")
        try await browser.waitFor("the overview after signing in", "h1") { $0 == "Overview" }
        try await browser.waitFor("the empty state", ".empty h2") { $0 == "No children yet" }
        let cookie = try await browser.cookieFlags("__Host-screentime_session")
        #expect(cookie["httpOnly"] == true && cookie["secure"] == true && cookie["sameSite"]?.stringValue == "Strict", "\(cookie)")
        let session = try #require(cookie["value"]?.stringValue)
        try await shots.take("overview-empty")
        try await self.noConsoleErrors(browser)

        // 2. Pair a child's device: the page shows the QR code and the link; the child's
        //    screentimectl "scans" the link and shows its emoji, which the page must match.
        //    As on a phone: a finger's taps at 390 px.
        try await browser.emulatePhone()
        try await browser.go(stack.url + "/devices")
        try await browser.type("#childId", "emma")
        try await browser.type("#childName", "Emma")
        try await browser.tap("#pair-child")
        let uri = try await browser.waitFor("the pairing link", "#pair-uri") { $0.hasPrefix("screentime://pair?") }
        #expect(try await browser.text("h1") == "Pair Emma's device", "the heading names the child by name")
        #expect(try await browser.element(".qr svg") != nil)
        try await shots.take("pair-qr")
        let accepted = try await must(["child", "accept", "--profile", "emma-tablet", "--device-name", "Emma's tablet", uri])
        let lines = accepted.split(separator: "\n").map(String.init)
        let childEmoji = try #require(lines.firstIndex { $0.hasPrefix("Short code") }.map { lines[$0 + 1].trimmingCharacters(in: .whitespaces) }, "\(accepted)")
        // The page learns of the acceptance by itself (no reload).
        let pageEmoji = try await browser.waitFor("the short code on the page", "#short-code") { !$0.isEmpty }
        #expect(childEmoji.hasPrefix(pageEmoji), "the child shows \(childEmoji), the page \(pageEmoji)")
        try await shots.take("pair-code")
        try await browser.emulatePhone()
        try await browser.tap("#confirm")
        // The confirmation goes through the gateway to pairing and the store, and the page
        // hears it back: under a full parallel test run that has taken more than 20 s.
        try await browser.waitFor("the pairing confirmed", "#pair-done", timeout: .seconds(60)) { $0.contains("is paired") }
        try await browser.emulateLaptop()
        try await self.noConsoleErrors(browser)

        // 3. An app rule: saved from the page, sent to the child's device as a pending
        //    command; the child's CLI applies it and the page shows it executed, live.
        try await browser.go(stack.url + "/apps")
        try await browser.type("#new-bundle", "org.khanacademy")
        try await browser.type("#new-name", "Khan Academy")
        // Points per minute is a slider showing its value as it moves (two steps right).
        try await browser.script("var s = document.getElementById('new-points'); s.value = '2'; s.dispatchEvent(new Event('input', { bubbles: true }))")
        #expect(try await browser.text("#new-points-value") == "2")
        try await browser.click("#add-app-save")
        try await browser.waitFor("the rule saved", "#notice") { $0.contains("Saved Khan Academy; the family's rules go to 1 device") }
        try await browser.waitFor("the command pending", "[data-command] [data-status]") { $0 == "pending" }
        try await browser.script("window.__sameDocument = 'yes'")
        try await shots.take("apps-pending")
        let applied = try await must(["commands", "apply", "--profile", "emma-tablet"])
        #expect(applied.contains("org.khanacademy is learning, 2 points/min"), "\(applied)")
        try await browser.waitFor("the command executed, without reloading", "[data-command] [data-status]") { $0 == "executed" }
        #expect(try await browser.script("return window.__sameDocument") == "yes")
        let points = try await browser.script("var f = document.querySelector(\"form[data-app='org.khanacademy']\"); return f ? f.querySelector('input[type=range]').value : null").stringValue
        #expect(points == "2", "the rule's points on the page: \(points ?? "no form")")
        try await shots.take("apps-executed")
        try await self.noConsoleErrors(browser)

        // 4. Usage from the child: the overview changes by itself.
        try await browser.go(stack.url + "/")
        try await browser.waitFor("Emma's card", "[data-child='emma'] [data-field='learning']") { $0 == "0 min" }
        try await browser.waitFor("the live connection", "#live-status") { $0 == "Live" }
        try await browser.script("window.__sameDocument = 'still'")
        // Ten minutes ending now, or, within ten minutes after the family's midnight, the
        // first ten of the day: all of it today, whenever the test runs.
        var family = Calendar(identifier: .gregorian)
        family.timeZone = TimeZone(identifier: zone)!
        let midnight = family.startOfDay(for: Date())
        let learningStart = max(Date().addingTimeInterval(-600), midnight.addingTimeInterval(1))
        _ = try await must(["usage", "add", "--profile", "emma-tablet", "org.khanacademy", "--minutes", "10", "--start", StoreDates.format(learningStart)])
        try await browser.waitFor("the learning time, live", "[data-child='emma'] [data-field='learning']") { $0 == "10 min" }
        try await browser.waitFor("the points, live", "[data-child='emma'] [data-field='pointsToday']") { $0 == "20" }
        #expect(try await browser.script("return window.__sameDocument") == "still")
        let lastSync = try await browser.text("[data-child='emma'] [data-field='lastSync']")
        #expect(lastSync == "just now" || lastSync.hasSuffix("minute ago"), "\(lastSync)")
        try await shots.take("overview-live")
        try await self.noConsoleErrors(browser)

        // 5. Reports: the chart, and the CSV downloaded with the browser's session.
        try await browser.go(stack.url + "/reports")
        #expect(try await browser.element(".chart svg") != nil)
        let csv = try await browser.asyncScript("""
            var done = arguments[arguments.length - 1];
            fetch(document.getElementById('csv-link').href, { credentials: 'same-origin' })
              .then(function (r) { return r.text().then(function (t) { done(r.status + ' ' + r.headers.get('content-type') + '\\n' + t); }); })
              .catch(function (e) { done('failed ' + e); });
            """).stringValue ?? ""
        #expect(csv.hasPrefix("200 text/csv"), "\(csv)")
        #expect(csv.contains("date,device_id,app,category,seconds,points") && csv.contains("org.khanacademy,learning,600,20,Khan Academy,Emma's tablet"), "\(csv)")
        try await shots.take("reports")
        // A range the wrong way round is explained, in words.
        try await browser.go(stack.url + "/reports?child=emma&from=2026-11-20&to=2026-11-10")
        let backwards = try await browser.pageText()
        #expect(backwards.contains("The end date (2026-11-10) is before the start date (2026-11-20)") && !backwards.contains("params."), "\(backwards.prefix(800))")
        try await self.noConsoleErrors(browser)

        // 6. Alerts as they come: a reward limit set in Settings; the child's reward time
        //    goes over it, and the Activity page lists the alert without reloading (and
        //    still after a reload), its time in the family's time zone.
        try await browser.go(stack.url + "/settings")
        try await browser.type("#rewardMinutes", "1")
        try await browser.click("#save-settings")
        try await browser.waitFor("the limit saved", "#notice") { $0.contains(zone) }
        try await browser.go(stack.url + "/activity")
        try await browser.waitFor("no alerts yet", "#no-alerts") { $0.hasPrefix("No alerts yet") }
        try await browser.waitFor("the live connection", "#live-status") { $0 == "Live" }
        try await browser.script("window.__sameDocument = 'activity'")
        // Twenty minutes ago: before the learning session of step 4, which ended at about now.
        // (Within the family's today too, whatever the hour.)
        let rewardStart = StoreDates.format(max(Date().addingTimeInterval(-20 * 60), midnight.addingTimeInterval(12 * 60)))
        _ = try await must(["usage", "add", "--profile", "emma-tablet", "com.example.game", "--category", "reward", "--minutes", "2", "--start", rewardStart])
        let alert = try await browser.waitFor("the reward alert, live", "[data-alert='rewardToday'] strong") { $0.contains("2 min of reward apps") }
        #expect(alert.hasPrefix("Emma: 2 min of reward apps on "), "\(alert)")
        #expect(try await browser.script("return window.__sameDocument") == "activity")
        #expect(try await browser.element("#no-alerts") == nil)
        try await shots.take("activity-alert")
        try await browser.go(stack.url + "/activity")
        try await browser.waitFor("the alert after a reload", "[data-alert='rewardToday'] strong") { $0 == alert }
        #expect(try await browser.pageText().contains("Times in \(zone)."))
        try await self.noConsoleErrors(browser)

        // 7. Revoke the child's device: cut off at once.
        try await browser.go(stack.url + "/devices")
        let childDevice = try #require(try await browser.script("var row = [...document.querySelectorAll('tr[data-device]')].find(r => r.textContent.includes(\"Emma's tablet\")); return row ? row.dataset.device : null").stringValue)
        // The tablet applied the family's rules (step 3): the page says so.
        try await browser.waitFor("the tablet's rules up to date", "tr[data-device='\(childDevice)'] [data-field='rules']") { $0 == "Up to date" }
        // This browser holds the live connection: connected now, not "last seen".
        let browserSeen = try await eventually("this browser shown connected now") { seen in
            try await browser.go(stack.url + "/devices")
            let text = try await browser.script("var row = [...document.querySelectorAll('tr[data-device]')].find(r => r.textContent.includes('this browser')); return row ? row.querySelector(\"[data-field='seen']\").textContent.trim() : null").stringValue
            seen = text ?? "no row"
            return text == "connected now" ? text : nil
        }
        #expect(browserSeen == "connected now")
        try await shots.take("devices")
        try await browser.click("tr[data-device='\(childDevice)'] button.danger")
        try await browser.acceptAlert()
        try await browser.waitFor("the device revoked", "tr[data-device='\(childDevice)'] [data-field='status']") { $0 == "revoked" }
        let refused = try await ctl(["usage", "add", "--profile", "emma-tablet", "org.khanacademy", "--minutes", "5"])
        #expect(refused.status != 0, "a revoked device's upload went through: \(refused)")
        // What the removed tablet recorded today still counts: the Overview says what
        // Reports say.
        try await browser.go(stack.url + "/")
        try await browser.waitFor("Emma's day with the removed tablet's usage", "[data-child='emma'] [data-field='learning']") { $0 == "10 min" }
        try await self.noConsoleErrors(browser)

        // 8. Activity: the parents' actions, the revocation among them. Settings: the family's
        //    time zone and alert thresholds, which every page then uses.
        try await browser.go(stack.url + "/activity")
        let revocation = try await browser.waitFor("the revocation in the audit log", "tr[data-action='device.revoke']") { $0.contains("removed Emma's tablet from the family") }
        #expect(!revocation.contains(childDevice) && !revocation.contains("device:"), "ids in the audit log: \(revocation)")
        try await shots.take("activity")
        try await browser.go(stack.url + "/settings")
        try await browser.type("#timeZone", "America/New_York")
        try await browser.type("#rewardMinutes", "45")
        try await browser.click("#save-settings")
        try await browser.waitFor("the settings saved", "#notice") { $0.contains("America/New_York") }
        #expect(try await browser.pageText().contains("Times in America/New_York."))
        #expect(try await browser.script("return document.getElementById('rewardMinutes').value") == "45")
        try await shots.take("settings")
        try await self.noConsoleErrors(browser)

        // 9. Sign out: the session's credential is revoked; the old cookie gets nothing.
        try await browser.go(stack.url + "/")
        try await browser.click("button[type='submit'].link")
        // (Revoking the browser's credential reaches every service; on a loaded machine that
        // can take longer than a page.)
        try await browser.waitFor("the sign-in page after signing out", ".notice", timeout: .seconds(60)) { $0.contains("Signed out") }
        #expect(try await browser.cookie("__Host-screentime_session") == nil)
        let page = try await curl(stack.url + "/", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: ["-H", "Cookie: __Host-screentime_session=\(session)", "-D", "/dev/stderr"])
        #expect(page.status == 303 && page.stderr.contains("/signin?expired=1"), "\(page)")
        let api = try await stack.rpc("pairing.listDevices", [:], token: session)
        #expect(api.status == 401 && api.errorCode == "device_revoked", "\(api.body)")
        try await self.noConsoleErrors(browser)
    }

    func noConsoleErrors(_ browser: Browser) async throws {
        let errors = try await browser.consoleMessages().filter { $0.level == "SEVERE" }
        #expect(errors.isEmpty, "JavaScript console errors: \(errors.map(\.message))")
    }
}

/// Runs `body` with the whole stack (`GatewayStack.start()`) and a chromium signed in to
/// nothing yet; a failure leaves a screenshot named `failureShot`.
func inBrowser(failureShot: String, _ body: (GatewayStack, Browser, Screenshots) async throws -> Void) async throws {
    let stack = try await GatewayStack.start()
    defer { stack.stopNow() }
    let browser = try await Browser(pin: stack.endpoint.pin)
    let shots = Screenshots(browser)
    do {
        try await body(stack, browser, shots)
    } catch {
        try? await shots.take(failureShot)
        await browser.quit()
        throw error
    }
    await browser.quit()
}

extension DashboardStoryTests {
    /// Europe/Paris, unless its clock is within half an hour of midnight (the story's usage
    /// must fall within one family day, and end before now): then Asia/Tokyo, eight hours
    /// away.
    static func zoneAwayFromMidnight(now: Date = Date()) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Europe/Paris")!
        let minutes = calendar.component(.hour, from: now) * 60 + calendar.component(.minute, from: now)
        return minutes < 30 || minutes >= 23 * 60 + 30 ? "Asia/Tokyo" : "Europe/Paris"
    }
}

/// Each page at phone width (390 px) and laptop width, as PNG files.
struct Screenshots {
    let browser: Browser
    static let directory: String = {
        let base = ProcessInfo.processInfo.environment["SCREENTIME_ARTIFACTS_DIR"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent(".build/artifacts").path
        let directory = (base as NSString).appendingPathComponent("dashboard")
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }()

    init(_ browser: Browser) { self.browser = browser }

    /// `showing`: scrolled to that element first (a card further down the page).
    func take(_ name: String, showing selector: String? = nil) async throws {
        for (label, width, height) in [("phone", 390, 844), ("laptop", 1280, 900)] {
            try await self.browser.resize(width: width, height: height)
            if let selector { try await self.browser.script("document.querySelector(\"\(selector)\").scrollIntoView()") }
            // Nothing wider than the screen: no sideways scrolling to reach a button.
            let fits = try await self.browser.script("return document.documentElement.scrollWidth + ' ' + window.innerWidth").stringValue ?? ""
            let widths = fits.split(separator: " ").compactMap { Int($0) }
            #expect(widths.count == 2 && widths[0] <= widths[1], "\(name) at \(width) px: the page is \(widths.first ?? -1) px wide in a \(widths.last ?? -1) px window")
            let png = try await self.browser.screenshot()
            try png.write(to: URL(fileURLWithPath: (Self.directory as NSString).appendingPathComponent("\(name)-\(label).png")))
        }
    }
}
