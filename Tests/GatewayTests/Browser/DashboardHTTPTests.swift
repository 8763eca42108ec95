import Foundation
import PairingAPI
import RPCCore
import StoreAPI
import StackSupport
import Testing
import TestSupport

/// The dashboard's guarantees at the HTTP level (curl, pinned): the session cookie's
/// flags, CSRF and origin checks on every form, a session revoked elsewhere refused at its
/// next request, and nothing more for a browser than for a parent's device.
@Suite("Dashboard: sessions, CSRF and headers over HTTP", .serialized, .timeLimit(.minutes(3)))
struct DashboardHTTPTests {
    /// A browser as curl: a cookie jar, the pin, `Accept: text/html`.
    struct Client {
        let stack: GatewayStack
        let jar: String

        func get(_ path: String, headers: [String] = []) async throws -> (CurlResult, String) {
            try await self.send(path, arguments: headers.flatMap { ["-H", $0] })
        }

        func post(_ path: String, form: [String: String], headers: [String] = []) async throws -> (CurlResult, String) {
            let body = form.map { "\($0.key)=\(FormCoding.encode($0.value))" }.joined(separator: "&")
            return try await self.send(path, arguments: ["--data-raw", body] + headers.flatMap { ["-H", $0] })
        }

        /// The result, and the response's headers.
        func send(_ path: String, arguments: [String]) async throws -> (CurlResult, String) {
            let headerFile = self.jar + ".headers"
            let result = try await curl(self.stack.url + path, pin: self.stack.endpoint.pin, caFile: self.stack.endpoint.certificate,
                                  arguments: ["-b", self.jar, "-c", self.jar, "-H", "Accept: text/html", "-D", headerFile] + arguments)
            return (result, (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? "")
        }

        func cookie(_ name: String) -> String? {
            let lines = ((try? String(contentsOfFile: self.jar, encoding: .utf8)) ?? "").split(separator: "\n")
            return lines.compactMap { line -> String? in
                let fields = line.split(separator: "\t")
                return fields.count == 7 && fields[5] == name ? String(fields[6]) : nil
            }.last
        }

        static func csrf(_ html: String) -> String? {
            guard let range = html.range(of: #"name="csrf" value="([^"]+)""#, options: .regularExpression) else { return nil }
            return String(html[range].dropFirst(#"name="csrf" value=""#.count).dropLast())
        }
    }

    enum FormCoding {
        static func encode(_ value: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
        }
    }

    @Test("a sign-in served for longer than --request-timeout (the pairing service slow) is answered, not cut off with its enrollment code used")
    func slowSignInIsAnswered() async throws {
        let stack = try await GatewayStack.start(gatewayArguments: ["--request-timeout", "2"])
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: .coParent))
        let browser = Client(stack: stack, jar: stack.harness.directory.file("jar-slow"))
        let (form, _) = try await browser.get("/signin")
        let token = try #require(Client.csrf(form.body))
        // The pairing service stopped (SIGSTOP) while the form is sent: the enrollment waits.
        stack.harness.pairing.signal(SIGSTOP)
        defer { stack.harness.pairing.signal(SIGCONT) }
        async let signedIn = browser.post("/signin", form: ["csrf": token, "family": "smith", "code": code.code, "deviceName": "Laptop"],
                                          headers: ["Origin: \(stack.url)"])
        // The form has come and the enrollment waits: the request's deadline, if it still had
        // one, began before this line was logged.
        try await waitUntil("the sign-in waiting for the pairing service", detail: String(stack.gateway.log.suffix(2000))) {
            stack.gateway.log.contains("dashboard sign-in: enrolling")
        }
        // A connection opened now and silent is closed at its own deadline, so the sign-in's
        // has passed by then too.
        let silent = try await RawTLS.connect(stack)
        defer { silent.close() }
        #expect(try await silent.waitForClose() != nil, "the gateway closes a connection that sends nothing within --request-timeout")
        stack.harness.pairing.signal(SIGCONT)
        let (result, _) = try await signedIn
        #expect(result.status == 303 && browser.cookie("__Host-screentime_session") != nil, "\(result.status): \(result.body.prefix(400))")
    }

    @Test("sign-in sets a HttpOnly, Secure, SameSite=Strict session; forms need the session's CSRF token and this origin; a revoked session is refused at its next request")
    func sessions() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let invite = { () async throws -> EnrollmentCode in try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: .coParent)) }
            let directory = stack.harness.directory
            let browser = Client(stack: stack, jar: directory.file("jar-1"))
            let origin = "Origin: \(stack.url)"

            // Not signed in: pages send the browser to /signin; the device API is unchanged.
            let (home, homeHeaders) = try await browser.get("/")
            #expect(home.status == 303 && homeHeaders.lowercased().contains("location: /signin"), "\(home)")
            let (unknownPage, _) = try await browser.get("/nothing")
            #expect(unknownPage.status == 404 && unknownPage.body.contains("<html"))

