import Foundation
import Glibc
import ServerVersion
import SystemdContainer
import Testing
import TestSupport

extension DebianPackageTests {
    static let day = "2026-11-20"

    @Test("disaster recovery: the nightly backup's copy restores a server whose disk died, installed afresh: the same pin, the child's credential accepted, the parent's day intact, /healthz up, the timer back")
    func disasterRecovery() async throws {
        try Self.bootable()
        let packages = try await PackageBuild.shared.value
        try await Container.with { container in
            let debs = try container.handOver(packages)
            try await container.dpkg("-i", debs.current)
            let family = FamilyOnHost(container)

            // A family with some history: a parent, a child's tablet, a rule, half an hour of learning.
            try await family.pairParentAndChild()
            #expect(try await family.ctl("apps", "set", "--profile", "mum", "org.khan", "--category", "learning", "--points-per-minute", "2").status == 0)
            #expect(try await family.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--category", "learning", "--minutes", "30", "--start", "\(Self.day)T12:00:00Z").status == 0)
            try await family.waitForSummary("30m")
            let pin = try await Self.pin(in: container)

            // The timer's service, as it runs at night, with a copy to the NAS.
            _ = try await container.run("mkdir", "-p", "/srv/nas")
            try await container.write("OPTIONS=\"--copy-to /srv/nas\"\n", to: "/etc/screentime/backup.env")
            let nightly = try await container.run(["timeout", "240", "systemctl", "start", "screentime-backup.service"], timeout: .seconds(300))
            let journal = try await container.run("journalctl", "-u", "screentime-backup.service", "-o", "cat", "--no-pager").stdout
            guard nightly.status == 0 && journal.contains("Copied to /srv/nas/screentime-") && journal.contains("and checked there") else {
                Issue.record("the nightly backup: \(nightly)\n\(journal)\n\(try await Self.journal(container))")
                return
            }
            let archive = try #require(try FileManager.default.contentsOfDirectory(atPath: container.hostPath("/srv/nas")).first { $0.hasSuffix(".tar") })

            // The disk dies: the data and the configuration are gone; the server is installed afresh (a new key).
            _ = try await container.shell("systemctl stop screentime.target 'screentime-*.socket' 'screentime-*.service'")
            try await container.dpkg("--purge", "screentime-server")
            _ = try await container.run("rm", "-rf", "/var/lib/screentime", "/etc/screentime")
            try await container.dpkg("-i", debs.current)
            #expect(try await Self.pin(in: container) != pin, "a fresh install has a key of its own")

            let restored = try await container.run(["timeout", "240", "screentimectl", "restore", "/srv/nas/" + archive], timeout: .seconds(300))
            guard restored.status == 0 && restored.stdout.contains("Restored the server from /srv/nas/\(archive)") && restored.stdout.contains("Every service answers") else {
                Issue.record("the restore: \(restored)\n\(try await Self.journal(container))")
                return
            }
            try await Self.checkGateway(in: container, port: 8443, version: ServerVersion.current)
            #expect(try await Self.pin(in: container) == pin, "the same key: every device's pin still holds")
            #expect(try await container.read("/etc/screentime/backup.env").contains("/srv/nas"), "the configuration is back")
            #expect(try await container.property("ActiveState", of: "screentime-backup.timer") == "active", "the nightly backups go on")
            for file in ["store.sqlite", "push.sqlite", "aggregator.sqlite"] {
                let owner = try await container.run("stat", "-c", "%U", "/var/lib/screentime/" + file).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                #expect(owner == "screentime", "\(file) belongs to the services' user")
            }

            // The family notices nothing: the parent's day as it was, the tablet still paired.
            try await family.waitForSummary("30m")
            #expect(try await family.ctl("usage", "add", "--profile", "emma-tablet", "org.khan", "--category", "learning", "--minutes", "10", "--start", "\(Self.day)T14:00:00Z").status == 0)
            try await family.waitForSummary("40m")
        }
    }

