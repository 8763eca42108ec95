@testable import Gateway
import HTTPTypes
import Testing
import TestSupport

/// Which requests may use the browser's session cookie: a page of another web origin
/// never (cross-site WebSocket hijacking, cross-site forms).
@Suite("Dashboard: the session cookie's origin rule")
struct DashboardOriginTests {
    func headers(origin: String?) -> HTTPFields {
        var fields: HTTPFields = [.cookie: "theme=dark; screentime_session=abc"]
        if let origin { fields[HTTPField.Name("Origin")!] = origin }
        return fields
    }

    @Test("the WebSocket upgrade takes the cookie from this origin, no origin, or a WebSocket library's own; never from another page")
    func webSocket() {
        let authority = "home.example:8443"
        #expect(DeviceAPI.sessionCookie(self.headers(origin: nil), authority: authority) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://home.example:8443"), authority: authority) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "wss://home.example"), authority: authority) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://evil.example"), authority: authority) == nil)
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "http://home.example:8443"), authority: authority) == nil)
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "null"), authority: authority) == nil)
    }

    @Test("a form is taken from this origin only (or from a client that sends no Origin)")
    func forms() {
        let authority = "home.example:8443"
        #expect(Dashboard.sameOrigin(self.headers(origin: "https://home.example:8443"), authority: authority))
        #expect(Dashboard.sameOrigin(self.headers(origin: nil), authority: authority))
        #expect(!Dashboard.sameOrigin(self.headers(origin: "null"), authority: authority))
        #expect(!Dashboard.sameOrigin(self.headers(origin: "https://home.example:8443"), authority: nil))
        #expect(!Dashboard.sameOrigin(self.headers(origin: "https://evil.example"), authority: authority))
    }

    @Test("no browser on the machine is a failure that says what to install, never a skip")
    func missingBrowser() throws {
        let error = #expect(throws: TestFailure.self) { try Browser.locate(searchPath: "/nonexistent") }
        #expect(error?.description.contains("apt-get install -y chromium chromium-driver") == true)
    }
}
