import Foundation
import RPCClient
import RPCCore
import SystemdContainer
import Testing
import TestSupport

extension SystemdTests {
    @Test("the metrics socket is off after install; enabled, it answers with its token only, reports running services' metrics and the others' state without starting them, and counts a kill -9 as a restart; screentimectl status says the same")
    func metricsAndStatus() async throws {
        try await Container.with { container in
            try await container.install()
            let scrape = "curl -sS -o /tmp/metrics -w '%{http_code}' http://127.0.0.1:9464/metrics"
            // Off by default: nothing listens on the metrics port.
            let off = try await container.shell(scrape)
            #expect(off.status == 7, "connection refused: \(off)")

            // Each service's state file, in the runtime directory systemd keeps for them.
            _ = try await container.client("store").call("rpc.ping")
            let file = try await container.shell("cat /run/screentime/status/store.json")
            #expect(file.status == 0 && file.stdout.contains("\"state\":\"running\""), "\(file)")

            _ = try await container.shell("""
                printf 'a-long-random-token\\n' > /etc/screentime/metrics-token && chgrp screentime /etc/screentime/metrics-token && chmod 0640 /etc/screentime/metrics-token
                echo 'OPTIONS=--metrics-token-file /etc/screentime/metrics-token' > /etc/screentime/gateway.env
                echo 'OPTIONS=--idle-exit 1' > /etc/screentime/pairing.env
                systemctl enable --now screentime-metrics.socket && systemctl restart screentime-pairing.service screentime-gateway.service
                """)
            try await container.waitUntil("pairing exits when idle") {
                try await container.property("ActiveState", of: "screentime-pairing.service") == "inactive"
            }
            #expect(try await container.property("ActiveState", of: "screentime-push.service") == "inactive", "push never started")

            let refused = try await container.shell(scrape)
            #expect(refused.stdout == "401", "no token: \(refused)")
            let wrong = try await container.shell(scrape + " -H 'Authorization: Bearer wrong'")
            #expect(wrong.stdout == "401", "a wrong token: \(wrong)")
            for _ in 0..<3 {
                let served = try await container.shell(scrape + " -H 'Authorization: Bearer a-long-random-token'")
                #expect(served.stdout == "200", "\(served)")
            }
            let text = try await container.shell("cat /tmp/metrics").stdout
            for line in ["screentime_up{service=\"store\"} 1", "screentime_up{service=\"gateway\"} 1", "screentime_up{service=\"pairing\"} 0",
                         "screentime_service_state{service=\"pairing\",state=\"idle-exited\"} 1", "screentime_service_state{service=\"push\",state=\"not-started\"} 1",
                         "# TYPE screentime_store_requests_total counter", "# TYPE screentime_gateway_tls_handshakes_total counter"] {
                #expect(text.contains(line), "\(line) in the scrape")
            }
            // Scraping woke nobody.
            #expect(try await container.property("ActiveState", of: "screentime-pairing.service") == "inactive")
            #expect(try await container.property("ActiveState", of: "screentime-push.service") == "inactive")

            // A crash: systemd restarts the store, and the restart is counted.
            _ = try await container.shell("systemctl kill -s KILL screentime-store.service")
            try await container.waitUntil("the store runs again") {
                guard try await container.property("NRestarts", of: "screentime-store.service") == "1" else { return false }
                return (try? await container.client("store").call("rpc.ping")) != nil
            }
            _ = try await container.shell(scrape + " -H 'Authorization: Bearer a-long-random-token'")
            #expect(try await container.shell("cat /tmp/metrics").stdout.contains("screentime_service_restarts_total{service=\"store\"} 1"))

            let status = try await container.run("/usr/local/bin/screentimectl", "status", "--no-backup")
            #expect(status.status == 0, "\(status)")
            for words in ["everything is working", "Record store", "Running since", "Idle: starts again when needed", "Restarted once after a failure",
                          "Not started yet", "Gateway certificate: valid until"] {
                #expect(status.stdout.contains(words), "\(words) in:\n\(status.stdout)")
            }
        }
    }
}
