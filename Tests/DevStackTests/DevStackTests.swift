import Foundation
import Synchronization
import RPCClient
import RPCCore
import StoreAPI
import Testing
import StackSupport
import TestSupport

@Suite("screentime-dev up: the whole stack, socket-activated, supervised", .serialized)
struct DevStackTests {
    @Test("nothing runs until a connection comes; the first request to each socket starts its service, with its log lines under its name")
    func startsOnDemand() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        #expect(try stack.services().values.allSatisfy { $0.pid == nil })
        for name in ["store", "pairing", "push", "aggregator"] {
            #expect(FileManager.default.fileExists(atPath: "\(stack.runtime)/\(name).sock"), "\(name).sock")
        }
        let ping = try await stack.client("pairing").call("rpc.ping")
        #expect(ping["service"] == "pairing")
        try await stack.waitUntil("pairing reports running") { try stack.services()["pairing"]?.state.contains("running") == true }
        #expect(try stack.services()["store"]?.pid == nil, "pairing did not need the store yet")
        #expect(stack.log.contains("pairing    | ") && stack.log.contains("using sockets passed by systemd"))

        // A commit wakes push and the aggregator, as the store's waker does under systemd.
        _ = try await stack.client("store").call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
        try await stack.waitUntil("every service runs") {
            try stack.services().filter { $0.key != "pairing" && $0.key != "gateway" }.values.allSatisfy { $0.state.contains("running") }
        }
        #expect(stack.log.contains("Serving"), "the status lines come from sd_notify")

