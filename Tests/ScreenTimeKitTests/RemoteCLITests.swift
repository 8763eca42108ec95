import Foundation
import PairingAPI
import ProcessSpawn
import RPCClient
import RPCCore
import StoreAPI
import Testing
import TestSupport

/// `screentimectl` as a remote device: the parent and the child are separate processes, each
/// with its own profile directory (two machines), and no local sockets (their runtime
/// directory does not exist): every device command goes through ScreenTimeKit and the real
/// gateway, over TLS with its key pinned.
@Suite("screentimectl as a remote device through the gateway", .serialized)
struct RemoteCLITests {
    /// One side of the family: `screentimectl` with its own profile directory.
    struct Machine {
        let home: String

        var environment: [String: String] {
            ["SCREENTIME_PROFILES_DIR": self.home, "SCREENTIME_RUNTIME_DIR": "/nonexistent/screentime", "SCREENTIME_PROFILE": "",
             "SCREENTIME_SERVER": "", "SCREENTIME_PIN": ""]
        }

        @discardableResult
        func ctl(_ arguments: String..., expect status: Int32? = 0) async throws -> (status: Int32, stdout: String, stderr: String) {
            let result = try await runCommand(Binaries.path("screentimectl"), arguments, environment: self.environment, timeout: .seconds(60))
            if let status, result.status != status {
                Issue.record("screentimectl \(arguments.joined(separator: " ")) exited \(result.status), not \(status)\nstdout: \(result.stdout)\nstderr: \(result.stderr)")
            }
            return result
        }

        /// Starts `screentimectl ARGUMENTS` in the background, its output in `output`.
        func background(_ arguments: [String], output: String) throws -> pid_t {
            try Spawn(executable: Binaries.path("screentimectl"), arguments: arguments,
                      environment: ProcessInfo.processInfo.environment.merging(self.environment) { _, new in new },
                      stdout: output, stderr: output + ".err").start()
        }
    }

    struct Family {
        var parent: Machine
        var child: Machine
        var zone: String
        var childDevice: String
    }

