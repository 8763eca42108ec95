import Foundation
import SystemdContainer
import Testing
import TestSupport

/// The deploy scripts' refusals, which need no container.
@Suite("deploy/*.sh: bad options get a clear error")
struct DeployScriptTests {
    @Test("an unknown option is refused with the usage, before anything is touched", arguments: ["install.sh", "uninstall.sh", "build-deb.sh"])
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
}