        // The gateway, on the TCP port printed, starts on its first HTTPS connection.
        let port = try #require(stack.log.split(separator: "\n").first { $0.hasPrefix("gateway port: ") }.map { String($0.dropFirst("gateway port: ".count)) })
        let info = try await runCommand("/usr/bin/curl", ["-sk", "--max-time", "20", "https://127.0.0.1:\(port)/v1/info"])
        #expect(info.status == 0 && info.stdout.contains("\"apiVersion\""), "\(info)")
        try await stack.waitUntil("the gateway reports running") { try stack.services()["gateway"]?.state.contains("running") == true }
        #expect(try await stack.interrupt() == 0)
        #expect(stack.log.contains("store stopped") && stack.log.hasSuffix("stopped\n"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: stack.runtime).isEmpty, "sockets are removed")
    }

    @Test("a service killed with -9 while a client keeps calling is restarted; no call is refused and no acknowledged write is lost")
    func restartsCrashes() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let store = stack.client("store")
        _ = try await store.call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
        let first = try #require(try stack.services()["store"]?.pid)
        // A call in flight when the process dies fails (its connection closes); the client
        // calls again on a new connection, which the socket held by screentime-dev accepts.
        let writer = Task {
            var acknowledged: [String] = []
            var lost: [String] = []
            for index in 0..<400 {
                let zone = "zone-\(index)"
                do {
                    _ = try await store.call(StoreMethods.createZone, ZoneParams(family: "smith", zone: zone))
                    acknowledged.append(zone)
                } catch {
                    lost.append("\(error)")
                }
            }
            return (acknowledged, lost)
        }
        try await Task.sleep(for: .milliseconds(100))
        kill(first, SIGKILL)
        try await stack.waitUntil("the store restarts") { try stack.services()["store"].map { $0.pid != nil && $0.pid != first } == true }
        let (acknowledged, lost) = await writer.value
        #expect(lost.count <= 1 && !lost.contains { $0.contains("refused") || $0.contains("cannot connect") },
                "only the call in flight fails, and no connection is refused: \(lost)")
        let zones = Set(try await store.call(StoreMethods.listZones, FamilyParams(family: "smith")).zones.map(\.name))
        #expect(acknowledged.count >= 399 && acknowledged.allSatisfy(zones.contains), "every acknowledged zone is there")
        #expect(stack.log.contains("store crashed (killed by signal 9); restarting"))
    }

    @Test("the data stays across runs, and screentimectl finds the stack by itself")
    func dataSurvives() async throws {
        let stack = try await DevStack.start()
        _ = try await stack.client("store").call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
        #expect(try await stack.interrupt() == 0)
        let again = try DevStack(reusing: stack)
        defer { again.stopNow() }
        try await again.waitUntil("the stack is up again") { FileManager.default.fileExists(atPath: again.runtime + "/dev-status.json") }
        let listed = try await runCommand(Binaries.path("screentimectl"), ["call", "store", "store.listFamilies"],
                                          environment: ["SCREENTIME_DEV_DIR": again.stack, "SCREENTIME_RUNTIME_DIR": ""])
        #expect(listed.status == 0 && listed.stdout.contains("smith"), "\(listed)")
    }

    @Test("a service that keeps crashing is restarted five times, then left alone; the others are unaffected")
    func crashLoop() async throws {
        let binaries = TemporaryDirectory()
        for name in ["screentime-stored", "screentime-pairingd", "screentime-pushd", "screentime-aggregatord", "screentime-gatewayd"] {
            let script = name == "screentime-stored" ? "#!/bin/sh\necho \"cannot open the database\" >&2\nexit 3\n" : "#!/bin/sh\nexec \(Binaries.path(name)) \"$@\"\n"
            #expect(FileManager.default.createFile(atPath: binaries.file(name), contents: Data(script.utf8), attributes: [.posixPermissions: 0o755]))
        }
        let stack = try await DevStack.start(arguments: ["--bin-dir", binaries.path])
        defer { stack.stopNow() }
        let impatient = RPCClient(configuration: ClientConfiguration(socketPath: stack.runtime + "/store.sock", callTimeout: .seconds(1), connectTimeout: .seconds(1)))
        await #expect(throws: (any Error).self, "the connection waits in the socket's backlog; nothing answers") { _ = try await impatient.call("rpc.ping") }
        try await stack.waitUntil("the store is given up on") { stack.log.contains("store crashed (exit status 3) 5 times within 30.0 seconds") }
        #expect(stack.log.contains("store      | cannot open the database"))
        try await stack.waitUntil("the status says failed") { try stack.services()["store"]?.state.contains("failed") == true }
        #expect(try await stack.client("pairing").call("rpc.ping")["service"] == "pairing")
    }

    @Test("a second stack on the same directory, a missing binary and bad options get clear errors")
    func refusals() async throws {
        let stack = try await DevStack.start()
        defer { stack.stopNow() }
        let second = try await runCommand(Binaries.path("screentime-dev"), ["up", "--dir", stack.stack])
        #expect(second.status == 1 && second.stderr.contains("is in use: is another screentime-dev up running"), "\(second)")
        #expect(!second.stderr.contains("USAGE"), "a runtime failure, not a usage error")
        let empty = TemporaryDirectory()
        let missing = try await runCommand(Binaries.path("screentime-dev"), ["up", "--dir", empty.file("s"), "--bin-dir", empty.path])
        #expect(missing.status == 64 && missing.stderr.contains("screentime-stored is missing: build the services first"), "\(missing)")
        let level = try await runCommand(Binaries.path("screentime-dev"), ["up", "--dir", empty.file("s"), "--log-level", "loud"])
        #expect(level.status == 64 && level.stderr.contains("--log-level must be"))
        let long = empty.file(String(repeating: "d", count: 120))
        let tooLong = try await runCommand(Binaries.path("screentime-dev"), ["up", "--dir", long])
        #expect(tooLong.status == 1 && tooLong.stderr.contains("is longer than a Unix socket path may be"), "\(tooLong)")
        let timeout = try await runCommand(Binaries.path("screentime-dev"), ["up", "--dir", empty.file("s"), "--stop-timeout", "0"])
        #expect(timeout.status == 64 && timeout.stderr.contains("--stop-timeout must be between"))
        let status = try await runCommand(Binaries.path("screentime-dev"), ["status", "--dir", empty.file("none")])
        #expect(status.status != 0 && status.stderr.contains("no stack is running"))
        #expect(try await stack.client("store").call("rpc.ping")["service"] == "store", "the first stack is unharmed")
    }
}

extension DevStack {
    /// A new `up` on the same stack directory (and log).
    convenience init(reusing other: DevStack) throws {
        try self.init(directory: other.directory)
    }
}
