import PairingAPI
import Testing

@Suite("Pairing URI, version 2")
struct PairingURITests {
    @Test("url and pin round-trip, + and / in the pin included; version 1 still parses")
    func versions() throws {
        let pin = "ab+cd/ef+gh/ij+kl/mn+op/qr+st/uv+wxyz0123456="
        let uri = PairingURI(server: "home.example", family: "smith", invitationId: "inv-1", secret: "s3cr3t",
                             urls: ["https://home.example:8443", "https://[fd00::2]:8443"], pin: pin)
        #expect(uri.string.hasPrefix("screentime://pair?v=2&"))
        #expect(PairingURI(uri.string) == uri)
        let old = try #require(PairingURI("screentime://pair?v=1&server=home.example&family=smith&invitation=inv-1&secret=s3cr3t"))
        #expect(old.urls.isEmpty && old.pin == nil && old.secret == "s3cr3t")
        #expect(PairingURI("screentime://pair?v=3&server=a&family=b&invitation=c&secret=d") == nil)
    }
}
