import EdgeLimits
import AggregatorAPI
import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import PairingAPI
import QRCode
import RPCCore
import ServerStatus
import StoreAPI

/// The parent's web dashboard, on the gateway's origin and TLS: pages rendered
/// here from Mustache templates, a little JavaScript for live updates over `/v1/ws`.
///
/// The browser is a parent device of its own, enrolled with an enrollment code; its
/// credential is the `__Host-screentime_session` cookie (`HttpOnly; Secure; SameSite=Strict`).
/// Every page reads and writes through ``BrowserDevice``: the allowlist and the relay a
/// parent's phone uses, with the browser's credential, checked afresh on each request (a
/// session revoked elsewhere is refused at its next request). Forms carry a CSRF token
/// bound to the session and must come from this origin.
struct Dashboard: Sendable {
    let gateway: GatewayContext
    let keys: SessionKeys
    let invitations = InvitationSecrets()

    init(gateway: GatewayContext) {
        self.gateway = gateway
        self.keys = SessionKeys(directory: gateway.configuration.gatewayDirectory)
    }

    /// Whether a path is the dashboard's (everything but the device API).
    static func owns(_ path: String) -> Bool {
        !(path.hasPrefix("/v1/") || path == "/v1" || path == "/healthz")
    }

    /// A signed-in browser's request: its device and its session token.
    struct Session {
        let device: BrowserDevice
        let token: String
        var csrf: String
    }

    /// A long-lived cookie: the browser is an enrolled device until it signs out or is
    /// revoked (a cookie lost with the browser session would strand the device).
    static let sessionMaxAge = 400 * 86_400

    /// Forms are posted only to these; a GET of one is refused (405).
    static let postOnly: Set<String> = ["/signout", "/devices/pair", "/devices/revoke", "/devices/invite-parent", "/requests/answer"]

    func respond(to request: inout Request, address: String) async -> Response {
        let path = request.uri.path
        let query = FormData.parse(Substring(request.uri.query ?? ""))
        // Addressed to this gateway by one of its own names, or not served: the pages'
        // links, cookies and origin checks are all this gateway's origins.
        guard self.gateway.origins.isOwn(authority: request.head.authority) else {
            let own = self.gateway.origins.url(for: nil)
            return WebResponse.wantsHTML(request.headers)
                ? self.page(.misdirectedRequest, "message", title: "Wrong address", session: nil, data: [
                    "heading": "Open the dashboard at its own address", "kind": "error",
                    "text": "This server does not answer to the name in this address. Open \(own) instead.", "back": own, "backLabel": "Go to the dashboard",
                ])
                : JSONResponse.error(RPCError(.notFound, "this gateway does not answer to that host name; use \(own)")).withStatus(.misdirectedRequest)
        }
        if request.method == .post, !Self.isForm(request.headers) {
            return JSONResponse.error(RPCError(.invalidRequest, "the dashboard's forms are sent as application/x-www-form-urlencoded"))
                .withStatus(.unsupportedMediaType)
        }
        if request.method != .post, Self.postOnly.contains(path) || Self.isPairingDecision(path) || ChildAction(path)?.action != nil {
            return self.methodNotAllowed("POST")
        }
        if let asset = Assets.files[path] {
            guard request.method == .get || request.method == .head else { return self.methodNotAllowed("GET") }
            return WebResponse.make(.ok, contentType: asset.type, body: asset.body, cache: "public, max-age=3600")
        }
        switch (request.method, path) {
        case (.get, "/signin"):
            return self.signInPage(query: query, headers: request.headers)
        case (.post, "/signin"):
            let form = await self.form(&request)
            return await self.signIn(form: form, headers: request.headers, address: address)
        case (.get, "/favicon.ico"):
            return WebResponse.redirect("/assets/icon.svg")
        default:
            break
        }
        let known: Set<String> = ["/", "/signout", "/devices", "/devices/pair", "/devices/revoke", "/devices/invite-parent", "/apps", "/reports", "/reports.csv",
                                  "/activity", "/settings", "/requests/answer", "/digest"]
        guard known.contains(path) || path.hasPrefix("/devices/pair/") || ChildAction(path) != nil else {
            return WebResponse.wantsHTML(request.headers)
                ? self.page(.notFound, "message", title: "Not found", session: nil, data: ["heading": "Nothing here", "kind": "error", "text": "There is no page at this address.", "back": "/", "backLabel": "Go to the overview"])
                : JSONResponse.error(RPCError(.notFound, "nothing here; the device API is at /v1/rpc, /v1/ws and /v1/info, the dashboard at /"))
        }
        // Everything else needs a session.
        let fragment = query["fragment"] != nil
        let session: Session
        switch await self.session(request.headers) {
        case .none:
            return fragment ? self.unauthorized() : WebResponse.redirect("/signin")
        case .refused:
            // Revoked (signed out elsewhere, or from the devices page): the cookie goes too.
            var headers = HTTPFields()
            headers.append(HTTPField(name: .setCookie, value: Cookies.clear(Cookies.session)))
            headers.append(HTTPField(name: .setCookie, value: Cookies.clear(Cookies.formerSession)))
            return fragment ? self.unauthorized(headers) : WebResponse.redirect("/signin?expired=1", extra: headers)
        case .unavailable(let error):
            return self.errorPage(error, session: nil, back: "/")
        case .signedIn(let signedIn):
            session = signedIn
        }
        // Signed in under the cookie's former name: moved to the prefixed one, and the page
        // asked again (a form is served as it is, and the next page moves it).
        if Cookies.value(Cookies.session, in: request.headers) == nil, request.method == .get || request.method == .head {
            var headers = HTTPFields()
            headers.append(HTTPField(name: .setCookie, value: Cookies.set(Cookies.session, session.token, maxAge: Self.sessionMaxAge)))
            headers.append(HTTPField(name: .setCookie, value: Cookies.clear(Cookies.formerSession)))
            return WebResponse.redirect(path + (request.uri.query.map { "?" + $0 } ?? ""), extra: headers)
        }
        if request.method == .post {
            let form = await self.form(&request)
            guard Self.sameOrigin(request.headers, origins: self.gateway.origins), self.keys.checkCSRF(form["csrf"], session: session.token) else {
                return self.page(.forbidden, "message", title: "Refused", session: session, data: [
                    "heading": "This form has expired", "kind": "error",
                    "text": "The form was not sent from this dashboard's page, or it is too old. Open the page again and retry.", "back": "/", "backLabel": "Go to the overview",
                ])
            }
            return await self.post(path, form: form, session: session, headers: request.headers, authority: request.head.authority)
        }
        guard request.method == .get || request.method == .head else { return self.methodNotAllowed("GET, HEAD") }
        do throws(RPCError) {
            switch path {
            case "/": return try await self.overview(session, fragment: fragment, query: query)
            case "/devices": return try await self.devicesPage(session, fragment: fragment, query: query, headers: request.headers)
            case "/apps": return try await self.appsPage(session, fragment: fragment, query: query)
            case "/reports": return try await self.reportsPage(session, query: query)
            case "/digest": return try await self.digestPage(session, query: query)
            case "/reports.csv": return try await self.csv(session, query: query)
            case "/activity": return try await self.activityPage(session, fragment: fragment)
            case "/settings": return try await self.settingsPage(session, query: query)
            case _ where ChildAction(path) != nil: return try await self.childPage(session, id: ChildAction(path)!.child, fragment: fragment, query: query)
            default:
                let parts = path.split(separator: "/")
                if parts.count == 3, parts[1] == "pair" { return try await self.pairPage(session, invitationId: String(parts[2]), fragment: fragment) }
                return WebResponse.redirect("/devices")
            }
        } catch {
            return self.errorPage(error, session: session, back: "/")
        }
    }