            // The sign-in form: its token must come back with the cookie that carries it.
            let (form, formHeaders) = try await browser.get("/signin")
            #expect(form.status == 200)
            for header in ["content-security-policy: default-src 'none'", "x-frame-options: deny", "strict-transport-security: max-age=", "cache-control: no-store"] {
                #expect(formHeaders.lowercased().contains(header), "missing \(header): \(formHeaders)")
            }
            let signInToken = try #require(Client.csrf(form.body))
            let code = try await invite()
            let forged = try await browser.post("/signin", form: ["csrf": "forged", "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: [origin]).0
            #expect(forged.status == 403 && forged.body.contains("expired"))
            // (The refused attempt renewed the form's token: take the fresh one.)
            let token = try #require(Client.csrf(forged.body))
            #expect(token != signInToken)
            let wrongCode = try await browser.post("/signin", form: ["csrf": token, "family": "smith", "code": "nope.nope", "deviceName": "Laptop"], headers: [origin]).0
            #expect(wrongCode.status == 400 && wrongCode.body.contains("do not match"), "\(wrongCode.body)")
            let retry = try #require(Client.csrf(wrongCode.body))
            let (signedIn, signedInHeaders) = try await browser.post("/signin", form: ["csrf": retry, "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: [origin])
            #expect(signedIn.status == 303, "\(signedIn.body)")
            let setCookie = signedInHeaders.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("set-cookie: __host-screentime_session=") }.map(String.init) ?? ""
            for flag in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] { #expect(setCookie.contains(flag), "\(setCookie)") }
            let session = try #require(browser.cookie("__Host-screentime_session"))
            // A browser signed in before the cookie had its prefix keeps its session: the
            // next page moves it to the prefixed name and asks for itself again.
            let (moved, movedHeaders) = try await Client(stack: stack, jar: directory.file("jar-former"))
                .get("/apps?child=emma", headers: ["Cookie: screentime_session=\(session)"])
            #expect(moved.status == 303 && movedHeaders.contains("/apps?child=emma"), "\(movedHeaders)")
            #expect(movedHeaders.contains("__Host-screentime_session=\(session); Path=/") && movedHeaders.contains("screentime_session=; Path=/; Max-Age=0"),
                    "\(movedHeaders)")

            // The browser is a co-parent device like any other.
            let devices = try await family.parent.call(PairingMethods.listDevices, Empty()).devices
            let me = try #require(devices.first { $0.deviceId.hasPrefix("browser-") })
            #expect(me.role == .coParent && me.deviceName == "Laptop" && me.status == .active)

            // Pages: the overview; a form without the token, or from another origin, is refused.
            let (overview, _) = try await browser.get("/")
            #expect(overview.status == 200 && overview.body.contains("Overview"))
            let csrf = try #require(Client.csrf(overview.body))
            let rule = ["bundleId": "org.khan", "category": "learning", "pointsPerMinute": "2", "enabled": "true"]
            #expect(try await browser.post("/apps", form: rule, headers: [origin]).0.status == 403)
            #expect(try await browser.post("/apps", form: rule.merging(["csrf": "x"]) { $1 }, headers: [origin]).0.status == 403)
            #expect(try await browser.post("/apps", form: rule.merging(["csrf": csrf]) { $1 }, headers: ["Origin: https://evil.example"]).0.status == 403)
            let saved = try await browser.post("/apps", form: rule.merging(["csrf": csrf]) { $1 }, headers: [origin]).0
            #expect(saved.status == 303, "\(saved.body)")
            // Another session's token is worth nothing here.
            let other = Client(stack: stack, jar: directory.file("jar-2"))
            #expect(try await browser.post("/apps", form: rule.merging(["csrf": SessionToken.csrfOf(other)]) { $1 }, headers: [origin]).0.status == 403)

            // Nothing more than a parent device: a co-parent cannot invite parents (admins
            // only), from the page as from a phone; a local-only method stays refused.
            let invited = try await browser.post("/devices/invite-parent", form: ["csrf": csrf], headers: [origin]).0
            #expect(invited.status == 403 && invited.body.contains("Not allowed"), "\(invited.body)")
            // ... and is not shown the button.
            let devicesPage = try await browser.get("/devices").0
            #expect(devicesPage.status == 200 && !devicesPage.body.contains("id=\"invite-parent\"") && devicesPage.body.contains("only an admin parent"),
                    "\(devicesPage.body.prefix(3000))")
            let local = try await stack.rpc("pairing.createFamily", ["family": "other"], token: session)
            #expect(local.status == 403 && local.errorCode == "forbidden")
            // (The WebSocket's origin rule: DashboardOriginTests; swift-websocket's client sets
            // its own Origin, so it cannot play another site's page here.)

            // Revoked from a parent's phone: refused at the browser's very next request, and
            // the cookie is cleared.
            _ = try await family.parent.call(PairingMethods.revokeDevice, DeviceParams(deviceId: me.deviceId))
            let (after, afterHeaders) = try await browser.get("/")
            #expect(after.status == 303 && afterHeaders.contains("/signin?expired=1"), "\(after)")
            #expect(afterHeaders.contains("__Host-screentime_session=; Path=/; Max-Age=0"))
            let fragment = try await Client(stack: stack, jar: directory.file("jar-3")).get("/?fragment=1", headers: ["Cookie: __Host-screentime_session=\(session)"]).0
            #expect(fragment.status == 401)
        }
    }

    @Test("a child's device whose clock is hours ahead shows it on the Devices page, in words, beside its state")
    func clockShown() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let child = try await family.pairChild(stack.harness)
            let now = Date()
            let ahead = now.addingTimeInterval(2 * 3600)
            let saved = try await child.store.call(StoreMethods.modify, ModifyParams(family: family.family, zone: child.zone, saves: [
                RecordSave(recordType: "UsageRecord", recordName: "ahead", fields: [
                    "logicalID": "org.khan", "deviceID": .string(child.deviceId), "category": "learning",
                    "sessionStart": .date(ahead.addingTimeInterval(-1200)), "sessionEnd": .date(ahead.addingTimeInterval(-600)), "totalSeconds": 600,
                ]),
            ], atomic: true, deviceClock: ahead))
            #expect(saved.allSucceeded)

            let browser = Client(stack: stack, jar: stack.harness.directory.file("jar-clock"))
            let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: .coParent))
            let token = try await #require(Client.csrf(try browser.get("/signin").0.body))
            let signedIn = try await browser.post("/signin", form: ["csrf": token, "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: ["Origin: \(stack.url)"]).0
            #expect(signedIn.status == 303, "\(signedIn.body)")
            let page = try await eventually("the clock on the Devices page") { seen in
                let body = try await browser.get("/devices").0.body
                seen = String(body.prefix(200))
                return body.contains("clock 2 h ahead") ? body : nil
            }
            #expect(page.contains("data-field=\"clock\""))
        }
    }

    @Test("a pairing confirmed twice (a double tap, or the form sent again) shows the device paired; a reject after it is still refused")
    func confirmSentTwice() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let pending = try await family.pairChild(stack.harness, confirm: false)
            let origin = "Origin: \(stack.url)"
            let browser = Client(stack: stack, jar: stack.harness.directory.file("jar"))
            let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: .admin))
            let token = try await #require(Client.csrf(try browser.get("/signin").0.body))
            #expect(try await browser.post("/signin", form: ["csrf": token, "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: [origin]).0.status == 303)
            let page = "/devices/pair/\(pending.invitation.invitationId)"
            let csrf = try #require(Client.csrf(try await browser.get(page).0.body))
            for attempt in 1...2 {
                let (answer, headers) = try await browser.post(page + "/confirm", form: ["csrf": csrf], headers: [origin])
                #expect(answer.status == 303 && headers.lowercased().contains("location: \(page)"), "confirm \(attempt): \(answer.status) \(answer.body)")
                let shown = try await browser.get(page).0.body
                #expect(shown.contains("id=\"pair-done\"") && shown.contains("is paired with Emma"), "confirm \(attempt): \(shown)")
            }
            let rejected = try await browser.post(page + "/reject", form: ["csrf": csrf], headers: [origin]).0
            #expect(rejected.status >= 400 && rejected.body.contains("is confirmed already"), "\(rejected.status) \(rejected.body)")
        }
    }

    @Test("the server's state is on the Settings page of an admin parent only: a co-parent's has none of it")
    func serverStatusForAdminsOnly() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let origin = "Origin: \(stack.url)"
            var pages: [DeviceRole: String] = [:]
            for role in [DeviceRole.admin, .coParent] {
                let browser = Client(stack: stack, jar: stack.harness.directory.file("jar-\(role.rawValue)"))
                let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: role))
                let token = try await #require(Client.csrf(try browser.get("/signin").0.body))
                #expect(try await browser.post("/signin", form: ["csrf": token, "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: [origin]).0.status == 303)
                pages[role] = try await browser.get("/settings").0.body
            }
            #expect(pages[.admin]?.contains("id=\"server-heading\"") == true && pages[.admin]?.contains("Record store") == true)
            #expect(pages[.coParent]?.contains("id=\"server") == false, "a co-parent sees nothing of the server")
        }
    }

    @Test("sign-out revokes the browser's credential; the family's last admin cannot sign out")
    func signOut() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: .coParent))
            let browser = Client(stack: stack, jar: stack.harness.directory.file("jar"))
            let origin = "Origin: \(stack.url)"
            let token = try await #require(Client.csrf(try browser.get("/signin").0.body))
            #expect(try await browser.post("/signin", form: ["csrf": token, "family": "smith", "code": code.code, "deviceName": "Kitchen tablet"], headers: [origin]).0.status == 303)
            let session = try #require(browser.cookie("__Host-screentime_session"))
            let csrf = try await #require(Client.csrf(try browser.get("/").0.body))
            let (out, outHeaders) = try await browser.post("/signout", form: ["csrf": csrf], headers: [origin])
            #expect(out.status == 303 && outHeaders.contains("/signin?signedOut=1"))
            #expect(try await stack.rpc("pairing.listDevices", [:], token: session).status == 401)

            // The admin parent's phone cannot sign itself out: it is the family's last admin.
            let last = try await stack.rpc("pairing.signOut", [:], token: family.parentCredential.token)
            #expect(last.status == 403 && last.errorCode == "forbidden" && last.body.contains("last admin"))
        }
    }
}

