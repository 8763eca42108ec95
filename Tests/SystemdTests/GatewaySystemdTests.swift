import Foundation
import SystemdContainer
import Testing
import TestSupport

/// The gateway installed with deploy/install.sh under a real systemd: activated by the
/// first HTTPS connection on port 8443, restarted with no connection refused, its request
/// log in the journal with its fields, its unit's security score.
@Suite("Under a real systemd: the device gateway",
       .serialized, .enabled(if: Container.unavailable == nil, "SYSTEM TESTS NOT RUN: \(Container.unavailable ?? "")"))
struct GatewaySystemdTests {
    @Test("the first HTTPS connection starts it; a restart refuses no connection; journal fields; systemd-analyze security at most 2.0")
    func gateway() async throws {
        try await Container.with { container in
            try await container.install()
            #expect(try await container.property("ActiveState", of: "screentime-gateway.socket") == "active")
            #expect(try await container.property("ActiveState", of: "screentime-gateway.service") == "inactive", "it waits for a connection")
            // install.sh made the key and the endpoint file: the pin is known before it runs.
            let printed = try await container.run("/usr/local/bin/screentimectl", "gateway", "pin")
            let pin = try #require(printed.stdout.split(separator: "\n").first { $0.hasPrefix("pin: sha256//") }.map { String($0.dropFirst("pin: sha256//".count)) },
                                   "\(printed)")
            let healthz = {
                try await container.run("curl", "-sS", "--max-time", "30", "--cacert", "/var/lib/screentime/gateway/certificate.pem",
                                        "--pinnedpubkey", "sha256//\(pin)", "-o", "/dev/null", "-w", "%{http_code}", "https://localhost:8443/healthz")
            }
            let first = try await healthz()
            #expect(first.stdout == "200", "\(first)")
            #expect(try await container.property("SubState", of: "screentime-gateway.service") == "running")
            try await container.waitUntil("the gateway reports its status") {
                try await container.property("StatusText", of: "screentime-gateway.service").hasPrefix("Serving HTTPS")
            }

            // A restart: systemd keeps the socket, so a connection made meanwhile waits and is served.
            _ = try await container.run("systemctl", "restart", "--no-block", "screentime-gateway.service")
            let during = try await healthz()
            #expect(during.stdout == "200", "\(during)")

            // The journal: each request with its fields.
            try await container.waitUntil("the request is in the journal") {
                try await container.run("journalctl", "-u", "screentime-gateway", "-o", "json", "--no-pager").stdout.contains("\"PATH\":\"/healthz\"")
            }
            let lines = try await container.run("journalctl", "-u", "screentime-gateway", "-o", "json", "--no-pager").stdout.split(separator: "\n")
            let records = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let request = records.first { $0["MESSAGE"] as? String == "http request" && $0["PATH"] as? String == "/healthz" }
            #expect(request?["REMOTE_ADDRESS"] != nil && request?["HTTP_STATUS"] as? String == "200" && request?["DURATION_MS"] != nil,
                    "\(String(describing: request))")
            #expect(records.contains { $0["MESSAGE"] as? String == "ready" && $0["PIN"] as? String == pin })

            let security = try await container.run("systemd-analyze", "security", "--no-pager", "screentime-gateway.service")
            let score = security.stdout.split(separator: "\n").last.flatMap { line in line.split(separator: " ").compactMap { Double($0) }.first }
            #expect(score.map { $0 <= 2.0 } == true, "\(security.stdout.split(separator: "\n").last ?? "?")")
        }
    }
}