    // MARK: Sessions

    enum SessionState {
        case none
        case refused
        case unavailable(RPCError)
        case signedIn(Session)
    }

    func session(_ headers: HTTPFields) async -> SessionState {
        guard let token = Cookies.session(in: headers) else { return .none }
        do {
            // Fresh: a session revoked from another device is refused at its very next request.
            let identity = try await self.gateway.relay.authenticator.identify(token, fresh: true)
            guard identity.caller == .parent else { return .refused }
            return .signedIn(Session(device: BrowserDevice(identity: identity, gateway: self.gateway), token: token, csrf: self.keys.csrfToken(session: token)))
        } catch {
            return error.code == .unauthorized || error.code == .deviceRevoked ? .refused : .unavailable(ServiceRelay.presentable(error, service: "store"))
        }
    }

    /// A form must come from a page of this gateway's origins: `Origin` (sent by browsers
    /// with every POST), when present, names one of them. SameSite=Strict and the CSRF
    /// token do the rest.
    static func sameOrigin(_ headers: HTTPFields, origins: Origins) -> Bool {
        guard let origin = headers[HTTPField.Name("Origin")!] else { return true }
        return origins.isOwn(origin: origin)
    }

    /// `Content-Type: application/x-www-form-urlencoded` (with or without parameters).
    static func isForm(_ headers: HTTPFields) -> Bool {
        guard let type = headers[.contentType]?.split(separator: ";").first else { return false }
        return type.trimmingCharacters(in: .whitespaces).lowercased() == "application/x-www-form-urlencoded"
    }

    /// `/devices/pair/<invitation>/confirm` or `/reject`.
    static func isPairingDecision(_ path: String) -> Bool {
        let parts = path.split(separator: "/")
        return parts.count == 4 && parts[0] == "devices" && parts[1] == "pair" && (parts[3] == "confirm" || parts[3] == "reject")
    }

    /// The largest form body a dashboard page takes.
    static let maximumFormSize = 64 << 10

    func form(_ request: inout Request) async -> [String: String] {
        guard let body = try? await request.collectBody(upTo: Self.maximumFormSize) else { return [:] }
        return FormData.parse(Substring(String(buffer: body)))
    }

    // MARK: Signing in and out

    func signInPage(query: [String: String], headers: HTTPFields, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let token = SessionKeys.random()
        var data: [String: Any] = [
            "csrf": token, "family": query["family"] ?? "", "code": query["code"] ?? "",
            "deviceName": query["deviceName"] ?? "Browser", "displayName": query["displayName"] ?? "",
        ]
        if let error { data["error"] = error }
        if query["expired"] != nil { data["notice"] = "This browser was signed out. Sign in again with a new code." }
        if query["signedOut"] != nil { data["notice"] = "Signed out: this browser's credential is revoked." }
        var extra = HTTPFields()
        extra.append(HTTPField(name: .setCookie, value: Cookies.set(Cookies.signIn, token, path: "/signin", maxAge: 3600)))
        return self.page(status, "signin", title: "Sign in", session: nil, data: data, extra: extra)
    }