    /// The last of the container's journal, and the jobs systemd is waiting on.
    static func journal(_ container: Container) async throws -> String {
        let jobs = try await container.run("systemctl", "list-jobs", "--no-pager").stdout
        let journal = try await container.run("journalctl", "--no-pager", "-n", "150", "-o", "short-precise").stdout
        return "jobs:\n\(jobs)\njournal:\n\(journal)"
    }

    static func pin(in container: Container) async throws -> String? {
        try await container.waitUntil("the gateway's endpoint") { try await container.run("test", "-s", "/var/lib/screentime/gateway/endpoint.json").status == 0 }
        let endpoint = try await container.read("/var/lib/screentime/gateway/endpoint.json")
        return (try? JSONSerialization.jsonObject(with: Data(endpoint.utf8)) as? [String: Any])?["pin"] as? String
    }
}

/// A family's devices played by `screentimectl` on the host, on the container's sockets.
struct FamilyOnHost {
    let container: Container
    let profiles = TemporaryDirectory()

    init(_ container: Container) { self.container = container }

    var environment: [String: String] {
        ["SCREENTIME_RUNTIME_DIR": self.container.hostPath("/run/screentime"), "SCREENTIME_PROFILES_DIR": self.profiles.path, "SCREENTIME_PROFILE": ""]
    }

    func ctl(_ arguments: String...) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runCommand(Binaries.path("screentimectl"), arguments, environment: self.environment, timeout: .seconds(60))
    }

    /// The family smith, its parent `mum`, and Emma's tablet `emma-tablet`, confirmed.
    func pairParentAndChild() async throws {
        let created = try await self.ctl("family", "create", "smith", "--time-zone", "UTC")
        let code = try #require(created.stdout.split(separator: "\n").dropFirst().first?.trimmingCharacters(in: .whitespaces), "\(created)")
        let enrolled = try await self.ctl("parent", "enroll", "--profile", "mum", "--family", "smith", "--code", code)
        #expect(enrolled.status == 0, "\(enrolled)")
        let output = self.profiles.file("invite.txt")
        let inviter = try Spawn(executable: Binaries.path("screentimectl"), arguments: ["child", "invite", "--profile", "mum", "emma", "--child-name", "Emma", "--wait", "60"],
                                environment: ProcessInfo.processInfo.environment.merging(self.environment) { _, new in new }, stdout: output, stderr: output).start()
        defer { kill(inviter, SIGKILL); _ = ChildExit.poll(inviter) }
        let read = { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
        try await waitUntil("the invitation is shown", timeout: .seconds(30), detail: read()) { read().contains("screentime://") }
        let text = read()
        let link = try #require(text.range(of: #"screentime://[^' \n]+"#, options: .regularExpression).map { String(text[$0]) })
        let invitation = try #require(text.range(of: #"Invitation [0-9a-f]+"#, options: .regularExpression).map { String(text[$0].dropFirst("Invitation ".count)) })
        let accepted = try await self.ctl("child", "accept", "--profile", "emma-tablet", link)
        #expect(accepted.status == 0, "\(accepted)")
        #expect(try await ChildExit.wait(inviter, timeout: .seconds(30)) == 0)
        let confirmed = try await self.ctl("child", "confirm", "--profile", "mum", invitation)
        #expect(confirmed.status == 0, "\(confirmed)")
    }

    /// Until the parent's summary of the day shows `text`.
    func waitForSummary(_ text: String) async throws {
        var last = ""
        do {
            try await self.container.waitUntil("the parent's summary shows \(text)") {
                let summary = try await self.ctl("summary", "--profile", "mum", "--child", "emma", "--day", DebianPackageTests.day)
                last = summary.stdout + summary.stderr
                return summary.status == 0 && summary.stdout.contains(text)
            }
        } catch {
            Issue.record("\(error); last:\n\(last)")
        }
    }
}
