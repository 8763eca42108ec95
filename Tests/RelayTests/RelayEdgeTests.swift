import APNsStandIn
import Crypto
import Foundation
import Glibc
import ProcessSpawn
import RelayCore
import Testing
import TestSupport
import WakeTestSupport

/// `screentime-relayd` at the internet's edge, as the real binary: start-up problems are
/// sentences, its TLS key is read as PEM whatever its name, it listens on IPv6 and IPv4,
/// and a flood of connections from one address does not stop another's wakes.
@Suite("Relay: the binary at the internet's edge", .serialized)
struct RelayEdgeTests {
    /// The relay as a process, with TLS from a test CA, pushing to an APNs stand-in.
    struct Running {
        let pid: pid_t
        let port: Int
        let log: String
        var text: String { (try? String(contentsOfFile: self.log, encoding: .utf8)) ?? "" }

        func stop() async throws -> Int32 {
            kill(self.pid, SIGTERM)
            return try await ChildExit.wait(self.pid, timeout: .seconds(20))
        }
    }

    struct Files {
        let directory = TemporaryDirectory()
        let apns: TestAPNs
        let authority: LocalCA

        init(apns: TestAPNs) throws {
            self.apns = apns
            self.authority = try LocalCA(in: self.directory.path, name: "relay")
            try apns.p8.write(toFile: self.directory.file("apns.p8"), atomically: true, encoding: .utf8)
        }

        /// Every option a TLS relay needs, with `overrides` in place of the defaults.
        func arguments(_ overrides: [String: String] = [:], extra: [String] = []) -> [String] {
            var options = [
                "--tls-certificate": self.authority.certificateFile, "--tls-key": self.authority.keyFile,
                "--sealing-key-file": self.directory.file("sealing.key"), "--apns-key-file": self.directory.file("apns.p8"),
                "--apns-ca-file": self.apns.certificateFile,
            ]
            options.merge(overrides) { _, new in new }
            return options.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }
                + ["--port", "0", "--apns-key-id", self.apns.keyId, "--apns-team-id", self.apns.teamId, "--topic", self.apns.topic,
                   "--apns-url", self.apns.url] + extra
        }

        func start(_ arguments: [String]) async throws -> Running {
            let log = self.directory.file("relay-\(UUID().uuidString.prefix(4)).log")
            let pid = try Spawn(executable: Binaries.path("screentime-relayd"), arguments: arguments, environment: ProcessInfo.processInfo.environment,
                                stdin: nil, stdout: log + ".out", stderr: log).start()
            let port = try await eventually("the relay ready", timeout: .seconds(20)) { seen in
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                seen = text
                if ChildExit.poll(pid) != nil { throw TestFailure("the relay exited: \(text)") }
                guard let range = text.range(of: #"port=\d+"#, options: .regularExpression) else { return nil as Int? }
                return Int(text[range].dropFirst(5))
            }
            return Running(pid: pid, port: port, log: log)
        }
    }

