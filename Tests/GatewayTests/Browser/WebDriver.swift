import AsyncHTTPClient
import Foundation
import ProcessSpawn
import NIOCore
import RPCCore
import TestSupport

/// Debian's chromium, headless, driven by Debian's chromedriver through the W3C WebDriver
/// protocol: plain JSON over HTTP on loopback (docs/architecture.md says why a client of
/// our own rather than Selenium). Missing browsers are a failure, never a skip.
final class Browser: @unchecked Sendable {
    let driver: Process
    let endpoint: String
    let session: String
    let profile: TemporaryDirectory
    let driverLog: String

    /// Where the browser and its driver are; a clear failure when they are not installed.
    static func locate(searchPath: String = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/bin:/usr/lib/chromium") throws -> (chromium: String, chromedriver: String) {
        let path = searchPath
        func find(_ names: [String]) -> String? {
            for directory in path.split(separator: ":") {
                for name in names {
                    let candidate = "\(directory)/\(name)"
                    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                }
            }
            return nil
        }
        guard let chromium = find(["chromium", "chromium-browser"]), let driver = find(["chromedriver"]) else {
            throw TestFailure("""
                The dashboard's browser tests need Debian's chromium and chromium-driver, and this machine lacks \
                \(find(["chromium", "chromium-browser"]) == nil ? "chromium" : "chromedriver"): apt-get install -y chromium chromium-driver \
                (.ci/run installs them). These tests never pass without a browser.
                """)
        }
        return (chromium, driver)
    }

