import ArgumentParser
import Foundation
import Glibc

/// `screentimectl gateway announce`: the server announced on the home network (Avahi's
/// service file), on the port the gateway's socket listens on. The socket unit runs it each
/// time it starts, so the port is set in one place, the socket (docs/operations.md,
/// "Gateway").
struct GatewayAnnounce: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "announce",
        abstract: "Announce the gateway on the home network (avahi-daemon), on the port its socket listens on.",
        discussion: """
            Writes <avahi-dir>/screentime.service (_screentime._tcp) with the port of \
            screentime-gateway.socket's first ListenStream= (systemctl show), or --port; a file \
            that already says so is left as it is. avahi-daemon sees the file change by itself. \
            The socket unit runs this each time it starts (ExecStartPost=), so the announcement \
            follows a port changed with `systemctl edit screentime-gateway.socket`. Without \
            avahi-daemon (no <avahi-dir>) it does nothing. --remove takes the announcement away.

            Exit status: 0; 69 when the socket's port cannot be read (systemctl); 73 when the file \
            cannot be written or removed.
            """
    )

    @Option(help: ArgumentHelp("The port to announce, instead of the gateway socket's.", valueName: "port"))
    var port: Int?

    @Option(name: .customLong("avahi-dir"), help: ArgumentHelp("Avahi's directory of static services.", valueName: "dir"))
    var avahiDirectory = "/etc/avahi/services"

    @Flag(help: "Remove the announcement.") var remove = false

    func validate() throws {
        if let port = self.port, !(1...65535).contains(port) { throw ValidationError("--port takes a TCP port, 1 to 65535, not \(port)") }
        if self.remove && self.port != nil { throw ValidationError("--remove takes no --port") }
    }

    func run() throws {
        let path = self.avahiDirectory + "/screentime.service"
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: self.avahiDirectory, isDirectory: &isDirectory), isDirectory.boolValue else {
            print("avahi-daemon is not installed (no \(self.avahiDirectory)): the server is not announced on the home network")
            return
        }
        if self.remove {
            if unlink(path) == 0 {
                print("no longer announced: removed \(path)")
            } else if errno == ENOENT {
                print("not announced on the home network (no \(path))")
            } else {
                Output.fail("screentimectl: cannot_write: \(path) cannot be removed: \(String(cString: strerror(errno)))", exitCode: 73)
            }
            return
        }
        let port = self.port ?? Self.socketPort()
        let text = Self.serviceFile(port: port)
        if (try? String(contentsOfFile: path, encoding: .utf8)) == text {
            print("announced on the home network as _screentime._tcp, port \(port) (\(path), unchanged)")
            return
        }
        do {
            try Self.replace(path, in: self.avahiDirectory, with: text)
        } catch {
            Output.fail("screentimectl: cannot_write: \(path) cannot be written: \(error)", exitCode: 73)
        }
        print("announced on the home network as _screentime._tcp, port \(port) (\(path))")
    }

    struct WriteFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// Written to a file of its own beside it (a unique name: the socket's start and an
    /// upgrade may announce at once), made readable by avahi-daemon's user, synced, then
    /// renamed over it: avahi-daemon never reads half a file, and reads only names ending
    /// in .service.
    static func replace(_ path: String, in directory: String, with text: String) throws {
        var template = Array((directory + "/.screentime.service.XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw WriteFailure(description: "cannot create a file in \(directory): \(String(cString: strerror(errno)))") }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var failure: String?
        let bytes = Array(text.utf8)
        if fchmod(fd, 0o644) != 0 {
            failure = "cannot make it readable: \(String(cString: strerror(errno)))"
        } else if bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) != bytes.count {
            failure = "cannot write it: \(String(cString: strerror(errno)))"
        } else if fsync(fd) != 0 {
            failure = "cannot sync it: \(String(cString: strerror(errno)))"
        }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 {
            failure = "cannot put it in place: \(String(cString: strerror(errno)))"
        }
        if let failure {
            unlink(temporary)
            throw WriteFailure(description: failure)
        }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// The port of the gateway socket's first stream, as systemd listens on it:
    /// `systemctl show -P Listen` says `[::]:8443 (Stream)`, `192.168.1.20:443 (Stream)`.
    static func socketPort() -> Int {
        let shown: (outcome: SystemCommand.Outcome, output: String)
        do {
            shown = try SystemCommand.capture("/usr/bin/systemctl", ["show", "-P", "Listen", "screentime-gateway.socket"])
        } catch {
            Output.fail("screentimectl: unavailable: cannot run /usr/bin/systemctl: \(error)", exitCode: 69)
        }
        guard shown.outcome.status == 0 else {
            Output.fail("screentimectl: unavailable: systemctl show screentime-gateway.socket failed: \(shown.outcome.firstError)", exitCode: 69)
        }
        guard let port = Self.port(inListen: shown.output) else {
            Output.fail("screentimectl: unavailable: screentime-gateway.socket listens on no TCP port (\(shown.output.trimmingCharacters(in: .whitespacesAndNewlines))); pass --port", exitCode: 69)
        }
        return port
    }

    /// The first stream's port in `systemctl show -P Listen`'s lines.
    static func port(inListen text: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasSuffix(" (Stream)") {
            let address = line.dropLast(" (Stream)".count)
            guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (1...65535).contains(port) else { continue }
            return port
        }
        return nil
    }

    static func serviceFile(port: Int) -> String {
        """
        <?xml version="1.0" standalone='no'?>
        <!DOCTYPE service-group SYSTEM "avahi-service.dtd">
        <!-- Announces the ScreenTime Rewards gateway on the home network, so the app finds the
             server without typing an address (it still pins the server's key from the pairing
             QR code). Written by `screentimectl gateway announce` each time the gateway's
             socket starts, with the port it listens on: change the port with
             `systemctl edit screentime-gateway.socket`, not here. -->
        <service-group>
          <name replace-wildcards="yes">ScreenTime Rewards on %h</name>
          <service>
            <type>_screentime._tcp</type>
            <port>\(port)</port>
            <txt-record>protocol=1</txt-record>
          </service>
        </service-group>

        """
    }
}