    func signIn(form: [String: String], headers: HTTPFields, address: String) async -> Response {
        guard Self.sameOrigin(headers, origins: self.gateway.origins), let expected = Cookies.value(Cookies.signIn, in: headers), SessionKeys.constantTimeEqual(form["csrf"] ?? "", expected) else {
            return self.signInPage(query: form, headers: headers, error: "The sign-in form had expired; it is fresh now, send it again.", status: .forbidden)
        }
        guard self.gateway.rateLimiter.allow(address) else {
            return self.signInPage(query: form, headers: headers, error: "Too many attempts from this address; wait a minute.", status: .tooManyRequests)
        }
        let family = (form["family"] ?? "").trimmingCharacters(in: .whitespaces)
        let code = (form["code"] ?? "").trimmingCharacters(in: .whitespaces)
        let deviceName = (form["deviceName"] ?? "").trimmingCharacters(in: .whitespaces)
        let displayName = (form["displayName"] ?? "").trimmingCharacters(in: .whitespaces)
        let deviceId = DeviceInfo.browserSessionPrefix + SessionKeys.random(bytes: 6).lowercased().filter { $0.isLetter || $0.isNumber }
        self.gateway.logger.debug("dashboard sign-in: enrolling", metadata: ["family": "\(family)", "device_id": "\(deviceId)", "remote_address": "\(address)"])
        do {
            let credential = try await BrowserDevice.call(PairingMethods.enrollParent, EnrollParentParams(
                family: family, code: code, deviceId: deviceId, deviceName: deviceName.isEmpty ? "Browser" : deviceName,
                displayName: displayName.isEmpty ? nil : displayName), identity: nil, from: AddressKey.of(address), gateway: self.gateway)
            self.gateway.logger.notice("dashboard sign-in", metadata: ["family": "\(credential.family)", "device_id": "\(deviceId)", "remote_address": "\(address)"])
            var extra = HTTPFields()
            extra.append(HTTPField(name: .setCookie, value: Cookies.set(Cookies.session, credential.token, maxAge: Self.sessionMaxAge)))
            extra.append(HTTPField(name: .setCookie, value: Cookies.clear(Cookies.signIn, path: "/signin")))
            return WebResponse.redirect("/", extra: extra)
        } catch {
            let message = error.code == .invitationInvalid
                ? "That family and code do not match a valid enrollment code (codes work once and expire). Ask a parent for a new one."
                : error.message
            return self.signInPage(query: form, headers: headers, error: message, status: JSONResponse.status(for: error.code))
        }
    }

    // MARK: Forms

    func post(_ path: String, form: [String: String], session: Session, headers: HTTPFields, authority: String?) async -> Response {
        let device = session.device
        do throws(RPCError) {
            switch path {
            case "/signout":
                _ = try await device.call(PairingMethods.signOut, Empty())
                self.gateway.logger.notice("dashboard sign-out", metadata: ["family": "\(device.family)", "device_id": "\(device.deviceId)"])
                var extra = HTTPFields()
                extra.append(HTTPField(name: .setCookie, value: Cookies.clear(Cookies.session)))
                extra.append(HTTPField(name: .setCookie, value: Cookies.clear(Cookies.formerSession)))
                return WebResponse.redirect("/signin?signedOut=1", extra: extra)
            case "/devices/pair":
                let childId = (form["childId"] ?? "").trimmingCharacters(in: .whitespaces)
                let childName = (form["childName"] ?? "").trimmingCharacters(in: .whitespaces)
                let invitation = try await device.call(PairingMethods.createInvitation, CreateInvitationParams(childId: childId, childName: childName.isEmpty ? nil : childName))
                self.invitations.keep(invitation.invitationId, .init(secret: invitation.secret, uri: invitation.uri, deviceId: device.deviceId, expiresAt: invitation.expiresAt))
                return WebResponse.redirect("/devices/pair/\(invitation.invitationId)")
            case "/devices/revoke":
                let revoked = try await device.call(PairingMethods.revokeDevice, DeviceParams(deviceId: form["deviceId"] ?? ""))
                return WebResponse.redirect("/devices?revoked=\(FormData.encode(revoked.deviceName ?? revoked.deviceId))")
            case "/devices/invite-parent":
                let code = try await device.call(PairingMethods.inviteParent, InviteParentParams(role: .coParent))
                let clock = try await device.clock()
                let origin = self.gateway.origins.url(for: authority)
                let link = "\(origin)/signin?family=\(FormData.encode(code.family))&code=\(FormData.encode(code.code))"
                return try await self.devicesPage(session, fragment: false, query: [:], headers: headers, parentCode: [
                    "family": code.family, "code": code.code, "link": link, "expires": clock.time(code.expiresAt),
                ])
            case "/apps":
                guard let bundleId = form["bundleId"]?.trimmingCharacters(in: .whitespaces), !bundleId.isEmpty,
                      bundleId.range(of: #"^[A-Za-z0-9._-]{1,200}$"#, options: .regularExpression) != nil else {
                    throw RPCError.invalidParams("bundleId", "is letters, digits, '.', '_' or '-'")
                }
                let category = form["category"] ?? ""
                guard category == "learning" || category == "reward" else { throw RPCError.invalidParams("category", "is learning or reward") }
                guard let points = Int(form["pointsPerMinute"] ?? "1"), (0...1000).contains(points) else {
                    throw RPCError.invalidParams("pointsPerMinute", "is a whole number from 0 to 1000")
                }
                let told = try await device.saveAppRule(bundleId: bundleId, category: category, pointsPerMinute: points,
                                                        enabled: form["enabled"] == "true", blocked: form["blocked"] == "true", displayName: form["displayName"])
                return WebResponse.redirect("/apps?saved=\(FormData.encode(bundleId))&told=\(told)")
            case "/settings":
                let number = { (name: String, range: ClosedRange<Int>) throws(RPCError) -> Int? in
                    let text = (form[name] ?? "").trimmingCharacters(in: .whitespaces)
                    if text.isEmpty { return nil }
                    guard let value = Int(text), range.contains(value) else { throw RPCError.invalidParams(name, "is a whole number from \(range.lowerBound) to \(range.upperBound), or empty") }
                    return value
                }
                try await device.saveSettings(timeZone: (form["timeZone"] ?? "").trimmingCharacters(in: .whitespaces),
                                              rewardMinutes: try number("rewardMinutes", 1...1440), balanceExhausted: form["balanceExhausted"] == "true",
                                              noDataHours: try number("noDataHours", 1...720), requestExpiryMinutes: try number("requestExpiryMinutes", 5...1440),
                                              maxOpenRequests: try number("maxOpenRequests", 1...20),
                                              digest: (form["digestEnabled"] == "true", form["digestDay"] ?? "sun", form["digestTime"] ?? "18:00"))
                return WebResponse.redirect("/settings?saved=1")
            case "/requests/answer":
                return try await self.answer(form, device: device)
            case _ where ChildAction(path)?.action != nil:
                return try await self.childAction(ChildAction(path)!, form: form, device: device)
            default:
                let parts = path.split(separator: "/")
                if parts.count == 4, parts[1] == "pair", parts[3] == "confirm" || parts[3] == "reject" {
                    let params = InvitationParams(invitationId: String(parts[2]))
                    let confirming = parts[3] == "confirm"
                    do {
                        _ = try await device.call(confirming ? PairingMethods.confirm : PairingMethods.reject, params)
                    } catch let refused as RPCError where refused.code == .conflict {
                        // The same answer twice (a double tap, or a browser sending the form
                        // again after a lost connection): the page shows what is now so.
                        let status = try await device.call(PairingMethods.invitationStatus, params).status
                        guard status == (confirming ? .confirmed : .rejected) else { throw refused }
                    }
                    return WebResponse.redirect("/devices/pair/\(parts[2])")
                }
                return self.methodNotAllowed("GET")
            }
        } catch {
            let child = ChildAction(path).map { "/children/\($0.child)" }
            return self.errorPage(error, session: session, back: child ?? (path.hasPrefix("/devices") ? "/devices" : ["/apps", "/settings"].contains(path) ? path : "/"))
        }
    }

