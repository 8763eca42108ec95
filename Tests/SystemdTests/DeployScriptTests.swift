import Foundation
import ServerVersion
import SystemdContainer
import Testing
import TestSupport

/// The deploy scripts' refusals, which need no container.
@Suite("deploy/*.sh: bad options get a clear error")
struct DeployScriptTests {
    @Test("an unknown option is refused with the usage, before anything is touched", arguments: ["install.sh", "uninstall.sh", "build-deb.sh", "build-release.sh"])
    func unknownOption(script: String) async throws {
        let result = try await runCommand("\(Container.checkout)/deploy/\(script)", ["--frobnicate"])
        #expect(result.status == 64 && result.stderr.contains("unknown option --frobnicate"), "\(result)")
    }

    @Test("install.sh --bin-dir without the binaries says which is missing")
    func missingBinaries() async throws {
        let empty = TemporaryDirectory()
        let result = try await runCommand("\(Container.checkout)/deploy/install.sh", ["--bin-dir", empty.path])
        if getuid() == 0 {
            #expect(result.status == 66 && result.stderr.contains("screentime-stored is missing"), "\(result)")
        } else {
            #expect(result.status == 77 && result.stderr.contains("run it as root"), "\(result)")
        }
    }

    @Test("the version is in one place: deploy/debian/changelog's newest entry is ServerVersion.current, and every binary reports it")
    func version() async throws {
        let changelog = try String(contentsOfFile: Container.checkout + "/deploy/debian/changelog", encoding: .utf8)
        let first = changelog.split(separator: "\n").first.map(String.init) ?? ""
        let version = first.split(separator: "(").dropFirst().first?.split(separator: ")").first.map(String.init)
        #expect(version == ServerVersion.current, "the changelog says \(first); Sources/ServerVersion says \(ServerVersion.current)")
        for binary in ["screentimectl"] + Deployment.services.map(\.binary) {
            let reported = try await runCommand(Binaries.path(binary), ["--version"])
            #expect(reported.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == ServerVersion.current, "\(binary) --version: \(reported)")
        }
        // SystemdTests knows the Unix-socket services; the gateway has its own suite (GatewaySystemdTests).
        #expect(Deployment.services.map(\.name) == SystemdTests.services + ["gateway"], "deploy/services lists the services the system tests know")
    }
}