    @Test("a start-up problem with any file is one sentence naming the option and exit status 1, never a trap: missing, unreadable (a directory) or not what it should be")
    func startUpProblems() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let files = try Files(apns: apns)
        let garbage = files.directory.file("garbage.pem")
        try "not a PEM file\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let missing = files.directory.file("missing.pem")
        let aDirectory = files.directory.path
        for option in ["--tls-certificate", "--tls-key", "--apns-key-file", "--apns-ca-file"] {
            for (what, path) in [("missing", missing), ("unreadable", aDirectory), ("malformed", garbage)] {
                let run = try await runCommand(Binaries.path("screentime-relayd"), files.arguments([option: path]))
                let said = run.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
                #expect(run.status == 1, "\(option) \(what): exit \(run.status): \(said)")
                #expect(said.hasPrefix("screentime-relayd: ") && said.contains(option) && !said.contains("Fatal error"), "\(option) \(what): \(said)")
                #expect(said.split(separator: "\n").count == 1, "\(option) \(what): one line: \(said)")
            }
        }
        let sealing = try await runCommand(Binaries.path("screentime-relayd"), files.arguments(["--sealing-key-file": garbage]))
        #expect(sealing.status == 1 && sealing.stderr.contains("is not a sealing key"), "\(sealing.stderr)")
        // An older key to keep opening its handles is never made: a missing one is a mistake.
        let olderMissing = try await runCommand(Binaries.path("screentime-relayd"), files.arguments(extra: ["--sealing-key-file", missing]))
        #expect(olderMissing.status == 1 && olderMissing.stderr.contains("an older key is kept to open its handles, not made"), "\(olderMissing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: files.directory.file("sealing.key")), "nothing made when an option is wrong")
        for (url, said) in [("mysql://relay@db/relay", "must be postgres://"), ("postgres://relay@db/relay?sslmode=maybe", "sslmode=maybe")] {
            let run = try await runCommand(Binaries.path("screentime-relayd"), files.arguments(extra: ["--state-database", url]))
            #expect(run.status == 1 && run.stderr.hasPrefix("screentime-relayd: ") && run.stderr.contains(said), "\(url): \(run.stderr)")
        }
    }

    @Test("a PEM key named relay.key (as Debian's ssl-cert names keys) is read as PEM; by default the relay listens on IPv6 and IPv4 alike")
    func keyByAnyNameAndBothFamilies() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let files = try Files(apns: apns)
        let key = files.directory.file("relay.key")
        try FileManager.default.copyItem(atPath: files.authority.keyFile, toPath: key)
        let relay = try await files.start(files.arguments(["--tls-key": key]))
        for address in ["127.0.0.1", "::1"] {
            let health = try await runCommand("/usr/bin/curl", [
                "-sS", "--max-time", "10", "--cacert", files.authority.caFile, "--resolve", "localhost:\(relay.port):\(address)",
                "https://localhost:\(relay.port)/v1/health",
            ])
            #expect(health.status == 0 && health.stdout.contains("ok"), "over \(address): \(health.stderr) \(relay.text)")
        }
        #expect(try await relay.stop() == 0)
    }
}

extension RelayEdgeTests {
    @Test("200 connections trickling a byte a second and 2,000 idle ones from one address: the relay holds at most its per-address cap of them, and a home server's wakes from another address go through meanwhile")
    func floodFromOneAddress() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let files = try Files(apns: apns)
        try Self.raiseOpenFileLimit(to: 8_192)
        let relay = try await files.start(files.arguments(extra: ["--max-connections-per-address", "32", "--request-timeout", "5"]))
        let server = P256.Signing.PrivateKey()
        let wake = { (handle: String) async throws -> (status: Int32, body: String) in
            let body = Array(try JSONSerialization.data(withJSONObject: ["handle": handle, "kind": "background", "id": WakeRequest.newId()]))
            let headers = try WakeSignature.headers(body: body, key: server).flatMap { ["-H", "\($0.0): \($0.1)"] }
            let run = try await runCommand("/usr/bin/curl", [
                "-sS", "--max-time", "5", "--cacert", files.authority.caFile, "--resolve", "localhost:\(relay.port):::1",
                "-H", "content-type: application/json", "--data-binary", String(decoding: body, as: UTF8.self),
                "https://localhost:\(relay.port)/v1/wake",
            ] + headers)
            return (run.status, run.stdout + run.stderr)
        }
        let sealed = try await runCommand("/usr/bin/curl", [
            "-sS", "--max-time", "5", "--cacert", files.authority.caFile, "--resolve", "localhost:\(relay.port):::1",
            "-H", "content-type: application/json", "--data-binary",
            #"{"token":"\#(LocalRelay.token(0x70))","topic":"\#(apns.topic)","environment":"production","pin":"\#(LocalRelay.pin(server))"}"#,
            "https://localhost:\(relay.port)/v1/seal",
        ])
        #expect(sealed.status == 0 && sealed.stdout.contains(#""delivery":"push""#), "\(sealed)")
        let handle = try await apns.handle(for: LocalRelay.token(0x70))

        let port = relay.port
        let trickle = try await offThePool { try Flood.open(200, port: port) }
        let trickling = Thread { trickle.trickle() }
        trickling.start()
        defer { trickle.stop() }
        let idle = try await offThePool { try Flood.open(2_000, port: port) }
        defer { idle.closeAll() }

