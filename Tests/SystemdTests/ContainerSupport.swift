import Foundation
import RPCClient
import SystemdContainer
import TestSupport

/// What the system tests do in a container: install this checkout's build, talk to a service.
extension Container {
    /// A client of a service's socket inside the container, from the host.
    func client(_ service: String, timeout: Duration = .seconds(30)) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(socketPath: self.hostPath("/run/screentime/\(service).sock"), callTimeout: timeout, connectTimeout: .seconds(10)))
    }

    /// Installs with the project's own install script, from this checkout's debug build.
    func install(_ extra: String...) async throws {
        let binaries = try await self.reach(Self.binaries, entries: ["screentime-stored", "screentime-pairingd", "screentime-pushd", "screentime-aggregatord", "screentime-gatewayd", "screentimectl"])
        let installed = try await self.run(["\(try await self.checkout())/deploy/install.sh", "--bin-dir", binaries] + extra)
        guard installed.status == 0 else { throw TestFailure("install.sh failed (\(installed.status)): \(installed.stdout)\(installed.stderr)") }
    }

    /// This checkout's deploy scripts (and the files they install) as the container reaches them.
    func checkout() async throws -> String {
        try await self.reach(Self.checkout, entries: ["deploy", "docs", "systemd"])
    }

    static let checkout = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static var binaries: String { (Binaries.path("screentime-stored") as NSString).deletingLastPathComponent }
}
