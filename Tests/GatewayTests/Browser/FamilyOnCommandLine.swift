import Foundation
import StackSupport
import Testing
import TestSupport

/// A family made as its parents make it, with `screentimectl`: Mum's phone, Emma's tablet
/// paired and confirmed; Dad signs in to the dashboard with an admin code from Mum.
struct FamilyOnCommandLine {
    let stack: GatewayStack
    let profiles: String

    static func make(_ stack: GatewayStack) async throws -> FamilyOnCommandLine {
        let family = FamilyOnCommandLine(stack: stack, profiles: stack.harness.directory.file("profiles"))
        let created = try await family.must(["family", "create", "smith", "--time-zone", "Europe/Paris"])
        let adminCode = try #require(created.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.contains(".") && !$0.contains(" ") && !$0.hasPrefix("https://") })
        _ = try await family.must(["parent", "enroll", "--profile", "mum", "--family", "smith", "--code", adminCode, "--display-name", "Mum"])
        let invited = try await family.must(["child", "invite", "--profile", "mum", "emma", "--child-name", "Emma", "--no-wait", "--no-qr"])
        let uri = try #require(invited.range(of: #"screentime://[^' \n]+"#, options: .regularExpression).map { String(invited[$0]) })
        let invitation = try #require(invited.range(of: #"Invitation [0-9a-f]+"#, options: .regularExpression).map { String(invited[$0].dropFirst("Invitation ".count)) })
        _ = try await family.must(["child", "accept", "--profile", "emma-tablet", "--device-name", "Emma's tablet", uri])
        _ = try await family.must(["child", "confirm", "--profile", "mum", invitation])
        return family
    }

    /// Runs `screentimectl` as the family's devices; its output, or a failure saying why.
    @discardableResult
    func must(_ arguments: [String]) async throws -> String {
        let result = try await runCommand(Binaries.path("screentimectl"), arguments + ["--runtime-dir", self.stack.harness.directory.path],
                                          environment: ["SCREENTIME_PROFILES_DIR": self.profiles])
        guard result.status == 0 else { throw TestFailure("screentimectl \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)\(result.stdout)") }
        return result.stdout
    }

    func signInDad(_ browser: Browser) async throws {
        let invite = try await self.must(["parent", "invite", "--profile", "mum", "--role", "admin"])
        let link = try #require(invite.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("https://") && $0.contains("/signin?") })
        try await browser.go(link)
        try await browser.type("#deviceName", "Laptop")
        try await browser.type("#displayName", "Dad")
        try await browser.click("#signin")
        try await browser.waitFor("the overview", "h1") { $0 == "Overview" }
    }
}
