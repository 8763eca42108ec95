import Crypto
import Foundation
import Glibc
import ProcessSpawn
import RelayCore
import RelayServer
import Testing
import TestSupport
import WakeTestSupport

/// Three copies of the real `screentime-relayd` behind HAProxy (Debian's), sharing their
/// counts and the wakes taken through a PostgreSQL the test starts: one set of limits
/// whichever copy a request reaches.
@Suite("Relay: several copies behind one address share PostgreSQL", .serialized)
struct RelayCopiesTests {
    /// The copies, HAProxy in front, and a client for both.
    final class Copies: @unchecked Sendable {
        let files: RelayEdgeTests.Files
        let postgres: TestPostgres
        var relays: [RelayEdgeTests.Running] = []
        let proxyPort: Int
        private var proxy: pid_t = 0

        init(apns: TestAPNs, postgres: TestPostgres, extra: [String]) async throws {
            self.files = try RelayEdgeTests.Files(apns: apns)
            self.postgres = postgres
            // One sealing key for every copy, made before any starts.
            try HandleSealer.newKeyText().write(toFile: self.files.directory.file("sealing.key"), atomically: true, encoding: .utf8)
            chmod(self.files.directory.file("sealing.key"), 0o600)
            self.proxyPort = try FreePort.pick()
            for _ in 0..<3 {
                self.relays.append(try await self.files.start(self.arguments(extra)))
            }
            let servers = self.relays.enumerated().map { index, relay in
                "  server copy\(index) 127.0.0.1:\(relay.port) check inter 200ms fall 1 rise 2"
            }
            let configuration = """
                global
                  maxconn 2000
                defaults
                  mode http
                  timeout connect 2s
                  timeout client 30s
                  timeout server 30s
                  option forwardfor
                  option redispatch
                  retries 3
                frontend relay
                  bind 127.0.0.1:\(self.proxyPort)
                  default_backend copies
                backend copies
                  balance roundrobin
                  option httpchk GET /v1/health
                \(servers.joined(separator: "\n"))

                """
            let file = self.files.directory.file("haproxy.cfg")
            try configuration.write(toFile: file, atomically: true, encoding: .utf8)
            let log = self.files.directory.file("haproxy.log")
            self.proxy = try Spawn(executable: "/usr/sbin/haproxy", arguments: ["-f", file, "-db"], stdout: log, stderr: log).start()
            let proxy = self.proxy, port = self.proxyPort
            _ = try await eventually("HAProxy answering", timeout: .seconds(30)) { _ in
                if ChildExit.poll(proxy) != nil { throw TestFailure("HAProxy exited: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")") }
                return (try? await runCommand("/usr/bin/curl", ["-sf", "--max-time", "2", "http://127.0.0.1:\(port)/v1/health"]))?.status == 0 ? true : nil
            }
        }

        func arguments(_ extra: [String]) -> [String] {
            let apns = self.files.apns
            return ["--plain-http", "--host", "127.0.0.1", "--port", "0", "--trust-forwarded-for", "--state-database", self.postgres.url,
                    "--sealing-key-file", self.files.directory.file("sealing.key"), "--apns-key-file", self.files.directory.file("apns.p8"),
                    "--apns-ca-file", apns.certificateFile, "--apns-url", apns.url, "--apns-key-id", apns.keyId, "--apns-team-id", apns.teamId,
                    "--topic", apns.topic] + extra
        }

        var url: String { "http://127.0.0.1:\(self.proxyPort)" }
        func url(ofCopy index: Int) -> String { "http://127.0.0.1:\(self.relays[index].port)" }

        /// Seals `token` for `server` through HAProxy; the handle comes by push.
        func seal(_ token: String, for server: P256.Signing.PrivateKey) async throws -> String {
            let body = #"{"token":"\#(token)","topic":"\#(self.files.apns.topic)","environment":"production","pin":"\#(LocalRelay.pin(server))"}"#
            let sealed = try await Self.post(self.url + "/v1/seal", Array(body.utf8))
            guard sealed.status == 202 else { throw TestFailure("seal: \(sealed)") }
            return try await self.files.apns.handle(for: token)
        }

        /// A signed wake's body and headers.
        static func signed(_ handle: String, by server: P256.Signing.PrivateKey) throws -> (body: [UInt8], headers: [(String, String)]) {
            let body = Array(try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background", "id": WakeRequest.newId()]))
            return (body, try WakeSignature.headers(body: body, key: server))
        }

        /// POST with curl: status and body.
        static func post(_ url: String, _ body: [UInt8], headers: [(String, String)] = []) async throws -> (status: Int, body: String) {
            let run = try await runCommand("/usr/bin/curl", [
                "-sS", "--max-time", "10", "-H", "content-type: application/json", "--data-binary", String(decoding: body, as: UTF8.self),
                "-w", "\n%{http_code}", url,
            ] + headers.flatMap { ["-H", "\($0.0): \($0.1)"] })
            let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
        }

        func stop() async {
            if self.proxy > 0 {
                kill(self.proxy, SIGTERM)
                _ = try? await ChildExit.wait(self.proxy, timeout: .seconds(10))
            }
            for relay in self.relays where ChildExit.poll(relay.pid) == nil { _ = try? await relay.stop() }
        }
    }

    static var missing: String? {
        if let postgres = TestPostgres.missing { return postgres }
        return FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") ? nil : "HAProxy is not installed (apt-get install haproxy; .ci/run does)"
    }

    @Test("three copies behind HAProxy: the per-server limit holds exactly across them, a wake taken by one copy is refused by another, a copy killed under load loses no wake answered 200, and while PostgreSQL restarts the copies refuse with 503 until it is back")
    func sharedLimits() async throws {
        if let missing = Self.missing { throw TestFailure("cannot run: \(missing)") }
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let postgres = try await TestPostgres.start()
        let copies = try await Copies(apns: apns, postgres: postgres, extra: ["--wakes-per-minute", "30"])
        defer { Task { await copies.stop() } }

        // One home server's wakes through HAProxy, spread over the copies: 30 a minute in all.
        // Counted in one minute's window: a burst that crossed a minute's end (weighed
        // against two windows) is sent again by a new server, within the next minute.
        var answered: [Int] = []
        for attempt in 0..<3 {
            let server = P256.Signing.PrivateKey()
            var handles: [String] = []
            for byte in 0..<10 { handles.append(try await copies.seal(LocalRelay.token(UInt8(0x70 + attempt * 0x10 + byte)), for: server)) }
            let started = Date()
            let statuses = Arrivals<Int>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    let (body, headers) = try Copies.signed(handles[index % handles.count], by: server)
                    group.addTask {
                        let reply = try await Copies.post(copies.url + "/v1/wake", body, headers: headers)
                        statuses.append(reply.status)
                    }
                    if index % 4 == 3 { try await group.next() }
                }
                try await group.waitForAll()
            }
            answered = statuses.all
            if Self.minute(of: started) == Self.minute(of: Date()) { break }
        }
        #expect(answered.filter { $0 == 200 }.count == 30 && answered.filter { $0 == 429 }.count == 10, "\(answered.sorted())")

