import EdgeLimits
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

    /// The gateway's origins as a self-made certificate on port 8443 gives them.
    func origins() -> Origins {
        let origins = Origins()
        origins.publish(hostNames: ["home.example", "192.168.1.20", "fd00::20", "localhost"], ports: [8443])
        return origins
    }

    @Test("the WebSocket upgrade takes the cookie from this gateway's origins, no origin, or a WebSocket library's own; never from another page")
    func webSocket() {
        let origins = self.origins()
        #expect(DeviceAPI.sessionCookie(self.headers(origin: nil), origins: origins) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://home.example:8443"), origins: origins) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://192.168.1.20:8443"), origins: origins) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "wss://home.example"), origins: origins) == "abc")
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://evil.example"), origins: origins) == nil)
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://evil.example:8443"), origins: origins) == nil)
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "http://home.example:8443"), origins: origins) == nil)
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "https://home.example:9999"), origins: origins) == nil)
        #expect(DeviceAPI.sessionCookie(self.headers(origin: "null"), origins: origins) == nil)
    }

    @Test("a form is taken from this gateway's origins only (or from a client that sends no Origin), whatever Host says")
    func forms() {
        let origins = self.origins()
        #expect(Dashboard.sameOrigin(self.headers(origin: "https://home.example:8443"), origins: origins))
        #expect(Dashboard.sameOrigin(self.headers(origin: "https://[fd00::20]:8443"), origins: origins))
        #expect(Dashboard.sameOrigin(self.headers(origin: nil), origins: origins))
        #expect(!Dashboard.sameOrigin(self.headers(origin: "null"), origins: origins))
        #expect(!Dashboard.sameOrigin(self.headers(origin: "https://evil.example"), origins: origins))
    }

    @Test("Host must name the gateway: its names with its port (the bare name on 443), a wildcard certificate's one label more; links use the gateway's own spelling")
    func hosts() {
        let origins = self.origins()
        #expect(origins.isOwn(authority: "home.example:8443"))
        #expect(origins.isOwn(authority: "HOME.example:8443"))
        #expect(origins.isOwn(authority: "[fd00::20]:8443"))
        #expect(!origins.isOwn(authority: "home.example"))
        #expect(!origins.isOwn(authority: "evil.example:8443"))
        #expect(!origins.isOwn(authority: nil))
        #expect(!origins.isOwn(authority: ""))
        #expect(origins.url(for: "HOME.EXAMPLE:8443") == "https://home.example:8443")
        #expect(origins.url(for: "evil.example:8443") == "https://home.example:8443")

        let forwarded = Origins()
        forwarded.publish(hostNames: ["*.family.example", "home.family.example"], ports: [8443, 443])
        #expect(forwarded.isOwn(authority: "home.family.example"))
        #expect(forwarded.isOwn(authority: "home.family.example:8443"))
        #expect(forwarded.isOwn(authority: "other.family.example"))
        #expect(!forwarded.isOwn(authority: "a.b.family.example"))
        #expect(!forwarded.isOwn(authority: "family.example"))
        #expect(!forwarded.isOwn(authority: "other.family.example:9999"))
        #expect(forwarded.url(for: nil) == "https://home.family.example")
    }

    @Test("per-address limits count an IPv6 /64 as one address, and an IPv4-mapped address as its IPv4 address")
    func addressKeys() {
        #expect(AddressKey.of("192.0.2.7") == "192.0.2.7")
        #expect(AddressKey.of("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(AddressKey.of("2001:db8:1:2::10") == "2001:db8:1:2::/64")
        #expect(AddressKey.of("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64")
        #expect(AddressKey.of("2001:db8:1:3::10") == "2001:db8:1:3::/64")
        #expect(AddressKey.of("::1") == "::/64")
        #expect(AddressKey.of("unknown") == "unknown")
        let limiter = RateLimiter(perMinute: 1, burst: 2)
        #expect(limiter.allow("2001:db8:1:2::10"))
        #expect(limiter.allow("2001:db8:1:2::11"))
        #expect(!limiter.allow("2001:db8:1:2::12"), "the third from the same /64 is over the burst")
        #expect(limiter.allow("2001:db8:1:3::10"), "another /64 has its own")
    }

    @Test("no browser on the machine is a failure that says what to install, never a skip")
    func missingBrowser() throws {
        let error = #expect(throws: TestFailure.self) { try Browser.locate(searchPath: "/nonexistent") }
        #expect(error?.description.contains("apt-get install -y chromium chromium-driver") == true)
    }
}
