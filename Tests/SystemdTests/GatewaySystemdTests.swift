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

/// Who may connect to the gateway, under a real systemd that enforces IP access lists, and
/// that turning the server off holds across a reboot.
@Suite("Under a real systemd: the gateway's network filter and turning the server off",
       .serialized, .enabled(if: Container.unavailable == nil, "SYSTEM TESTS NOT RUN: \(Container.unavailable ?? "")"))
struct GatewayNetworkFilterTests {
    @Test("home network only: the socket's IPAddressAllow= drops a public address (203.0.113.5) and lets loopback and private ones in over IPv4 and IPv6 on one dual-stack socket; an IPv6 /64 is one address to the rate limit; the internet drop-in lets everyone in; systemd-analyze credits the service no filter")
    func homeNetworkOnly() async throws {
        try await Container.with(ipFirewall: true) { container in
            try await Self.requireEnforcement(container)
            // Addresses a home server's clients come from, on the container's loopback.
            for address in ["203.0.113.5/32", "192.168.7.20/32", "fd00:1::10/64", "fd00:1::20/64", "fd00:2::10/64"] {
                let family = address.contains(":") ? "-6" : "-4"
                let added = try await container.run("ip", family, "addr", "add", address, "dev", "lo", "nodad")
                #expect(added.status == 0, "\(added)")
            }
            try await container.install()
            // A tight limit for requests without a credential, to see how addresses are counted.
            try await container.shell("sed -i 's/^OPTIONS=.*/OPTIONS=\"--unauthenticated-rate 1 --unauthenticated-burst 2\"/' /etc/screentime/gateway.env")
            let pin = try await Self.pin(container)

            #expect(try await Self.healthz(container, pin: pin, from: "127.0.0.1", to: "127.0.0.1") == "200")
            #expect(try await Self.healthz(container, pin: pin, from: "192.168.7.20", to: "127.0.0.1") == "200")
            // The public address: dropped by the kernel, so the connection times out, and the
            // gateway never hears of it.
            let refused = try await Self.healthz(container, pin: pin, from: "203.0.113.5", to: "127.0.0.1")
            #expect(refused != "200", "a public address was served")
            // IPv6 on the same socket (ListenStream=8443 is dual-stack): two addresses of one
            // /64 share one budget of 2, another /64 has its own.
            #expect(try await Self.healthz(container, pin: pin, from: "fd00:1::10", to: "::1") == "200")
            #expect(try await Self.healthz(container, pin: pin, from: "fd00:1::20", to: "::1") == "200")
            #expect(try await Self.healthz(container, pin: pin, from: "fd00:1::20", to: "::1") == "429", "the /64's third request")
            #expect(try await Self.healthz(container, pin: pin, from: "fd00:2::10", to: "::1") == "200", "another /64")
            let journal = try await container.run("journalctl", "-u", "screentime-gateway", "-o", "cat", "--no-pager").stdout
            #expect(!journal.contains("203.0.113.5"), "the gateway saw the public address:\n\(journal)")

            // What systemd-analyze says of the service: no IP filter credited to it (the
            // socket's is the one that works).
            let security = try await container.run("systemd-analyze", "security", "--no-pager", "screentime-gateway.service").stdout
            let ipLine = security.split(separator: "\n").first { $0.contains("IPAddressDeny=") }
            #expect(ipLine.map { $0.contains("✗") } == true, "\(ipLine ?? "no IPAddressDeny= line")")

            // The internet drop-in: on the socket, it lets the public address in.
            try await container.install("--internet")
            #expect(try await container.run("test", "-f", "/etc/systemd/system/screentime-gateway.socket.d/internet.conf").status == 0)
            _ = try await container.run("systemctl", "restart", "screentime-gateway.socket")
            #expect(try await Self.healthz(container, pin: pin, from: "203.0.113.5", to: "127.0.0.1") == "200")
        }
    }

    @Test("systemctl disable --now screentime.target turns the server off for good: nothing listens after a reboot, not even port 8443; enable --now turns it on again")
    func disabledStaysOff() async throws {
        var container = try await Container.boot()
        do {
            try await container.install()
            #expect(try await Self.listening(container).contains(":8443"))
            let disabled = try await container.run("systemctl", "disable", "--now", "screentime.target")
            #expect(disabled.status == 0, "\(disabled)")
            #expect(!(try await Self.listening(container).contains(":8443")), "8443 still listens after disable --now")
            container = try await container.reboot()
            let listening = try await Self.listening(container)
            #expect(!listening.contains(":8443"), "after a reboot:\n\(listening)")
            for unit in ["screentime.target", "screentime-gateway.socket", "screentime-store.socket"] {
                #expect(try await container.property("ActiveState", of: unit) == "inactive", "\(unit) after a reboot")
            }
            _ = try await container.run("systemctl", "enable", "--now", "screentime.target")
            #expect(try await Self.listening(container).contains(":8443"))
            await container.powerOff()
        } catch {
            await container.powerOff()
            throw error
        }
    }

    /// Fails, loudly, where this container's systemd does not enforce IP access lists: a
    /// socket that denies every address must not accept a connection from loopback.
    static func requireEnforcement(_ container: Container) async throws {
        try await container.shell("""
            printf '[Socket]\\nListenStream=127.0.0.1:9\\nAccept=yes\\nIPAddressDeny=any\\n' > /run/systemd/system/enforcement-probe.socket
            printf '[Service]\\nExecStart=/bin/true\\nStandardInput=socket\\n' > /run/systemd/system/enforcement-probe@.service
            systemctl daemon-reload && systemctl start enforcement-probe.socket
            """)
        let probe = try await container.run("curl", "-sS", "--connect-timeout", "2", "telnet://127.0.0.1:9")
        guard probe.status == 28 else {
            throw TestFailure("""
                this container's systemd does not enforce IPAddressDeny= (a socket denying every address accepted a connection: curl \
                exited \(probe.status)): BPF cgroup firewalling needs the unified cgroup hierarchy and bpf() in the container; \
                the gateway's network filter cannot be tested here
                """)
        }
    }

    static func pin(_ container: Container) async throws -> String {
        let printed = try await container.run("/usr/local/bin/screentimectl", "gateway", "pin")
        return try #require(printed.stdout.split(separator: "\n").first { $0.hasPrefix("pin: sha256//") }.map { String($0.dropFirst("pin: sha256//".count)) },
                            "\(printed)")
    }

    /// GET /healthz from the source address `from` to the address `to`, the certificate
    /// checked by its name and pin; the HTTP status, or curl's exit when there was none.
    static func healthz(_ container: Container, pin: String, from source: String, to destination: String) async throws -> String {
        let target = destination.contains(":") ? "[\(destination)]" : destination
        let result = try await container.run("curl", "-sS", "--connect-timeout", "3", "--max-time", "30", "--interface", source,
                                             "--connect-to", "localhost:8443:\(target):8443",
                                             "--cacert", "/var/lib/screentime/gateway/certificate.pem", "--pinnedpubkey", "sha256//\(pin)",
                                             "-o", "/dev/null", "-w", "%{http_code}", "https://localhost:8443/healthz")
        return result.status == 0 ? result.stdout : "curl exit \(result.status): \(result.stderr)"
    }

    /// The container's listening TCP sockets (`ss -ltnH`).
    static func listening(_ container: Container) async throws -> String {
        try await container.run("ss", "-ltnH").stdout
    }
}