    /// Starts chromedriver on a free loopback port and opens a headless session that
    /// trusts the gateway's certificate by its key: `--ignore-certificate-errors-spki-list`
    /// with the pin (the SHA-256 of the SubjectPublicKeyInfo, base64), the same check a
    /// phone makes, and nothing else trusted (no `--ignore-certificate-errors`).
    init(pin: String, width: Int = 1280, height: Int = 900) async throws {
        let (chromium, chromedriver) = try Self.locate()
        let port = try FreePort.pick()
        self.profile = TemporaryDirectory()
        self.driverLog = self.profile.file("chromedriver.log")
        FileManager.default.createFile(atPath: self.driverLog, contents: nil)
        let driver = Process()
        driver.executableURL = URL(fileURLWithPath: chromedriver)
        driver.arguments = ["--port=\(port)", "--log-path=\(self.driverLog)"]
        driver.standardOutput = FileHandle(forWritingAtPath: self.driverLog)
        driver.standardError = FileHandle(forWritingAtPath: self.driverLog)
        try driver.run()
        self.driver = driver
        self.endpoint = "http://127.0.0.1:\(port)"
        let endpoint = self.endpoint
        let log = self.driverLog
        do {
            _ = try await eventually("chromedriver answering on port \(port)", timeout: .seconds(30), detail: (try? String(contentsOfFile: log, encoding: .utf8)) ?? "") { seen in
                if !driver.isRunning { throw TestFailure("chromedriver exited (\(driver.terminationStatus))") }
                let status = try await WebDriverHTTP.request("GET", "\(endpoint)/status")
                seen = "\(status)"
                return status["value"]?["ready"] == true ? true : nil
            }
            let userData = self.profile.file("chromium-profile")
            let capabilities: JSONValue = ["capabilities": ["alwaysMatch": [
                "browserName": "chrome",
                "goog:chromeOptions": [
                    "binary": .string(chromium),
                    "args": .array([
                        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                        "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                        "--user-data-dir=\(userData)", "--window-size=\(width),\(height)",
                        // Honoured only with --user-data-dir (Chromium's rule).
                        "--ignore-certificate-errors-spki-list=\(pin)",
                    ].map(JSONValue.string)),
                ],
                "goog:loggingPrefs": ["browser": "ALL"],
                "unhandledPromptBehavior": "ignore",
            ]]]
            let created = try await WebDriverHTTP.request("POST", "\(endpoint)/session", capabilities, timeout: 60)
            guard let session = created["value"]?["sessionId"]?.stringValue else {
                throw TestFailure("chromedriver did not start chromium: \(created)\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            }
            self.session = session
        } catch {
            kill(driver.processIdentifier, SIGKILL)
            driver.waitUntilExit()
            throw error
        }
    }

    /// Ends the session (chromium quits) and stops chromedriver.
    func quit() async {
        _ = try? await WebDriverHTTP.request("DELETE", "\(self.endpoint)/session/\(self.session)")
        // chromedriver does not always stop on SIGTERM while a session ends.
        kill(self.driver.processIdentifier, SIGKILL)
        self.driver.waitUntilExit()
    }

    // MARK: Commands

    @discardableResult
    func command(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        // (JSONValue takes `nil` as JSON null: a GET must send no body at all.)
        let payload: JSONValue? = method == "POST" ? (body ?? .object([:])) : body
        let reply = try await WebDriverHTTP.request(method, "\(self.endpoint)/session/\(self.session)\(path)", payload)
        if let error = reply["value"]?["error"]?.stringValue {
            throw TestFailure("WebDriver \(method) \(path): \(error): \(reply["value"]?["message"]?.stringValue ?? "")")
        }
        return reply["value"] ?? .null
    }

    func go(_ url: String) async throws { try await self.command("POST", "/url", ["url": .string(url)]) }
    func currentURL() async throws -> String { try await self.command("GET", "/url").stringValue ?? "" }
    func resize(width: Int, height: Int) async throws {
        try await self.command("POST", "/window/rect", ["width": .int(Int64(width)), "height": .int(Int64(height))])
    }

    /// The first element matching a CSS selector, or nil.
    func element(_ selector: String) async throws -> String? {
        let reply = try await WebDriverHTTP.request("POST", "\(self.endpoint)/session/\(self.session)/element", ["using": "css selector", "value": .string(selector)])
        if reply["value"]?["error"]?.stringValue == "no such element" { return nil }
        if let error = reply["value"]?["error"]?.stringValue { throw TestFailure("finding \(selector): \(error)") }
        return reply["value"]?.firstValue
    }

    func require(_ selector: String) async throws -> String {
        guard let element = try await self.element(selector) else {
            throw TestFailure("no element \(selector) on \(try await self.currentURL()):\n\(try await self.pageText())")
        }
        return element
    }

    /// Clicks the element; finds it again if the page's live part replaced it meanwhile.
    func click(_ selector: String) async throws {
        var attempt = 0
        while true {
            do {
                try await self.command("POST", "/element/\(try await self.require(selector))/click")
                return
            } catch let failure as TestFailure where failure.description.contains("stale element") && attempt < 5 {
                attempt += 1
            }
        }
    }

    /// As a phone: 390 × 844 with touch input (Chromium's own emulation, through the
    /// DevTools protocol chromedriver passes on), so that ``tap(_:)`` is a finger's.
    func emulatePhone() async throws {
        try await self.resize(width: 390, height: 844)
        try await self.command("POST", "/goog/cdp/execute", ["cmd": "Emulation.setTouchEmulationEnabled", "params": ["enabled": true, "maxTouchPoints": 5]])
    }

    /// Back to a laptop: 1280 px, no touch.
    func emulateLaptop() async throws {
        try await self.command("POST", "/goog/cdp/execute", ["cmd": "Emulation.setTouchEmulationEnabled", "params": ["enabled": false]])
        try await self.resize(width: 1280, height: 900)
    }

    /// A finger's tap on the element (touch down and up at its centre: W3C actions with a
    /// touch pointer), where a click would be a mouse's. The element must be in view and
    /// not covered, as for a person. Finds it again if the page's live part replaced it.
    func tap(_ selector: String) async throws {
        var attempt = 0
        while true {
            do {
                let element: JSONValue = ["element-6066-11e4-a52e-4f735466cecf": .string(try await self.require(selector))]
                _ = try await self.script("arguments[0].scrollIntoView({block: 'center'})", [element])
                try await self.command("POST", "/actions", ["actions": [[
                    "type": "pointer", "id": "finger", "parameters": ["pointerType": "touch"],
                    "actions": [
                        ["type": "pointerMove", "duration": 0, "origin": element, "x": 0, "y": 0],
                        ["type": "pointerDown", "button": 0], ["type": "pause", "duration": 60], ["type": "pointerUp", "button": 0],
                    ],
                ]]])
                try await self.command("DELETE", "/actions")
                return
            } catch let failure as TestFailure where failure.description.contains("stale element") && attempt < 5 {
                attempt += 1
            }
        }
    }

    /// Types into the element; finds it again if the page's live part replaced it meanwhile
    /// (or a resize had it mid-layout: "not interactable").
    func type(_ selector: String, _ text: String, clear: Bool = true) async throws {
        var attempt = 0
        while true {
            do {
                let element = try await self.require(selector)
                if clear { try await self.command("POST", "/element/\(element)/clear") }
                try await self.command("POST", "/element/\(element)/value", ["text": .string(text)])
                return
            } catch let failure as TestFailure
                where (failure.description.contains("stale element") || failure.description.contains("not interactable")) && attempt < 5 {
                attempt += 1
            }
        }
    }

    func text(_ selector: String) async throws -> String {
        try await self.command("GET", "/element/\(try await self.require(selector))/text").stringValue ?? ""
    }

    func pageText() async throws -> String {
        (try? await self.command("POST", "/execute/sync", ["script": "return document.body ? document.body.innerText : ''", "args": []]).stringValue) ?? ""
    }

    /// Runs a script in the page; its return value.
    @discardableResult
    func script(_ script: String, _ args: [JSONValue] = []) async throws -> JSONValue {
        try await self.command("POST", "/execute/sync", ["script": .string(script), "args": .array(args)])
    }

    /// Runs an asynchronous script: it calls `arguments[arguments.length - 1]` with its result.
    func asyncScript(_ script: String, _ args: [JSONValue] = []) async throws -> JSONValue {
        try await self.command("POST", "/execute/async", ["script": .string(script), "args": .array(args)])
    }

    func acceptAlert() async throws { try await self.command("POST", "/alert/accept") }

    /// A cookie's value, HttpOnly ones too (WebDriver sees every cookie of the page's origin).
    func cookie(_ name: String) async throws -> String? {
        let reply = try await WebDriverHTTP.request("GET", "\(self.endpoint)/session/\(self.session)/cookie/\(name)")
        return reply["value"]?["value"]?.stringValue
    }

    func cookieFlags(_ name: String) async throws -> JSONValue {
        try await self.command("GET", "/cookie/\(name)")
    }

    func screenshot() async throws -> Data {
        guard let base64 = try await self.command("GET", "/screenshot").stringValue, let data = Data(base64Encoded: base64) else {
            throw TestFailure("no screenshot")
        }
        return data
    }

    /// The page printed as the browser's "Save as PDF" prints it (A4 portrait, the page's
    /// print stylesheet): W3C WebDriver's Print Page, chromium's own PDF printing.
    func printToPDF() async throws -> Data {
        guard let base64 = try await self.command("POST", "/print", ["orientation": "portrait", "page": ["width": 21.0, "height": 29.7], "background": false]).stringValue,
              let data = Data(base64Encoded: base64) else {
            throw TestFailure("no PDF")
        }
        return data
    }

    /// The page's console messages since the last call (chromedriver's log endpoint).
    func consoleMessages() async throws -> [(level: String, message: String)] {
        let entries = try await self.command("POST", "/se/log", ["type": "browser"])
        guard case .array(let list) = entries else { return [] }
        return list.map { ($0["level"]?.stringValue ?? "", $0["message"]?.stringValue ?? "") }
    }

    /// Waits until the selector matches (and, if given, its text satisfies `matches`).
    @discardableResult
    func waitFor(_ what: String, _ selector: String, timeout: Duration = .seconds(20), _ matches: @escaping @Sendable (String) -> Bool = { _ in true }) async throws -> String {
        try await eventually(what, timeout: timeout) { seen in
            guard let element = try await self.element(selector) else {
                seen = "no \(selector) yet"
                return nil
            }
            let text: String
            do {
                text = try await self.command("GET", "/element/\(element)/text").stringValue ?? ""
            } catch where "\(error)".contains("stale element") {
                // A live update replaced the element between finding it and reading it: the
                // page moved on, so look again.
                seen = "\(selector) replaced while read"
                return nil
            }
            seen = "\(selector): \(text)"
            return matches(text) ? text : nil
        }
    }
}

extension JSONValue {
    /// The value of a one-member object (a WebDriver element reference).
    var firstValue: String? {
        if case .object(let members) = self { return members.values.first?.stringValue }
        return nil
    }
}

/// JSON over HTTP to chromedriver.
enum WebDriverHTTP {
    static func request(_ method: String, _ url: String, _ body: JSONValue? = nil, timeout: Int64 = 30) async throws -> JSONValue {
        var request = HTTPClientRequest(url: url)
        request.method = .init(rawValue: method)
        if let body {
            request.body = .bytes(ByteBuffer(bytes: try RPCJSON.makeEncoder().encode(body)))
            request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(timeout))
        let bytes = try await response.body.collect(upTo: 64 << 20)
        return try JSONParser.parse(bytes: Array(bytes.readableBytesView))
    }
}