    /// Enrolls a parent (with --server and --pin) and pairs a child (with --server, the pin
    /// from the pairing URI), each in its own process and profile directory, then confirms.
    static func pairOverNetwork(_ stack: KitStack, url: String, pin: String) async throws -> Family {
        let parent = Machine(home: stack.directory.file("parent-home"))
        let child = Machine(home: stack.directory.file("child-home"))
        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        try await parent.ctl("parent", "enroll", "--profile", "mum", "--family", "smith", "--code", code.code, "--server", url, "--pin", pin)
        let invited = try await parent.ctl("child", "invite", "--profile", "mum", "emma", "--no-qr", "--no-wait")
        let uri = try #require(invited.stdout.split(separator: "'").first { $0.hasPrefix("screentime://pair") }.map(String.init))
        let parsed = try #require(PairingURI(uri))
        #expect(parsed.pin == pin && parsed.urls.contains(url), "the server's version 2 URI carries the gateway")
        #expect(invited.stdout.contains("--server \(url)"), "the hint says how to accept through the gateway")
        let accepted = try await child.ctl("child", "accept", "--profile", "emma-tablet", "--server", url, uri)
        #expect(accepted.stdout.contains("Short code"))
        try await parent.ctl("child", "confirm", "--profile", "mum", parsed.invitationId)
        let profile = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: child.home + "/emma-tablet.json"))) as? [String: Any]
        #expect(profile?["gatewayURLs"] as? [String] == [url] && profile?["gatewayPin"] as? String == pin, "the profile keeps the gateway")
        return Family(parent: parent, child: child, zone: try #require(profile?["zone"] as? String), childDevice: try #require(profile?["deviceId"] as? String))
    }

    static func usageCount(_ stack: KitStack, zone: String) async throws -> Int {
        let page = try await stack.admin("store").call(StoreMethods.query, QueryParams(family: "smith", zone: zone, recordType: RecordTypes.usageRecord, limit: 400))
        return page.records.count
    }

    @Test("parent and child in two processes over TLS: pairing, a rule heard live by the child's watch and applied, usage; a wrong pin refused before any request; the connection lost under the child's watch and recovered: nothing shown twice, nothing missed")
    func parentAndChild() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
        defer { gateway.stopNow() }
        let family = try await Self.pairOverNetwork(stack, url: endpoint.urls[0], pin: endpoint.pin)

        // The child's device listens in its own process while the parent's sets a rule.
        let watchOutput = stack.directory.file("watch.out")
        let watcher = try family.child.background(["watch", "--profile", "emma-tablet", "--count", "1"], output: watchOutput)
        defer { kill(watcher, SIGKILL) }
        try await waitUntil("the child's watch subscribed", timeout: .seconds(30)) {
            ((try? String(contentsOfFile: watchOutput + ".err", encoding: .utf8)) ?? "").contains("watching")
        }
        try await family.parent.ctl("apps", "set", "--profile", "mum", "org.khanacademy", "--category", "learning", "--points-per-minute", "2")
        #expect(try await ChildExit.wait(watcher, timeout: .seconds(30)) == 0)
        #expect(((try? String(contentsOfFile: watchOutput, encoding: .utf8)) ?? "").contains("ConfigurationCommand"))
        // Through the kit's WebSocket, under strace: the process never listens on a socket (no
        // local hop between its TLS connection and its WebSocket).
        let trace = stack.directory.file("commands.strace")
        guard let strace = ["/usr/bin/strace", "/bin/strace"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Issue.record("strace is not installed (apt-get install strace; .ci/run installs it): the kit's no-listening-socket check cannot run")
            return
        }
        let traced = try await runCommand(strace, ["-f", "-e", "trace=listen", "-o", trace, Binaries.path("screentimectl"), "commands", "--profile", "emma-tablet"],
                                          environment: family.child.environment, timeout: .seconds(60))
        #expect(traced.status == 0, "\(traced.stderr)")
        let calls = ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.contains("listen(") }
        #expect(calls.isEmpty, "the kit listened on a socket: \(calls)")
        let applied = try await family.child.ctl("commands", "apply", "--profile", "emma-tablet")
        #expect(applied.stdout.contains("the family's rules applied") && applied.stdout.contains("org.khanacademy is learning"), "\(applied.stdout)")
        let uploaded = try await family.child.ctl("usage", "add", "--profile", "emma-tablet", "org.khanacademy", "--minutes", "30")
        #expect(uploaded.stdout.hasPrefix("Uploaded"))
        #expect(try await Self.usageCount(stack, zone: family.zone) == 1)

        // A pin that is not the gateway's: refused in the TLS handshake, nothing sent.
        let opened = gateway.log.components(separatedBy: "websocket opened").count
        let wrong = String(repeating: "A", count: 43) + "="
        let refused = try await family.parent.ctl("devices", "--profile", "mum", "--pin", wrong, expect: nil)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("pin_mismatch"), "\(refused.stderr)")
        #expect(gateway.log.components(separatedBy: "websocket opened").count == opened, "no WebSocket was opened with the wrong pin")

        // The connection lost under the child's watch, and recovered: what was shown before is
        // not shown again, what came while nobody watched is shown, once.
        let liveOutput = stack.directory.file("live.out")
        let live = try family.child.background(["watch", "--profile", "emma-tablet", "--seconds", "120"], output: liveOutput)
        defer { kill(live, SIGKILL) }
        try await waitUntil("the child's watch listening again", timeout: .seconds(30)) {
            ((try? String(contentsOfFile: liveOutput + ".err", encoding: .utf8)) ?? "").contains("watching")
        }
        let acks = gateway.log.components(separatedBy: "method=push.ack").count
        try await family.parent.ctl("apps", "set", "--profile", "mum", "com.game", "--category", "reward")
        try await waitUntil("the second command shown live", timeout: .seconds(30)) { Self.seqs(liveOutput).count == 1 }
        // The watch acknowledges what it showed (the gateway logs each request once answered).
        try await waitUntil("its acknowledgement answered", timeout: .seconds(30)) { gateway.log.components(separatedBy: "method=push.ack").count > acks }
        await gateway.stop()
        #expect(try await ChildExit.wait(live, timeout: .seconds(30)) == 69, "the watch reports the lost connection")
        let shownBefore = Self.seqs(liveOutput)
        let (restarted, _) = try await GatewayEndToEndTests.startGateway(stack, port: endpoint.port)
        defer { restarted.stopNow() }
        try await family.parent.ctl("apps", "set", "--profile", "mum", "org.wikipedia", "--category", "learning")
        let rewatchOutput = stack.directory.file("rewatch.out")
        let rewatch = try family.child.background(["watch", "--profile", "emma-tablet", "--count", "1", "--seconds", "60"], output: rewatchOutput)
        defer { kill(rewatch, SIGKILL) }
        #expect(try await ChildExit.wait(rewatch, timeout: .seconds(60)) == 0)
        let shownAfter = Self.seqs(rewatchOutput)
        #expect(shownAfter.count == 1 && shownAfter[0] > shownBefore.last!, "before \(shownBefore), after \(shownAfter)")
        await restarted.stop()
    }

    @Test("a revoked child device through the gateway: usage add, commands, watch and usage sync each exit 77 at once saying the device was removed and how to pair again; its queue is kept; its attempts cost its address nothing")
    func revokedDevice() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
        defer { gateway.stopNow() }
        let family = try await Self.pairOverNetwork(stack, url: endpoint.urls[0], pin: endpoint.pin)
        try await family.parent.ctl("apps", "set", "--profile", "mum", "org.khanacademy", "--category", "learning")
        try await family.child.ctl("commands", "apply", "--profile", "emma-tablet")
        try await family.parent.ctl("device", "revoke", "--profile", "mum", family.childDevice)

        for arguments in [["usage", "add", "--profile", "emma-tablet", "org.khanacademy", "--minutes", "5"],
                          ["commands", "--profile", "emma-tablet"], ["watch", "--profile", "emma-tablet", "--seconds", "30"],
                          ["usage", "sync", "--profile", "emma-tablet"]] {
            let started = ContinuousClock.now
            let result = try await runCommand(Binaries.path("screentimectl"), arguments, environment: family.child.environment, timeout: .seconds(60))
            #expect(result.status == 77, "\(arguments.joined(separator: " ")): \(result.status)\n\(result.stderr)\nthe gateway's log:\n\(gateway.log.suffix(4000))")
            #expect(result.stderr.contains("device_revoked") && result.stderr.contains("removed") && result.stderr.contains("child accept"),
                    "\(arguments.joined(separator: " ")): \(result.stderr)")
            #expect(ContinuousClock.now - started < .seconds(30), "\(arguments.joined(separator: " ")) gave up only at its timeout")
        }
        // What usage add queued is kept, unsent.
        let sync = try await family.child.ctl("usage", "sync", "--profile", "emma-tablet", expect: 77)
        #expect(sync.stdout.contains("1 batch queued") && sync.stdout.contains("kept, not sent"), "\(sync.stdout)")
        #expect(try await Self.usageCount(stack, zone: family.zone) == 0)
        // The gateway knows of the revocation from the store's feed and refuses the device
        // itself, naming it; the address is not rate-limited for it.
        try await eventually("the gateway cutting the revoked device off by name", timeout: .seconds(20),
                             detail: gateway.log.split(separator: "\n").suffix(20).joined(separator: "\n")) { _ in
            // (Each try is 77 at once; on a loaded machine one may not reach the gateway in time.)
            _ = try await runCommand(Binaries.path("screentimectl"), ["commands", "--profile", "emma-tablet"], environment: family.child.environment, timeout: .seconds(60))
            return gateway.log.split(separator: "\n").contains { $0.contains("websocket cut off") && $0.contains("device_id=\(family.childDevice)") && $0.contains("reason=device_revoked") } ? () : nil
        }
        #expect(!gateway.log.split(separator: "\n").contains { $0.contains("websocket cut off") && $0.contains("device_id= ") }, "a cut-off line without the device")
        // More tries from the same address (77 each; on a loaded machine one may not reach
        // the gateway in time): the address can still ask for /v1/info, unlimited.
        for _ in 0..<3 {
            _ = try await runCommand(Binaries.path("screentimectl"), ["commands", "--profile", "emma-tablet"], environment: family.child.environment, timeout: .seconds(60))
        }
        let info = try await runCommand("/usr/bin/curl", ["-sk", "-o", "/dev/null", "-w", "%{http_code}", endpoint.urls[0] + "/v1/info"], timeout: .seconds(30))
        #expect(info.stdout == "200")
    }

    @Test("a gateway nobody answers at: exit 69 and a sentence naming the address, never a SwiftNIO error value; a child accepts a link with no --server, from the link's own gateway and pin")
    func unreachableAndLinkOnly() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
        defer { gateway.stopNow() }
        let parent = Machine(home: stack.directory.file("parent-home"))
        let code = try await stack.admin("pairing").call(PairingMethods.createFamily, NewFamilyParams(family: "smith", timeZone: "UTC"))
        try await parent.ctl("parent", "enroll", "--profile", "mum", "--family", "smith", "--code", code.code, "--server", endpoint.urls[0], "--pin", endpoint.pin)

        // Port 1 on this machine: nothing listens there.
        let nowhere = try await parent.ctl("devices", "--profile", "mum", "--server", "https://127.0.0.1:1", expect: 69)
        #expect(nowhere.stderr.contains("nothing answered at 127.0.0.1:1") && nowhere.stderr.contains("connection refused")
                && !nowhere.stderr.contains("SingleConnectionFailure") && !nowhere.stderr.contains("NIOConnectionError"), "\(nowhere.stderr)")

        // The link alone: its url= and pin= (the child's machine has no server of its own).
        let invited = try await parent.ctl("child", "invite", "--profile", "mum", "emma", "--no-qr", "--no-wait")
        let link = try #require(invited.stdout.range(of: #"screentime://[^' \n]+"#, options: .regularExpression).map { String(invited.stdout[$0]) })
        let child = Machine(home: stack.directory.file("child-home"))  // no local server (its runtime directory does not exist)
        let accepted = try await child.ctl("child", "accept", "--profile", "emma-tablet", link)
        #expect(accepted.stdout.contains("joined smith"), "\(accepted)")
    }

    /// The notification numbers a watch printed (`#N …` lines).
    static func seqs(_ file: String) -> [Int] {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            line.hasPrefix("#") ? Int(line.dropFirst().prefix { $0.isNumber }) : nil
        }
    }

    @Test("usage recorded while the gateway is down waits in the child's queue; the child's process killed (kill -9) mid-replay; the next replay sends everything exactly once")
    func crashMidReplay() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        var (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
        defer { gateway.stopNow() }
        let family = try await Self.pairOverNetwork(stack, url: endpoint.urls[0], pin: endpoint.pin)
        try await family.parent.ctl("apps", "set", "--profile", "mum", "org.khanacademy", "--category", "learning")
        try await family.child.ctl("commands", "apply", "--profile", "emma-tablet")

        // Offline: three sessions, each its own batch, queued on the child's disk.
        await gateway.stop()
        for hour in ["01", "02", "03"] {
            let queued = try await family.child.ctl("usage", "add", "--profile", "emma-tablet", "org.khanacademy", "--minutes", "10", "--end", "2026-11-20T\(hour):00:00Z")
            #expect(queued.stdout.hasPrefix("Queued"), "\(queued.stdout)")
        }
        #expect(try await Self.usageCount(stack, zone: family.zone) == 0)
        let offline = try await family.child.ctl("usage", "sync", "--profile", "emma-tablet", expect: 69)
        #expect(offline.stdout.contains("3 still queued"))

        // The gateway is back; the store is frozen (SIGSTOP), so the first batch is held
        // there, in flight, when the child's process is killed.
        (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack, port: endpoint.port)
        try await family.child.ctl("commands", "list", "--profile", "emma-tablet")
        let store = try #require(stack.services["store"])
        kill(store.pid, SIGSTOP)
        var frozen = true
        defer { if frozen { kill(store.pid, SIGCONT) } }
        let output = stack.directory.file("sync.out")
        let replay = try family.child.background(["usage", "sync", "--profile", "emma-tablet"], output: output)
        try await waitUntil("the first batch in flight", timeout: .seconds(30)) {
            ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("sending kit-")
        }
        // Its bytes reached the store: unread on the store's end of one of the gateway's
        // connections, or, on a connection the frozen store has not accepted yet, queued
        // for it (a peer of inode 0): the crash is mid-replay.
        // The store binds a temporary name and renames it to store.sock: the kernel knows
        // its connections by the first name.
        let names: Set<Substring> = [Substring(stack.directory.file("store.sock")), Substring(stack.directory.file(".bind-\(store.pid)"))]
        _ = try await eventually("the batch waiting at the store", timeout: .seconds(30)) { seen -> Bool? in
            let sockets = try await runCommand("/usr/bin/ss", ["-xnpH"], timeout: .seconds(10)).stdout
            seen = sockets
            return sockets.split(separator: "\n").contains { line in
                let columns = line.split(separator: " ", omittingEmptySubsequences: true)
                guard columns.count > 7, columns[1] == "ESTAB" else { return false }
                let unreadAtTheStore = names.contains(columns[4]) && (Int(columns[2]) ?? 0) > 0
                let queuedForTheStore = columns[7] == "0" && (Int(columns[3]) ?? 0) > 0 && line.contains("pid=\(gateway.pid),")
                return unreadAtTheStore || queuedForTheStore
            } ? true : nil
        }
        kill(replay, SIGKILL)
        #expect(try await ChildExit.wait(replay, timeout: .seconds(30)) == 128 + SIGKILL)
        let before = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(!before.contains("sent kit-"), "killed before it heard of any batch: \(before)")
        kill(store.pid, SIGCONT)
        frozen = false

        // Replay again: every batch arrives, none twice.
        let again = try await family.child.ctl("usage", "sync", "--profile", "emma-tablet")
        let lines = again.stdout.split(separator: "\n")
        let sent = lines.filter { $0.hasPrefix("sent kit-") }.count
        let already = lines.filter { $0.hasPrefix("already applied kit-") }.count
        #expect(sent + already == 3, "\(again.stdout)")
        // The batch in flight at the crash was applied by the store after the sender died;
        // the replay sends it again with the same request id and the store says so.
        #expect(already == 1, "the batch in flight at the crash is recognised, not applied again: \(again.stdout)")
        #expect(lines.first { $0.hasPrefix("sent kit-") || $0.hasPrefix("already applied kit-") }?.hasPrefix("already applied") == true)
        #expect(again.stdout.contains("0 still queued"))
        #expect(try await Self.usageCount(stack, zone: family.zone) == 3)
        // Nothing left: a third replay sends nothing.
        let third = try await family.child.ctl("usage", "sync", "--profile", "emma-tablet")
        #expect(third.stdout.contains("0 batches queued"))
        await gateway.stop()
    }

    @Test("demo --server: the whole story over the network, both devices through the gateway, with its timings")
    func demoOverNetwork() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push", "aggregator"])
        defer { stack.stopAll() }
        let (gateway, endpoint) = try await GatewayEndToEndTests.startGateway(stack)
        defer { gateway.stopNow() }
        let opened = gateway.log.components(separatedBy: "websocket opened").count
        // Only the administrator's step (creating the family) uses the server's own sockets.
        let demo = try await Machine(home: stack.directory.file("demo-home"))
            .ctl("demo", "--runtime-dir", stack.directory.path, "--server", endpoint.urls[0], "--pin", endpoint.pin)
        #expect(demo.stdout.contains("Over the network"))
        for step in ["parent enrolls with the code:", "child accepts:", "after the parent saved", "after the upload", "its next write is refused: device_revoked", "Done in"] {
            #expect(demo.stdout.contains(step), "\(step) missing from:\n\(demo.stdout)")
        }
        #expect(gateway.log.components(separatedBy: "websocket opened").count > opened + 1, "the devices went through the gateway")
        await gateway.stop()
    }
}