        for index in 0..<5 {
            let woken = try await wake(handle)
            #expect(woken.status == 0 && woken.body.contains("apnsId"), "wake \(index) during the flood: \(woken.body)")
        }
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(relay.pid)/fd").count
        #expect(descriptors < 200, "the relay holds \(descriptors) descriptors with 2,200 connections asked of it")
        #expect(trickle.openCount <= 32, "\(trickle.openCount) trickling connections held")
        #expect(apns.pushes.count == 5)
        // Those it admitted sent no request in time: cut at the deadline (5 s here).
        try await waitUntil("the admitted trickling and idle connections cut at the deadline", timeout: .seconds(30)) {
            trickle.openCount == 0 && idle.openCount == 0
        }
        trickle.stop()
        idle.closeAll()
        #expect(try await relay.stop() == 0)
    }

    @Test("one deadline for a new connection's TLS handshake and first request: a connection that sends nothing is closed at it; kept-alive connections outlive it, over HTTP/1.1 and HTTP/2, each request on the same connection")
    func connectionDeadline() async throws {
        let apns = try await TestAPNs()
        defer { apns.stop() }
        let files = try Files(apns: apns)
        let relay = try await files.start(files.arguments(extra: ["--request-timeout", "1"]))
        let silent = try Flood.open(1, port: relay.port)
        defer { silent.closeAll() }
        let opened = ContinuousClock.now
        try await waitUntil("the silent connection closed", timeout: .seconds(10)) { silent.openCount == 0 }
        #expect(ContinuousClock.now - opened >= .milliseconds(900), "closed at the deadline, not before")

        // Three requests two seconds apart (twice the deadline) on one connection: curl
        // says how many connections each made (1, then 0: the same one).
        for version in ["--http1.1", "--http2"] {
            let url = "https://localhost:\(relay.port)/v1/health"
            let run = try await runCommand("/usr/bin/curl", [
                "-sS", version, "--rate", "30/m", "--max-time", "20", "--cacert", files.authority.caFile,
                "--resolve", "localhost:\(relay.port):127.0.0.1", "-w", "%{http_code}:%{num_connects} ",
            ] + [url, url, url].flatMap { ["-o", "/dev/null", $0] })
            #expect(run.stdout.trimmingCharacters(in: .whitespaces) == "200:1 200:0 200:0", "\(version): \(run.stdout) \(run.stderr)")
        }
        #expect(try await relay.stop() == 0)
    }

    /// Raises this process's soft limit of open files (the flood holds thousands).
    static func raiseOpenFileLimit(to wanted: rlim_t) throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur >= 2_500 else {
            throw TestFailure("cannot raise the open-file limit to \(wanted) (hard limit \(limit.rlim_max))")
        }
    }
}

/// Plain TCP connections to 127.0.0.1 that send nothing, or a byte a second, and notice
/// when the other end closes them.
final class Flood: @unchecked Sendable {
    private let lock = NSLock()
    private var sockets: [Int32]
    private var stopped = false

    private init(_ sockets: [Int32]) { self.sockets = sockets }

    /// Connects `count` times, one after another (blocking: a connection is made before
    /// the next is asked for, as a client that waits for each does).
    static func open(_ count: Int, port: Int) throws -> Flood {
        var sockets: [Int32] = []
        for _ in 0..<count {
            let fd = try RawTCP.open(port: port)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            sockets.append(fd)
        }
        return Flood(sockets)
    }

    /// The connections the relay has not closed yet (what it sent is read and dropped).
    var openCount: Int {
        self.lock.lock()
        defer { self.lock.unlock() }
        var buffer = [UInt8](repeating: 0, count: 512)
        self.sockets.removeAll { fd in
            while true {
                let got = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if got > 0 { continue }
                let closed = got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)
                if closed { close(fd) }
                return closed
            }
        }
        return self.sockets.count
    }

    /// Sends one byte a second on each open connection until ``stop()``: the header of a
    /// TLS handshake record of 16 KiB, then its contents, so the relay's TLS waits for
    /// more and only a deadline ends it.
    func trickle() {
        let header: [UInt8] = [0x16, 0x03, 0x01, 0x40, 0x00]
        var sent = 0
        while true {
            self.lock.lock()
            if self.stopped {
                self.lock.unlock()
                return
            }
            let byte = sent < header.count ? header[sent] : 0x01
            for fd in self.sockets { _ = send(fd, [byte], 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            self.lock.unlock()
            sent += 1
            // The pace is the behaviour under test (a byte a second), not a wait for an event.
            sleep(1)
        }
    }

    func stop() {
        self.lock.lock()
        self.stopped = true
        self.lock.unlock()
        self.closeAll()
    }

    func closeAll() {
        self.lock.lock()
        defer { self.lock.unlock() }
        for fd in self.sockets { close(fd) }
        self.sockets = []
    }
}
