import TestSupport
import Foundation
import Glibc
import Testing

private let journalSocket = "/run/systemd/journal/socket"

/// Whether a journald answers on its socket (a stale socket file refuses the connection).
private func journaldIsRunning() -> Bool {
    let fd = makeUnixSocket(SOCK_DGRAM)
    defer { close(fd) }
    return withUnixAddress(journalSocket) { connect(fd, $0, $1) } == 0
}

/// Whether a journald can be reached, or started here (root, and Debian's binary present).
private let journalReachable: Bool = journaldIsRunning()
    || (getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/lib/systemd/systemd-journald"))

@Suite("Logging to the journal")
struct JournalTests {
    @Test(
        "entries reach the journal natively, with MESSAGE_ID, code location and metadata as fields",
        .enabled(if: journalReachable, "NO JOURNAL HERE: needs a running journald, or root to start /lib/systemd/systemd-journald; the journal read-back is NOT tested on this machine")
    )
    func readBack() async throws {
        var journald: pid_t?
        if !journaldIsRunning() {
            // No systemd here: run Debian's journald on its own; it creates the socket.
            journald = try Spawn(executable: "/lib/systemd/systemd-journald", arguments: []).start()
            for _ in 0..<250 where !journaldIsRunning() {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        defer {
            if let journald {
                kill(journald, SIGTERM)
                var status: Int32 = 0
                waitpid(journald, &status, 0)
            }
        }

        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir, arguments: ["--log-target", "journal"])
        defer { service.stopNow() }
        let marker = "journal-test-\(UUID().uuidString)"
        let run = try await runCommand(Binaries.path("screentimectl"), ["call", service.socketPath, "test.log",
            #"{"message": "\#(marker)", "fields": {"familyId": "f-1", "peer.count": "3", "9lives": "yes"}}"#])
        #expect(run.status == 0)

        var entry: [String: Any]?
        for _ in 0..<50 where entry == nil {
            let read = try await runCommand("/usr/bin/journalctl", ["--no-pager", "-o", "json", "_PID=\(service.pid)", "MESSAGE=\(marker)"])
            if let line = read.stdout.split(separator: "\n").last {
                entry = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            }
            if entry == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let fields = try #require(entry, "the entry did not show up in journalctl")
        #expect(fields["PRIORITY"] as? String == "5")
        #expect(fields["SYSLOG_IDENTIFIER"] as? String == "screentime-testd")
        #expect(fields["FAMILY_ID"] as? String == "f-1")
        #expect(fields["PEER_COUNT"] as? String == "3")
        #expect(fields["F_9LIVES"] as? String == "yes")
        #expect(fields["METHOD"] as? String == "test.log")
        #expect(fields["PEER_UID"] as? String == String(getuid()))
        #expect(fields["CODE_FILE"] != nil)
        #expect(fields["CODE_LINE"] != nil)
        #expect(fields["CODE_FUNC"] != nil)

        let ready = try await runCommand("/usr/bin/journalctl", ["--no-pager", "-o", "json", "_PID=\(service.pid)", "MESSAGE_ID=7995a2ddace94f9cbe62cd7e4bd3a714"])
        #expect(ready.stdout.contains("\"MESSAGE\":\"ready\""))
    }
}