extension DashboardHTTPTests {
    @Test("the dashboard is the gateway's own origin: another Host gets 421 (a sign-in with a forged Host and a matching Origin included), forms are form-encoded (415) and POST only (405), links use the gateway's own URL")
    func ownOrigin() async throws {
        try await GatewayStack.inProcess { stack in
            let family = try await Bootstrapped.make(stack.harness)
            let browser = Client(stack: stack, jar: stack.harness.directory.file("jar"))
            let origin = "Origin: \(stack.url)"
            let code = try await family.parent.call(PairingMethods.inviteParent, InviteParentParams(role: .admin))
            let signInToken = try await #require(Client.csrf(try browser.get("/signin").0.body))

            // Another host name, and an Origin to match it: refused before anything is read.
            let evil = ["Host: evil.example", "Origin: https://evil.example"]
            let (forgedHost, _) = try await browser.post("/signin", form: ["csrf": signInToken, "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: evil)
            #expect(forgedHost.status == 421 && forgedHost.body.contains(stack.endpoint.urls[0]), "\(forgedHost.status) \(forgedHost.body.prefix(300))")
            #expect(browser.cookie("__Host-screentime_session") == nil)
            #expect(try await browser.get("/", headers: ["Host: evil.example"]).0.status == 421)
            #expect(try await browser.get("/assets/dashboard.css", headers: ["Host: evil.example:\(stack.port)"]).0.status == 421)

            // Signed in from the gateway's own origin.
            let token = try await #require(Client.csrf(try browser.get("/signin").0.body))
            #expect(try await browser.post("/signin", form: ["csrf": token, "family": "smith", "code": code.code, "deviceName": "Laptop"], headers: [origin]).0.status == 303)
            let csrf = try await #require(Client.csrf(try browser.get("/").0.body))

            // A valid token in a body that is not a form: 415.
            let plain = try await browser.send("/apps", arguments: ["-H", "Content-Type: text/plain", "-H", origin, "--data-raw",
                                                              "csrf=\(csrf)&bundleId=org.khan&category=learning&pointsPerMinute=2"]).0
            #expect(plain.status == 415, "\(plain.status) \(plain.body.prefix(200))")
            // Forms only take POST.
            for path in ["/signout", "/devices/revoke", "/devices/invite-parent", "/devices/pair", "/devices/pair/0123456789abcdef/confirm"] {
                let (got, headers) = try await browser.get(path)
                #expect(got.status == 405 && headers.lowercased().contains("allow: post"), "GET \(path): \(got.status)")
            }

            // The co-parent link is the gateway's own URL, whatever spelling of it Host had.
            // (curl matches its jar's cookies against a Host header given: the session is given too.)
            let authority = "LOCALHOST:\(stack.port)"
            let session = try #require(browser.cookie("__Host-screentime_session"))
            let (invited, _) = try await browser.post("/devices/invite-parent", form: ["csrf": csrf], headers: [
                "Host: \(authority)", "Origin: https://\(authority)", "Cookie: __Host-screentime_session=\(session)",
            ])
            #expect(invited.status == 200, "\(invited.status) \(invited.body.prefix(300))")
            #expect(invited.body.contains("https://localhost:\(stack.port)/signin?family=smith"), "\(invited.body)")
            #expect(!invited.body.contains("LOCALHOST"))
        }
    }
}

/// Another browser's CSRF token: signs a second browser in and reads its overview's token.
enum SessionToken {
    static func csrfOf(_ client: DashboardHTTPTests.Client) async throws -> String {
        // Not signed in: the sign-in form's token is a stand-in (any token not this session's).
        let form = try await client.get("/signin").0
        return DashboardHTTPTests.Client.csrf(form.body) ?? "none"
    }
}
