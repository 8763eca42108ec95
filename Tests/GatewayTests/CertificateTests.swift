import Foundation
import PairingAPI
import StackSupport
import Testing
import TestSupport

/// The gateway's own certificate: pinned through the QR code, renewed with the same key.
@Suite("Gateway: certificate and pin", .serialized, .timeLimit(.minutes(3)))
struct CertificateTests {
    @Test("the key and certificate are private files; the pin is curl's; a wrong pin is refused")
    func pinning() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        let directory = (stack.endpoint.certificate as NSString).deletingLastPathComponent
        for file in ["key.pem", "certificate.pem"] {
            let mode = try FileManager.default.attributesOfItem(atPath: directory + "/" + file)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file) has mode \(String(mode ?? 0, radix: 8))")
        }
        let good = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate)
        #expect(good.status == 200)
        let wrongPin = Data(repeating: 7, count: 32).base64EncodedString()
        let wrong = try await curl(stack.url + "/v1/info", pin: wrongPin, caFile: stack.endpoint.certificate)
        #expect(wrong.status == 0 && wrong.exitCode == 90, "curl exit \(wrong.exitCode): \(wrong.stderr)")  // CURLE_SSL_PINNEDPUBKEYNOTMATCH
        // The certificate's own checks hold too: TLS 1.0/1.1 refused.
        let old = try await curl(stack.url + "/v1/info", pin: stack.endpoint.pin, caFile: stack.endpoint.certificate, arguments: ["--tls-max", "1.1"])
        #expect(old.status == 0)
        // What the certificate says (openssl reads it): its names, server auth only, at most 825 days.
        let text = try await runCommand("/usr/bin/openssl", ["x509", "-in", stack.endpoint.certificate, "-noout", "-text"]).stdout
        #expect(text.contains("DNS:localhost") && text.contains("IP Address:127.0.0.1"))
        #expect(text.contains("TLS Web Server Authentication") && text.contains("CA:FALSE") && text.contains("prime256v1"))
        let dates = try await runCommand("/usr/bin/openssl", ["x509", "-in", stack.endpoint.certificate, "-noout", "-startdate", "-enddate"]).stdout
        let parsed = dates.split(separator: "\n").compactMap { line -> Date? in
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.dateFormat = "MMM d HH:mm:ss yyyy zzz"
            return formatter.date(from: String(line.split(separator: "=", maxSplits: 1).last ?? "").replacingOccurrences(of: "  ", with: " "))
        }
        #expect(parsed.count == 2 && parsed[1].timeIntervalSince(parsed[0]) <= 825 * 86_400, "\(dates)")
        // screentimectl prints the same pin.
        let printed = try await runCommand(Binaries.path("screentimectl"), ["gateway", "pin", "--state-dir", stack.harness.state]).stdout
        #expect(printed.contains("sha256//\(stack.endpoint.pin)"))
    }

    @Test("a renewed certificate keeps the pin")
    func renewalKeepsPin() async throws {
        let stack = try await GatewayStack.start()
        defer { stack.stopNow() }
        let before = stack.endpoint
        let certificateBefore = try String(contentsOfFile: before.certificate, encoding: .utf8)
        // Renew on start: fewer days left than --renew-days.
        try await stack.restartGateway(arguments: ["--renew-days", "900"])
        let after = stack.endpoint
        #expect(try String(contentsOfFile: after.certificate, encoding: .utf8) != certificateBefore)
        #expect(after.pin == before.pin)
        #expect(stack.gateway.log.contains("expires soon"))
        let reply = try await curl(stack.url + "/v1/info", pin: before.pin, caFile: after.certificate)
        #expect(reply.status == 200, "\(reply.stderr)")
        // A new invitation still carries that pin.
        let family = try await Bootstrapped.make(stack.harness)
        let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
        #expect(PairingURI(invitation.uri)?.pin == before.pin)
    }

    @Test("the pairing service's --gateway-url replaces the URLs in invitations; the pin stays the gateway's")
    func advertisedURLs() async throws {
        let stack = try await GatewayStack.start(pairingArguments: ["--gateway-url", "https://home.example:443", "--gateway-url", "https://192.168.1.20:8443"])
        defer { stack.stopNow() }
        let family = try await Bootstrapped.make(stack.harness)
        let invitation = try await family.parent.call(PairingMethods.createInvitation, CreateInvitationParams(childId: "emma"))
        let uri = try #require(PairingURI(invitation.uri))
        #expect(uri.urls == ["https://home.example:443", "https://192.168.1.20:8443"])
        #expect(uri.pin == stack.endpoint.pin)
    }
}