        // Each wake is one statement to PostgreSQL (one round trip), and nothing else.
        let counted = P256.Signing.PrivateKey()
        let countedHandle = try await copies.seal(LocalRelay.token(0x31), for: counted)
        let before = postgres.statementsSent()
        for _ in 0..<10 {
            let (body, headers) = try Copies.signed(countedHandle, by: counted)
            #expect(try await Copies.post(copies.url + "/v1/wake", body, headers: headers).status == 200)
        }
        #expect(postgres.statementsSent() - before == 10, "one statement a wake")

        // A wake taken by one copy, sent again to another: refused.
        let other = P256.Signing.PrivateKey()
        let (body, headers) = try Copies.signed(try await copies.seal(LocalRelay.token(0x30), for: other), by: other)
        #expect(try await Copies.post(copies.url(ofCopy: 0) + "/v1/wake", body, headers: headers).status == 200)
        let replayed = try await Copies.post(copies.url(ofCopy: 1) + "/v1/wake", body, headers: headers)
        #expect(replayed.status == 401 && replayed.body.contains("sent already"), "\(replayed)")

        // One copy killed while a server's wakes (as many as its limit) pour in: every wake
        // answered 200 reached APNs; the others were cut off in the killed copy.
        let third = P256.Signing.PrivateKey()
        var loadHandles: [String] = []
        for byte in UInt8(0x40)..<0x4a { loadHandles.append(try await copies.seal(LocalRelay.token(byte), for: third)) }
        let answers = Arrivals<(status: Int, body: String)>()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<30 {
                if index == 10 { kill(copies.relays[2].pid, SIGKILL) }
                let (body, headers) = try Copies.signed(loadHandles[index % loadHandles.count], by: third)
                group.addTask {
                    let reply = try await Copies.post(copies.url + "/v1/wake", body, headers: headers)
                    answers.append(reply)
                }
                if index % 4 == 3 { try await group.next() }
            }
            try await group.waitForAll()
        }
        let taken = Set(apns.pushes.map(\.apnsId))
        let ok = answers.all.filter { $0.status == 200 }
        let ids = ok.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.body.utf8)) as? [String: Any])?["apnsId"] as? String }
        #expect(ids.count == ok.count && ids.allSatisfy(taken.contains), "every wake answered 200 reached APNs: \(ids.filter { !taken.contains($0) })")
        let statusesUnderLoad = answers.all.map(\.status)
        #expect(ok.count >= 26 && statusesUnderLoad.allSatisfy { [200, 502, 503].contains($0) },
                "the two copies left took the rest; only wakes in flight in the killed copy failed: \(statusesUnderLoad)")

        // PostgreSQL restarting: refused with 503 (never let through uncounted) until it is back.
        let fourth = P256.Signing.PrivateKey()
        let handle = try await copies.seal(LocalRelay.token(0x60), for: fourth)
        let pushesBefore = apns.pushes.count
        try await postgres.stopServer()
        for copy in 0..<2 {
            let (body, headers) = try Copies.signed(handle, by: fourth)
            let refused = try await Copies.post(copies.url(ofCopy: copy) + "/v1/wake", body, headers: headers)
            #expect(refused.status == 503 && refused.body.contains("busy"), "copy \(copy) with the database down: \(refused)")
        }
        #expect(apns.pushes.count == pushesBefore, "nothing pushed while uncounted")
        try await postgres.startServer()
        let back = try await eventually("a wake taken again once PostgreSQL is back", timeout: .seconds(30)) { seen in
            let (body, headers) = try Copies.signed(handle, by: fourth)
            let reply = try await Copies.post(copies.url + "/v1/wake", body, headers: headers)
            seen = "\(reply)"
            return reply.status == 200 ? reply : nil
        }
        #expect(back.body.contains("apnsId"))
        await copies.stop()
    }

    /// The minute `date` falls in (the window the relay counts wakes per server in).
    static func minute(of date: Date) -> Int { Int(date.timeIntervalSince1970) / 60 }
}
