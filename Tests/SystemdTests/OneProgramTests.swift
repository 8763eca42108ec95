import Foundation
import ServerVersion
import SystemdContainer
import Testing
import TestSupport

/// `screentime`, the one program the package ships: each name it answers to runs exactly the
/// command of that name's own program, whether it is the link's name or the first argument.
@Suite("screentime: one program, six names")
struct OneProgramTests {
    static let names = ["screentimectl"] + Deployment.services.map(\.binary)

    /// A directory with each name as a link to the one program, as the package installs them.
    static func linked() throws -> TemporaryDirectory {
        let directory = TemporaryDirectory()
        for name in Self.names {
            try FileManager.default.createSymbolicLink(atPath: directory.file(name), withDestinationPath: Binaries.path("screentime"))
        }
        return directory
    }

    @Test("run by a link's name, it is that program: the same --help, the same help dump (the manual page's source), the same --version", arguments: Self.names)
    func answersToItsName(name: String) async throws {
        let links = try Self.linked()
        let own = try FileManager.default.attributesOfItem(atPath: Binaries.path(name))[.type] as? FileAttributeType
        #expect(own == .typeRegular, "\(Binaries.path(name)) is a program of its own, not a link to screentime: else this compares the program with itself")
        for arguments in [["--help"], ["--experimental-dump-help"], ["--version"]] {
            let own = try await runCommand(Binaries.path(name), arguments)
            let linked = try await runCommand(links.file(name), arguments)
            let named = try await runCommand(Binaries.path("screentime"), [name] + arguments)
            #expect(own.status == 0 && !own.stdout.isEmpty, "\(name) \(arguments): \(own)")
            #expect(linked.stdout == own.stdout && linked.status == own.status, "\(name) as a link, \(arguments): \(linked.stdout.prefix(300))")
            #expect(named.stdout == own.stdout && named.status == own.status, "screentime \(name) \(arguments): \(named.stdout.prefix(300))")
        }
    }

    @Test("a link runs the command, not only its parser: screentimectl gateway announce writes its file, as its own program does")
    func runsTheCommand() async throws {
        let links = try Self.linked()
        for screentimectl in [Binaries.path("screentimectl"), links.file("screentimectl")] {
            let avahi = TemporaryDirectory()
            let ran = try await runCommand(screentimectl, ["gateway", "announce", "--avahi-dir", avahi.path, "--port", "8443"])
            let written = (try? String(contentsOfFile: avahi.file("screentime.service"), encoding: .utf8)) ?? ""
            #expect(ran.status == 0 && written.contains("<port>8443</port>"), "\(screentimectl): \(ran)")
        }
    }

    @Test("screentime alone lists its names; --help and --version answer; an unknown name is refused with the list")
    func onItsOwn() async throws {
        let help = try await runCommand(Binaries.path("screentime"), ["--help"])
        #expect(help.status == 0, "\(help)")
        for name in Self.names {
            #expect(help.stdout.contains("  \(name) "), "--help lists \(name): \(help.stdout)")
        }
        let version = try await runCommand(Binaries.path("screentime"), ["--version"])
        #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == ServerVersion.current)
        let bare = try await runCommand(Binaries.path("screentime"), [])
        #expect(bare.status == 64 && bare.stderr.contains("Usage: screentime NAME"), "\(bare)")
        let unknown = try await runCommand(Binaries.path("screentime"), ["screentime-nope", "--help"])
        #expect(unknown.status == 64 && unknown.stderr.contains("screentime-nope is not one of its programs") && unknown.stderr.contains("screentime-stored"), "\(unknown)")
    }
}