    // MARK: Pages

    func overview(_ session: Session, fragment: Bool, query: [String: String] = [:]) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let children = try await session.device.overview(clock)
        let requests = try await session.device.openRequests(clock)
        let chores = try await session.device.waitingChores(clock)
        let live = Templates.render("overviewLive", ["children": children, "requests": requests, "hasRequests": !requests.isEmpty, "csrf": session.csrf, "back": "/",
                                                     "waitingChores": chores, "hasWaitingChores": !chores.isEmpty])
        if fragment { return WebResponse.html(live) }
        var data: [String: Any] = ["live": live, "today": clock.today, "navOverview": true]
        if let removed = query["removed"] {
            let devices = Int(query["devices"] ?? "") ?? 0
            data["notice"] = "Removed \(removed): \(devices == 1 ? "1 device was" : "\(devices) devices were") cut off and what was recorded for them deleted."
        }
        return self.page(.ok, "overview", title: "Overview", session: session, clock: clock, data: data)
    }

    func childPage(_ session: Session, id: String, fragment: Bool, query: [String: String]) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        var data = try await session.device.childPage(id, clock)
        data["csrf"] = session.csrf
        data["back"] = "/children/\(id)"
        let live = Templates.render("childLive", data)
        if fragment { return WebResponse.html(live) }
        data["live"] = live
        data["navOverview"] = true
        data["notice"] = query["done"].flatMap { ChildAction.notices[$0] }
        return self.page(.ok, "child", title: data["name"] as? String ?? id, session: session, clock: clock, data: data)
    }

    // MARK: Everyday parenting

    /// Approve or Deny, from the Overview or a child's page; another parent's earlier
    /// answer is said as the error page's sentence ("Dad already approved this request…").
    func answer(_ form: [String: String], device: BrowserDevice) async throws(RPCError) -> Response {
        let approve = form["decision"] == "approve"
        guard approve || form["decision"] == "deny" else { throw RPCError.invalidParams("decision", "is approve or deny") }
        var minutes: Int64?
        if approve, let text = form["minutes"]?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
            guard let value = Int64(text) else { throw RPCError.invalidParams("minutes", "is a whole number of minutes") }
            minutes = value
        }
        let reply = (form["reply"] ?? "").trimmingCharacters(in: .whitespaces)
        let answered = try await device.call(AggregatorMethods.answerRequest, AnswerRequestParams(
            request: form["request"] ?? "", approve: approve, minutes: minutes, reply: reply.isEmpty ? nil : reply))
        let back = form["back"].flatMap { $0.hasPrefix("/children/") && !$0.contains("?") ? $0 : nil } ?? "/children/\(answered.child)"
        return WebResponse.redirect("\(back)?done=\(approve ? "approved" : "denied")")
    }

    func childAction(_ target: ChildAction, form: [String: String], device: BrowserDevice) async throws(RPCError) -> Response {
        let reason = (form["reason"] ?? "").trimmingCharacters(in: .whitespaces)
        let child = target.child
        func minutes(_ name: String, required: Bool) throws(RPCError) -> Int64? {
            let text = (form[name] ?? "").trimmingCharacters(in: .whitespaces)
            if text.isEmpty && !required { return nil }
            guard let value = Int64(text), (1...1440).contains(value) else { throw RPCError.invalidParams(name, "is a whole number of minutes from 1 to 1440") }
            return value
        }
        let done: String
        switch target.action {
        case "time":
            let amount = try minutes("minutes", required: true) ?? 0
            let take = form["direction"] == "take"
            let result = try await device.call(AggregatorMethods.grant, GrantParams(child: child, minutes: take ? -amount : amount, reason: reason.isEmpty ? nil : reason))
            done = !take ? "added" : result.points == 0 ? "nothingToTake" : result.points == result.askedPoints ? "taken" : "tookAll"
        case "pause":
            _ = try await device.call(AggregatorMethods.pause, PauseParams(child: child, minutes: try minutes("minutes", required: false), reason: reason.isEmpty ? nil : reason))
            done = "paused"
        case "resume":
            _ = try await device.call(AggregatorMethods.resume, ResumeParams(child: child))
            done = "resumed"
        case "chores":
            _ = try await device.call(AggregatorMethods.setChore, try BrowserDevice.chore(from: form, child: child))
            done = "choreAdded"
        case "chore-remove":
            _ = try await device.call(AggregatorMethods.setChore, SetChoreParams(id: form["chore"] ?? "", remove: true))
            done = "choreRemoved"
        case "chore-answer":
            let approve = form["decision"] == "approve"
            guard approve || form["decision"] == "reject" else { throw RPCError.invalidParams("decision", "is approve or reject") }
            _ = try await device.call(AggregatorMethods.answerChore, AnswerChoreParams(completion: form["completion"] ?? "", approve: approve,
                                                                                       reason: reason.isEmpty ? nil : reason))
            done = approve ? "choreApproved" : "choreRejected"
        case "rules":
            try await device.saveChildRule(child, form: form)
            done = "ruleSaved"
        case "rule-reset":
            try await device.resetChildRule(child, bundleId: form["bundleId"] ?? "")
            done = "ruleReset"
        case "downtime":
            let windows = form["off"] == "1" ? [] : try BrowserDevice.windows(from: form)
            // One checkbox per app (`allow-<n>`, its value the app's id): those ticked.
            let allowed = form.filter { $0.key.hasPrefix("allow-") }.sorted { $0.key < $1.key }.map(\.value).filter { !$0.isEmpty }
            let schedule = try await device.call(AggregatorMethods.setSchedule, SetScheduleParams(
                child: child, windows: windows, alwaysAllowed: allowed, liftOnApproval: form["liftOnApproval"] == "true"))
            done = schedule.windows.isEmpty ? "downtimeOff" : schedule.active ? "downtimeOn" : "downtime"
        case "limits":
            let cap = try minutes("cap", required: false)
            try await device.saveChildLimits(child, capMinutes: cap.map(Int.init), weeklyExpiry: form["weeklyExpiry"] == "true")
            done = "limits"
        case "resync":
            _ = try await device.call(AggregatorMethods.resync, ResyncParams(deviceId: form["deviceId"] ?? ""))
            done = "resynced"
        case "redeem":
            guard let points = Int64((form["points"] ?? "").trimmingCharacters(in: .whitespaces)), (1...100_000).contains(points) else {
                throw RPCError.invalidParams("points", "is a whole number of points from 1 to 100000")
            }
            guard !reason.isEmpty else { throw RPCError.invalidParams("reason", "says what the points are redeemed for") }
            // The form's own key: sent twice (a retry, a double click), it redeems once.
            let key = (form["key"] ?? "").trimmingCharacters(in: .whitespaces)
            guard key.range(of: #"^[A-Za-z0-9-]{8,64}$"#, options: .regularExpression) != nil else { throw RPCError.invalidParams("key", "is missing: open the page again") }
            try await device.redeem(child, points: points, reason: reason, key: "redeem-\(key)")
            done = "redeemed"
        case "remove":
            let removed = try await device.call(PairingMethods.removeChild, RemoveChildParams(childId: child))
            return WebResponse.redirect("/?removed=\(FormData.encode(child))&devices=\(removed.revokedDevices.count)")
        default:
            return self.methodNotAllowed("GET")
        }
        return WebResponse.redirect("/children/\(child)?done=\(done)")
    }

    func devicesPage(_ session: Session, fragment: Bool, query: [String: String], headers: HTTPFields, parentCode: [String: Any]? = nil) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let (rows, hidden, admin) = try await session.device.deviceRows(clock, all: query["all"] == "1")
        let live = Templates.render("devicesLive", ["devices": rows, "hasDevices": !rows.isEmpty, "csrf": session.csrf,
                                                    "hasHiddenBrowsers": hidden > 0, "hiddenBrowsers": hidden, "hiddenPlural": hidden == 1 ? "" : "s"])
        if fragment { return WebResponse.html(live) }
        var data: [String: Any] = ["live": live, "navDevices": true, "all": query["all"] == "1", "admin": admin]
        if let revoked = query["revoked"] { data["notice"] = "\(revoked) is revoked: it was cut off." }
        if let parentCode { data["parentCode"] = parentCode }
        return self.page(.ok, "devices", title: "Devices", session: session, clock: clock, data: data)
    }

    func pairPage(_ session: Session, invitationId: String, fragment: Bool) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let info = try await session.device.call(PairingMethods.invitationStatus, InvitationParams(invitationId: invitationId))
        let kept = self.invitations.entry(invitationId, deviceId: session.device.deviceId)
        // The child's name where it has one: the invitation's (the title of the MonitoringSession
        // record `session` the pairing service writes in the child's new zone), else the
        // ChildContext's (a child paired before), else its id.
        var childName = (try? await session.device.fetch(MonitoringSession.self, "session", zone: info.zone))??.title
        if childName == nil { childName = try await session.device.children().first { $0.id == info.childId }?.name }
        var data: [String: Any] = [
            "invitationId": info.invitationId, "status": info.status.rawValue, "childName": childName ?? info.childId,
            "deviceName": info.deviceName ?? info.deviceId ?? "The device", "expires": clock.time(info.expiresAt), "csrf": session.csrf,
        ]
        switch info.status {
        case .open:
            if let kept {
                data["open"] = true
                data["uri"] = kept.uri
                data["qr"] = (try? QRCode(encoding: kept.uri).svg(scale: 6))?.replacingOccurrences(of: #"<?xml version="1.0" encoding="UTF-8"?>"#, with: "")
                    .replacingOccurrences(of: "<svg ", with: #"<svg role="img" aria-label="Pairing QR code" "#) ?? ""
            } else {
                data["ended"] = true
                data["status"] = "no longer shown here (the server restarted)"
            }
        case .accepted:
            data["accepted"] = true
            if let kept, let child = info.deviceId {
                let code = ShortCode(secret: kept.secret, invitationId: info.invitationId, parentDeviceId: info.parentDeviceId, childDeviceId: child)
                data["shortCode"] = ["emoji": code.emojiLine, "names": code.namesLine]
            }
        case .confirmed: data["confirmed"] = true
        case .rejected: data["rejected"] = true
        default: data["ended"] = true
        }
        let live = Templates.render("pairLive", data)
        if fragment { return WebResponse.html(live) }
        data["live"] = live
        data["navDevices"] = true
        return self.page(.ok, "pair", title: "Pair a device", session: session, clock: clock, data: data)
    }

    func appsPage(_ session: Session, fragment: Bool, query: [String: String]) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let commands = try await session.device.recentCommands(clock)
        let live = Templates.render("appsLive", ["commands": commands, "hasCommands": !commands.isEmpty])
        if fragment { return WebResponse.html(live) }
        let search = query["q"] ?? "", category = query["category"] ?? ""
        let rules = try await session.device.appRules(search: search, category: category)
        var data: [String: Any] = [
            "live": live, "rules": rules, "q": search, "allCategories": category.isEmpty, "filterLearning": category == "learning",
            "filterReward": category == "reward", "filtered": !search.isEmpty || !category.isEmpty, "navApps": true,
        ]
        if let saved = query["saved"] {
            let told = Int(query["told"] ?? "0") ?? 0
            let name = rules.first { $0["bundleId"] as? String == saved }?["name"] as? String ?? saved
            data["notice"] = told == 0 ? "Saved \(name). No child device is paired yet: each gets the family's rules when it is."
                : "Saved \(name); the family's rules go to \(told) device\(told == 1 ? "" : "s")."
        }
        return self.page(.ok, "apps", title: "Apps", session: session, clock: clock, data: data)
    }

    func reportsPage(_ session: Session, query: [String: String]) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let children = try await session.device.children()
        let child = query["child"] ?? children.first?.id ?? ""
        let from = query["from"] ?? clock.day(daysAgo: 6), to = query["to"] ?? clock.today
        let by: ReportPeriod = query["by"] == "week" ? .week : .day
        var data: [String: Any] = [
            "children": children.map { ["id": $0.id, "name": $0.name, "selected": $0.id == child] as [String: Any] }, "hasChildren": !children.isEmpty,
            "from": from, "to": to, "byDay": by == .day, "byWeek": by == .week, "navReports": true,
        ]
        if !children.isEmpty && to < from {
            // Said as a parent reads it, not as the aggregator names its parameters.
            data["error"] = "The end date (\(to)) is before the start date (\(from)): pick an end on or after the start."
        } else if !children.isEmpty {
            do throws(RPCError) {
                let report = try await session.device.call(AggregatorMethods.report, ReportParams(child: child, from: from, to: to, by: by))
                let appNames = try await session.device.appNames()
                let childName = children.first { $0.id == child }?.name ?? child
                let csvQuery = "child=\(FormData.encode(child))&from=\(FormData.encode(from))&to=\(FormData.encode(to))"
                data["report"] = [
                    "childName": childName, "from": from, "to": to,
                    "learning": FamilyClock.duration(report.learningSeconds), "reward": FamilyClock.duration(report.rewardSeconds), "points": report.points,
                    "period": by == .day ? "day" : "week", "chart": ReportChart.svg(report, subject: childName),
                    "csvLink": "/reports.csv?\(csvQuery)", "csvName": "screentime-\(child)-\(from)-\(to).csv",
                    "rows": report.rows.map { ["period": $0.period, "learning": FamilyClock.duration($0.learningSeconds), "reward": FamilyClock.duration($0.rewardSeconds), "points": $0.points] as [String: Any] },
                    "topApps": report.topApps.map { ["app": appNames[$0.app] ?? $0.app, "category": $0.category ?? "uncategorised", "time": FamilyClock.duration($0.seconds), "points": $0.points] as [String: Any] },
                ] as [String: Any]
            } catch {
                data["error"] = error.message
            }
        }
        return self.page(.ok, "reports", title: "Reports", session: session, clock: clock, data: data)
    }

    func activityPage(_ session: Session, fragment: Bool) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let (alerts, entries) = try await session.device.activity(clock)
        let live = Templates.render("activityLive", ["alerts": alerts, "hasAlerts": !alerts.isEmpty, "entries": entries, "hasEntries": !entries.isEmpty])
        if fragment { return WebResponse.html(live) }
        return self.page(.ok, "activity", title: "Activity", session: session, clock: clock, data: ["live": live, "navActivity": true])
    }

    /// The week's digest, as the parents' weekly notification says it, with the week before.
    func digestPage(_ session: Session, query: [String: String]) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let through = query["through"].flatMap { $0.isEmpty ? nil : $0 }
        let digest = try await session.device.call(AggregatorMethods.digest, DigestParams(through: through))
        let next = FamilyClock.day(digest.to, plus: 7)
        let data: [String: Any] = [
            "title": digest.title, "from": digest.from, "to": digest.to, "navReports": true,
            "previous": FamilyClock.day(digest.to, plus: -7), "next": next, "hasNext": next <= FamilyClock.day(clock.today, plus: 6),
            "children": digest.children.map { week -> [String: Any] in
                func change(_ figure: DigestFigure, time: Bool) -> String {
                    let amount = time ? TimeRequestInfo.minutesWords(abs(figure.change) / 60) : "\(abs(figure.change))"
                    return figure.change == 0 ? "as the week before" : "\(figure.change > 0 ? "+" : "−")\(amount) on the week before"
                }
                return [
                    "child": week.child, "name": week.childName, "sentence": week.sentence,
                    "learning": FamilyClock.duration(week.learningSeconds.value), "learningChange": change(week.learningSeconds, time: true),
                    "reward": FamilyClock.duration(week.rewardSeconds.value), "rewardChange": change(week.rewardSeconds, time: true),
                    "earned": week.pointsEarned.value, "earnedChange": change(week.pointsEarned, time: false),
                    "spent": week.pointsSpent.value, "requests": "\(week.requestsAsked) asked, \(week.requestsApproved) approved, \(week.requestsDenied) denied",
                    "chores": week.choresDone, "topApps": week.topApps.map { ["name": $0.name, "time": FamilyClock.duration($0.seconds)] },
                    "hasTopApps": !week.topApps.isEmpty,
                ]
            },
            "hasChildren": !digest.children.isEmpty,
        ]
        return self.page(.ok, "digest", title: "The week", session: session, clock: clock, data: data)
    }

    func settingsPage(_ session: Session, query: [String: String]) async throws(RPCError) -> Response {
        let family = try await session.device.settings()
        let clock = FamilyClock(timeZone: family?.timeZone)
        var data: [String: Any] = [
            "timeZone": clock.timeZoneName, "zones": TimeZone.knownTimeZoneIdentifiers.sorted(),
            "rewardMinutes": family?.alertRewardMinutesPerDay.map { "\($0)" } ?? "",
            "noDataHours": family?.alertNoDataHours.map { "\($0)" } ?? "",
            "balanceExhausted": family?.alertOnBalanceExhausted ?? true, "navSettings": true,
            "requestExpiryMinutes": "\(family?.requestExpiryMinutes ?? 120)", "maxOpenRequests": "\(family?.maxOpenRequests ?? 3)",
            "digestEnabled": family?.digestEnabled ?? true, "digestTime": family?.digestTime ?? "18:00",
            "digestDays": Weekday.allCases.map { ["day": $0.rawValue, "name": $0.name, "selected": $0.rawValue == (family?.digestDay ?? "sun")] },
        ]
        if query["saved"] != nil { data["notice"] = "Saved. Days are counted in \(clock.timeZoneName) from now on (the days held in detail are counted again)." }
        // The server's backups: shown when the aggregator can say (an older one cannot).
        if let backups = try? await session.device.call(AggregatorMethods.backupState, Empty()) { data["backups"] = Self.backupLines(backups, clock) }
        // The server itself, for the parents who run it.
        if (try? await session.device.devices())?.first(where: { $0.deviceId == session.device.deviceId })?.role == .admin {
            data["server"] = self.serverLines(clock)
        }
        return self.page(.ok, "settings", title: "Settings", session: session, clock: clock, data: data)
    }

    /// The server's state in sentences (``ServerStatus``): its services, disk, certificate
    /// and the devices connected now.
    func serverLines(_ clock: FamilyClock) -> [String: Any] {
        let configuration = self.gateway.configuration
        var report = ServerStatus.report(runtimeDirectory: configuration.runtimeDirectory, stateDirectory: configuration.stateDirectory)
        report.devicesConnected = self.gateway.metrics.websocketsOpen
        let healthy = report.services.allSatisfy(\.isHealthy) && report.disk?.isLow != true
        var lines: [String: Any] = [
            "version": "ScreenTime Rewards Server \(report.version).",
            "health": healthy ? "Everything is working." : "Something needs attention: see below.",
            "healthy": healthy,
            "services": report.services.map { ["name": $0.displayName, "sentence": $0.sentence(time: clock.time), "failed": $0.state == .failed, "id": "service-\($0.service)"] },
            "devices": report.devicesConnected == 1 ? "1 phone, tablet or browser is connected now." : "\(report.devicesConnected ?? 0) phones, tablets and browsers are connected now.",
        ]
        if let disk = report.disk {
            lines["disk"] = "Disk space for the server's data: \(disk.sentence)"
            lines["diskLow"] = disk.isLow
        }
        if let expiry = report.certificateNotValidAfter {
            lines["certificate"] = "The gateway's certificate is valid until \(clock.time(expiry)); the server renews it by itself before then."
        }
        return lines
    }

    /// How the nightly backups go, in sentences.
    static func backupLines(_ state: ServerBackupState, _ clock: FamilyClock) -> [String: Any] {
        func when(_ ms: Int64) -> String {
            let date = Date(timeIntervalSince1970: Double(ms) / 1000)
            return "\(clock.time(date)) (\(clock.ago(date)))"
        }
        var lines: [String: Any] = [:]
        if let since = state.failingSince {
            lines["failing"] = "The nightly backup has failed since \(when(since)): \(state.problem ?? "see the server's journal")."
        }
        if let success = state.lastSuccessAt {
            let size = state.bytes.map { ", " + ByteCountFormatter.string(fromByteCount: $0, countStyle: .file) } ?? ""
            lines["last"] = "The last backup that worked: \(when(success))\(size)\(state.copiedTo.map { ", copied to \($0)" } ?? "")."
        } else if state.lastRunAt == nil {
            lines["never"] = "No nightly backup has run yet. The server makes one each night; whoever runs it can make one now with sudo screentimectl backup."
        }
        return lines
    }

    func csv(_ session: Session, query: [String: String]) async throws(RPCError) -> Response {
        let clock = try await session.device.clock()
        let child = query["child"] ?? ""
        let from = query["from"] ?? clock.day(daysAgo: 6), to = query["to"] ?? clock.today
        let export = try await session.device.call(AggregatorMethods.exportCSV, ReportParams(child: child, from: from, to: to))
        let name = "screentime-\(child)-\(from)-\(to).csv".filter { $0.isLetter || $0.isNumber || "-._".contains($0) }
        return WebResponse.make(.ok, contentType: "text/csv; charset=utf-8", body: export.csv, extra: [.contentDisposition: "attachment; filename=\"\(name)\""])
    }

    // MARK: Rendering

    func page(_ status: HTTPResponse.Status, _ template: String, title: String, session: Session?, clock: FamilyClock? = nil, data: [String: Any], extra: HTTPFields = [:]) -> Response {
        var data = data
        if let session { data["csrf"] = session.csrf }
        let body = Templates.render(template, data)
        var layout: [String: Any] = ["title": title, "body": body, "signedIn": session != nil]
        for key in ["navOverview", "navApps", "navReports", "navDevices", "navActivity", "navSettings"] where data[key] != nil { layout[key] = true }
        if let session { layout["csrf"] = session.csrf }
        if let clock { layout["timeZone"] = clock.timeZoneName }
        return WebResponse.html(Templates.render("layout", layout), status: status, extra: extra)
    }

    func errorPage(_ error: RPCError, session: Session?, back: String) -> Response {
        let text: String
        switch error.code {
        case .unavailable: text = "A service of the server is not answering right now (\(error.message)). Try again in a moment."
        case .forbidden: text = "Not allowed: \(error.message)"
        default: text = error.message
        }
        return self.page(JSONResponse.status(for: error.code), "message", title: "Error", session: session, data: [
            "heading": "That did not work", "kind": "error", "text": text, "back": back, "backLabel": "Back",
        ])
    }

    func unauthorized(_ extra: HTTPFields = [:]) -> Response {
        WebResponse.make(.unauthorized, contentType: "text/plain; charset=utf-8", body: "Signed out: sign in again at /signin\n", extra: extra)
    }

    func methodNotAllowed(_ allow: String) -> Response {
        WebResponse.make(.methodNotAllowed, contentType: "text/plain; charset=utf-8", body: "Method not allowed\n", extra: [.allow: allow])
    }
}

