import Foundation
import SystemdContainer
import Testing
import TestSupport

/// `screentimectl gateway announce`, the Avahi file the gateway's socket writes when it
/// starts (the port from the socket is tested under systemd, in DebianPackageTests).
@Suite("screentimectl gateway announce: the home network's announcement on the gateway's port")
struct AnnounceTests {
    func announce(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runCommand(Binaries.path("screentimectl"), ["gateway", "announce"] + arguments)
    }

    @Test("it writes the service file with the port, leaves it alone when it already says so, rewrites it for another port, and --remove takes it away")
    func writesAndRemoves() async throws {
        let avahi = TemporaryDirectory()
        let file = avahi.file("screentime.service")
        let first = try await self.announce(["--avahi-dir", avahi.path, "--port", "8443"])
        #expect(first.status == 0 && first.stdout.contains("port 8443"), "\(first)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains("<type>_screentime._tcp</type>") && text.contains("<port>8443</port>") && text.contains("systemctl edit screentime-gateway.socket"), "\(text)")
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o644, "avahi-daemon reads it: \(String(mode ?? 0, radix: 8))")
        let again = try await self.announce(["--avahi-dir", avahi.path, "--port", "8443"])
        #expect(again.status == 0 && again.stdout.contains("unchanged"), "\(again)")
        let moved = try await self.announce(["--avahi-dir", avahi.path, "--port", "443"])
        let rewritten = try String(contentsOfFile: file, encoding: .utf8)
        #expect(moved.status == 0 && rewritten.contains("<port>443</port>"), "\(moved)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: avahi.path) == ["screentime.service"], "no temporary file left")
        let removed = try await self.announce(["--avahi-dir", avahi.path, "--remove"])
        #expect(removed.status == 0 && !FileManager.default.fileExists(atPath: file), "\(removed)")
        let absent = try await self.announce(["--avahi-dir", avahi.path, "--remove"])
        #expect(absent.status == 0 && absent.stdout.contains("not announced on the home network"), "removing what is not there: \(absent)")
    }

    @Test("without avahi-daemon's directory it does nothing, and says so")
    func withoutAvahi() async throws {
        let nowhere = TemporaryDirectory()
        let result = try await self.announce(["--avahi-dir", nowhere.file("avahi/services"), "--port", "8443"])
        #expect(result.status == 0 && result.stdout.contains("avahi-daemon is not installed"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: nowhere.file("avahi")))
    }

    @Test("bad input: a port out of range or not a number, --remove with a port: each a clear error, nothing written", arguments: [
        (["--port", "0"], Int32(64), "--port takes a TCP port"),
        (["--port", "70000"], Int32(64), "--port takes a TCP port"),
        (["--port", "eighty"], Int32(64), "--port"),
        (["--remove", "--port", "8443"], Int32(64), "--remove takes no --port"),
    ])
    func badInput(arguments: [String], status: Int32, says: String) async throws {
        let avahi = TemporaryDirectory()
        let result = try await self.announce(["--avahi-dir", avahi.path] + arguments)
        #expect(result.status == status && result.stderr.contains(says), "\(result)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: avahi.path).isEmpty)
    }

    @Test("where the service file cannot be replaced or removed (a directory in its place): 73 and why; nothing left behind")
    func cannotWrite() async throws {
        let avahi = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: avahi.file("screentime.service/inside"), withIntermediateDirectories: true)
        let result = try await self.announce(["--avahi-dir", avahi.path, "--port", "8443"])
        #expect(result.status == 73 && result.stderr.contains("cannot_write"), "\(result)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: avahi.path) == ["screentime.service"])
        let removal = try await self.announce(["--avahi-dir", avahi.path, "--remove"])
        #expect(removal.status == 73 && removal.stderr.contains("cannot be removed"), "\(removal)")
    }
}
