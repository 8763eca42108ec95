import TestSupport
import Foundation
import Glibc
import RPCClient
import RPCCore
import Synchronization
import Testing

@Suite("Starting and stopping a service")
struct StartupAndShutdownTests {
    @Test("started by hand, it binds <runtime-dir>/test.sock with mode 0660 and answers rpc.ping")
    func startedByHand() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }

        var info = stat()
        #expect(stat(dir.file("test.sock"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o660)

        let client = RPCClient(socketPath: service.socketPath)
        let ping = try await client.call(Builtin.ping, Empty())
        #expect(ping.service == "test")
        #expect(ping.version == "0.0.0-test")
        #expect(ping.pid == service.pid)
        #expect(ping.uptimeSeconds >= 0)
    }

    @Test("--socket-mode sets the socket's mode explicitly")
    func socketMode() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--socket-mode", "0600"])
        defer { service.stopNow() }
        var info = stat()
        #expect(stat(dir.file("test.sock"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test("socket-activated through systemd-socket-activate, it serves the passed fd and sees its name")
    func socketActivated() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startSocketActivated(in: dir, fdName: "test")
        defer { service.stopNow() }

        let client = RPCClient(socketPath: service.socketPath)
        let ping = try await client.call(Builtin.ping, Empty())
        #expect(ping.service == "test")
        // systemd-socket-activate execs the service in its own process.
        #expect(ping.pid == service.pid)
        #expect(service.log.contains("using sockets passed by systemd"))
        #expect(service.log.contains("3:test"))
        // It did not bind a socket of its own.
        #expect(!FileManager.default.fileExists(atPath: dir.file("test.sock")))
    }

    @Test("a stale socket file left by a dead process is replaced")
    func staleSocketIsReplaced() async throws {
        let dir = TemporaryDirectory()
        // A socket file nobody listens on any more.
        try makeStaleSocket(at: dir.file("test.sock"))
        #expect(FileManager.default.fileExists(atPath: dir.file("test.sock")))

        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let ping = try await RPCClient(socketPath: service.socketPath).call(Builtin.ping, Empty())
        #expect(ping.pid == service.pid)
    }

    @Test("a second instance refuses to steal a live socket and exits with a clear message")
    func liveSocketIsNotStolen() async throws {
        let dir = TemporaryDirectory()
        let first = try await ServiceProcess.startByHand(in: dir)
        defer { first.stopNow() }

        let second = try ServiceProcess(
            executable: Binaries.path("screentime-testd"),
            arguments: ["--runtime-dir", dir.path],
            socketPath: dir.file("test.sock"),
            logPath: dir.file("second.log"),
            environment: [:]
        )
        let status = try await second.waitForExit()
        #expect(status != 0)
        #expect(second.log.contains("another process is listening on \(dir.file("test.sock"))"))
        // The first one still serves.
        let ping = try await RPCClient(socketPath: first.socketPath).call(Builtin.ping, Empty())
        #expect(ping.pid == first.pid)
    }

    @Test("a path that is not a socket is left alone")
    func nonSocketIsLeftAlone() async throws {
        let dir = TemporaryDirectory()
        _ = FileManager.default.createFile(atPath: dir.file("test.sock"), contents: Data("precious".utf8))
        let service = try ServiceProcess(
            executable: Binaries.path("screentime-testd"),
            arguments: ["--runtime-dir", dir.path],
            socketPath: dir.file("test.sock"),
            logPath: dir.file("service.log"),
            environment: [:]
        )
        #expect(try await service.waitForExit() != 0)
        #expect(service.log.contains("exists and is not a socket"))
        #expect(try String(contentsOfFile: dir.file("test.sock"), encoding: .utf8) == "precious")
    }

    @Test("READY=1 comes once it serves; on SIGTERM STOPPING=1 comes first, requests in flight complete, streams end with a final reply, exit 0")
    func gracefulShutdown() async throws {
        let dir = TemporaryDirectory()
        let notify = try NotifyListener(path: dir.file("notify"))
        let service = try ServiceProcess(
            executable: Binaries.path("screentime-testd"),
            arguments: ["--runtime-dir", dir.path, "--log-level", "debug"],
            socketPath: dir.file("test.sock"),
            logPath: dir.file("service.log"),
            environment: ["NOTIFY_SOCKET": dir.file("notify")]
        )
        let ready = try notify.waitFor("READY=1")
        #expect(ready.joined().contains("STATUS=Serving on \(dir.file("test.sock"))"))

        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": "slow", "method": "test.sleep", "params": {"milliseconds": 700}}"#)
        connection.sendFrame(#"{"id": "feed", "method": "test.count", "params": {"count": 100000, "intervalMilliseconds": 50}}"#)
        let first = try #require(try connection.readReply())
        #expect(first["continues"] as? Bool == true)

        service.signal(SIGTERM)
        _ = try notify.waitFor("STOPPING=1")

        // Only now are new connections refused.
        try await waitUntil("new connections refused", detail: service.log) { (try? RawConnection(path: service.socketPath)) == nil }

        var slowResult: [String: Any]?
        var feedEnd: [String: Any]?
        while slowResult == nil || feedEnd == nil {
            let reply = try #require(try connection.readReply(), "connection closed before every request ended")
            if reply["id"] as? String == "slow" { slowResult = reply }
            if reply["id"] as? String == "feed", reply["continues"] == nil { feedEnd = reply }
        }
        #expect(slowResult?.result?["milliseconds"] as? Int == 700)
        #expect(feedEnd?.errorCode == "unavailable")
        #expect(try connection.isClosedByPeer())
        #expect(try await service.waitForExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: dir.file("test.sock")))
        #expect(service.log.contains("stopped"))
    }

    @Test("with WATCHDOG_USEC set it sends WATCHDOG=1 at half the interval and keeps STATUS= current")
    func watchdogKeepAlives() async throws {
        let dir = TemporaryDirectory()
        let notify = try NotifyListener(path: dir.file("notify"))
        let service = try ServiceProcess(
            executable: Binaries.path("screentime-testd"),
            arguments: ["--runtime-dir", dir.path],
            socketPath: dir.file("test.sock"),
            logPath: dir.file("service.log"),
            environment: ["NOTIFY_SOCKET": dir.file("notify"), "WATCHDOG_USEC": "400000"]
        )
        defer { service.stopNow() }
        _ = try notify.waitFor("READY=1")
        _ = try notify.waitFor("WATCHDOG=1", timeout: .seconds(5))
        let more = try notify.waitFor("WATCHDOG=1", timeout: .seconds(5))
        #expect(more.joined().contains("STATUS=Serving: 0 connections, 0 requests served"))
    }

    @Test("requests that outlive --shutdown-timeout are cancelled and the service still exits 0")
    func shutdownTimeoutBoundsTheDrain() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--shutdown-timeout", "0.3", "--log-level", "debug"])
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": 1, "method": "test.sleep", "params": {"milliseconds": 60000}}"#)
        try await waitUntil("the request running", detail: service.log) { service.log.contains("sleeping") }
        let started = ContinuousClock.now
        service.signal(SIGTERM)
        // (Waited for on a thread of its own: the clock must not run while other tests hold
        // the pool.)
        let code = try await offThePool { try connection.readReply()?.errorCode }
        #expect(code == "unavailable")
        #expect(try await service.waitForExit() == 0)
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test("at --shutdown-timeout a connection whose peer does not read its replies is closed: the stop does not wait for it")
    func stopDoesNotWaitForAPeerThatDoesNotRead() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--shutdown-timeout", "0.3"])
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        // A reply larger than the socket holds, never read: its end waits in the service.
        connection.sendFrame(#"{"id": 1, "method": "test.fail", "params": {"code": "conflict", "message": "unread", "padding": 1000000}}"#)
        try await waitUntil("the request ends", detail: service.log) { service.log.contains("request failed") }
        service.signal(SIGTERM)
        #expect(try await service.waitForExit() == 0)
        #expect(!service.log.contains("Graceful shutdown took longer"), "the stop waited past --shutdown-timeout for the unread reply")
        connection.close()
    }

    @Test("a request half-received when the stop comes is not run and gets no reply (it is not the client's fault); the connection closes, exit 0")
    func stopMidFrame() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let connection = try RawConnection(path: service.socketPath)
        connection.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        #expect(try connection.readReply()?.result != nil)
        connection.sendRaw([0, 0, 0, 200] + Array(#"{"id": 2, "method": "test.echo", "params": {"#.utf8))
        try await Task.sleep(for: .milliseconds(200))
        service.signal(SIGTERM)
        #expect(try connection.readReply() == nil, "no invalid_frame: the service stopped reading, the client did not cut the frame")
        #expect(try await service.waitForExit() == 0)
    }

    @Test("stopped while clients keep connecting, it exits 0 every time (a connection accepted as the listener closes is closed, not a crash)")
    func stopWhileClientsConnect() async throws {
        for round in 1...6 {
            let dir = TemporaryDirectory()
            let service = try await ServiceProcess.startByHand(in: dir)
            defer { service.stopNow() }
            // (Threads of their own: blocking sockets would hold the test's task threads.)
            let hammering = Mutex(true)
            let running = Mutex(6)
            let answered = Mutex(0)
            let socket = service.socketPath
            for _ in 0..<6 {
                Thread.detachNewThread {
                    while hammering.withLock({ $0 }) {
                        guard let connection = try? RawConnection(path: socket) else { continue }
                        connection.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
                        if (try? connection.readReply()) != nil { answered.withLock { $0 += 1 } }
                    }
                    running.withLock { $0 -= 1 }
                }
            }
            // The stop comes while every thread is connecting over and over.
            try await waitUntil("a hundred pings answered", detail: service.log) { answered.withLock { $0 } >= 100 }
            service.signal(SIGTERM)
            let status = try await service.waitForExit()
            hammering.withLock { $0 = false }
            try await waitUntil("the clients' threads ending") { running.withLock { $0 } == 0 }
            #expect(status == 0, "round \(round): exit \(status)\n\(service.log.suffix(600))")
        }
    }

    @Test("with --idle-exit it exits when idle, and the next connection, queued meanwhile, is served by the next activation")
    func idleExitThenReactivation() async throws {
        let dir = TemporaryDirectory()
        let activator = try Activator(path: dir.file("test.sock"))
        let binary = Binaries.path("screentime-testd")
        let arguments = ["--runtime-dir", dir.path, "--idle-exit", "0.5", "--log-level", "debug"]

        // The first client is queued before the service runs, as when systemd starts it.
        let first = try RawConnection(path: activator.path)
        first.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        let firstPID = try activator.spawn(binary, arguments, log: dir.file("first.log"))
        let firstReply = try #require(try first.readReply())
        #expect(firstReply.result?["pid"] as? Int == Int(firstPID))
        first.close()

        #expect(try await activator.waitForExit(firstPID, timeout: .seconds(10)) == 0)
        let firstLog = try String(contentsOfFile: dir.file("first.log"), encoding: .utf8)
        #expect(firstLog.contains("idle; exiting until the next connection"))

        // Nobody serves now; a client connects anyway (the kernel queues it) and sends.
        let waiting = try RawConnection(path: activator.path)
        waiting.sendFrame(#"{"id": 1, "method": "rpc.ping"}"#)
        #expect(activator.hasPendingConnection(timeout: .seconds(2)))
        let secondPID = try activator.spawn(binary, arguments, log: dir.file("second.log"))
        let reply = try #require(try waiting.readReply())
        #expect(reply.result?["pid"] as? Int == Int(secondPID))
        waiting.close()
        #expect(try await activator.waitForExit(secondPID, timeout: .seconds(10)) == 0)
    }

    @Test("--idle-exit is ignored (with a warning) when the service bound its own socket")
    func idleExitNeedsActivation() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--idle-exit", "0.2"])
        defer { service.stopNow() }
        try await Task.sleep(for: .milliseconds(600))
        #expect(service.isRunning)
        #expect(service.log.contains("--idle-exit applies only under socket activation"))
    }

    @Test("bad options are refused before anything starts", arguments: [
        ["--socket-mode", "rw"], ["--max-frame-size", "1"], ["--max-connections", "0"], ["--log-level", "loud"],
    ])
    func badOptions(arguments: [String]) async throws {
        let dir = TemporaryDirectory()
        let run = try await runCommand(Binaries.path("screentime-testd"), ["--runtime-dir", dir.path] + arguments)
        #expect(run.status == 64)
        #expect(run.stderr.contains("Error:"))
        #expect(!FileManager.default.fileExists(atPath: dir.file("test.sock")))
    }
}