/// `/children/<id>` (a child's page) and `/children/<id>/<action>` (its forms).
struct ChildAction {
    let child: String
    /// `time`, `pause`, `resume`, `limits`, `downtime`, …; nil for the page.
    let action: String?

    init?(_ path: String) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3 || parts.count == 4, parts[0].isEmpty, parts[1] == "children",
              parts[2].range(of: #"^[A-Za-z0-9_.-]{1,64}$"#, options: .regularExpression) != nil, parts[2] != ".", parts[2] != ".." else { return nil }
        self.child = String(parts[2])
        if parts.count == 4 {
            guard ["time", "pause", "resume", "limits", "downtime", "chores", "chore-remove", "chore-answer", "rules", "rule-reset", "resync", "redeem", "remove"].contains(parts[3]) else { return nil }
            self.action = String(parts[3])
        } else {
            self.action = nil
        }
    }

    /// What a child's page says after a form (`?done=`).
    static let notices: [String: String] = [
        "approved": "Approved. The child's device has been told.", "denied": "Said no. The child's device has been told.",
        "added": "Added.", "taken": "Taken away.", "tookAll": "Took away all there was: the balance is at zero.",
        "nothingToTake": "There was no earned time left to take away.", "paused": "Paused: reward apps are shielded now.",
        "resumed": "Resumed.", "limits": "Limits saved; they apply from now.",
        "resynced": "Sent again: the device gets the family's rules and its shield within a second, when it is online.",
        "redeemed": "Redeemed.", "downtime": "Downtime saved.", "downtimeOn": "Downtime saved: it is on now, and the devices are shielded.",
        "downtimeOff": "Downtime is off.", "choreAdded": "Chore added. The child's device has been told.", "choreRemoved": "Chore removed.",
        "choreApproved": "Approved: the points are added.", "choreRejected": "Sent back. The child's device has been told.",
        "ruleSaved": "Rule saved: the child's devices get it in place of the family's.", "ruleReset": "The family's rule applies again.",
    ]
}
