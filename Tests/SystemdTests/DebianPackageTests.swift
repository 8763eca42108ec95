import Foundation
import RPCClient
import RPCCore
import ServerVersion
import StoreAPI
import SystemdContainer
import Testing
import TestSupport

/// The Debian package, built by deploy/build-deb.sh (dpkg-buildpackage) from the binaries
/// that ship (deploy/build-release.sh, built once for the test run: .ci/run sets
/// SCREENTIME_RELEASE_BIN_DIR), checked by lintian, then installed, upgraded, removed and
/// purged under a real systemd. Without those binaries (a developer's plain `swift test`)
/// the suite is skipped, its reason in capitals in the test output; with them (CI), a
/// container that cannot boot fails the tests that need it rather than skipping them.
@Suite("The Debian package: lintian-clean; installs, upgrades (over itself and over 0.7), removes and purges under a real systemd",
       .serialized,
       .enabled(if: PackageBuild.binaries != nil, "PACKAGE TESTS NOT RUN: \(PackageBuild.missingBinaries)"))
struct DebianPackageTests {
    static let services = Deployment.services
    /// The services with a Unix socket (every one but the gateway, which listens on TCP).
    static let local = Deployment.services.filter { $0.name != "gateway" }
    /// Where `systemctl edit screentime-gateway.socket` puts the administrator's port.
    static let gatewayOverride = "/etc/systemd/system/screentime-gateway.socket.d/override.conf"
    /// The gateway's port drop-in as builds before the socket's own port shipped it (then a
    /// conffile in /etc).
    static let earlierPortDropIn = "# /etc/systemd/system/screentime-gateway.socket.d/port.conf\n# The gateway's port (and, if you like, address): edit ListenStream= below, then\n#   systemctl daemon-reload && systemctl restart screentime-gateway.socket screentime-gateway.service\n# The gateway learns the port from the socket and puts it in the URLs that pairing codes\n# carry. With avahi-daemon, change <port> in /etc/avahi/services/screentime.service too.\n# Installed by the Debian package (a conffile: your edit survives upgrades) and by\n# deploy/install.sh (kept when it is already there).\n[Socket]\n# The empty line clears the unit's own ListenStream=8443; then the one to listen on\n# (\"443\", or \"192.168.1.20:443\" for one address only).\nListenStream=\nListenStream=8443\n"
    /// The announcement on the home network that the gateway's socket writes.
    static let avahiFile = "/etc/avahi/services/screentime.service"

    /// The package tests were asked for (the shipped binaries are there): a container that
    /// cannot boot is a failure, never a silent pass.
    static func bootable() throws {
        if let reason = Container.unavailable {
            throw TestFailure("PACKAGE TESTS CANNOT RUN: no systemd container (\(reason)); they need root, systemd-nspawn and an overlay of /")
        }
    }

    @Test("lintian --pedantic finds nothing, not even information, in the binary, -dbgsym and source packages but what the override files name with a reason; one stripped program and its names as links, at most 100 MB installed; Depends from shlibdeps (no zlib1g), a real maintainer, an Apache-2.0 copyright, conffiles only in /etc/screentime, manual pages")
    func lintian() async throws {
        let packages = try await PackageBuild.shared.value
        let lintian = try await runCommand("/usr/bin/lintian", ["--pedantic", "--display-info", packages.current.deb, packages.current.dbgsym, packages.current.dsc], timeout: .seconds(900))
        let complaints = lintian.stdout.split(separator: "\n").filter { ["E: ", "W: ", "I: ", "P: "].contains(where: $0.hasPrefix) }
        #expect(complaints.isEmpty, "lintian:\n\(lintian.stdout)\(lintian.stderr)")
        #expect(lintian.status == 0, "lintian exited \(lintian.status): \(lintian.stderr)")
        // Every override says why: each paragraph of overrides starts with its reason.
        for overrides in ["screentime-server.lintian-overrides", "source/lintian-overrides"] {
            let text = try String(contentsOfFile: Container.checkout + "/deploy/debian/" + overrides, encoding: .utf8)
            for paragraph in text.components(separatedBy: "\n\n") where paragraph.contains(where: { !$0.isWhitespace }) {
                #expect(paragraph.hasPrefix("#"), "\(overrides): no reason written above\n\(paragraph)")
            }
        }

        let fields = try await runCommand("/usr/bin/dpkg-deb", ["--field", packages.current.deb, "Version", "Maintainer", "Depends", "Recommends"]).stdout
        #expect(fields.contains("Version: \(ServerVersion.current)\n"), "\(fields)")
        #expect(!fields.contains("localhost") && fields.contains("Maintainer: ScreenTime Rewards Server maintainers <"), "\(fields)")
        #expect(fields.contains("libc6 (>=") && fields.contains("libsystemd0") && fields.contains("libsqlite3-0"), "Depends from dh_shlibdeps: \(fields)")
        #expect(fields.contains("Recommends: avahi-daemon"), "\(fields)")
        #expect(!fields.contains("zlib1g"), "nothing in the program uses libz.so.1: \(fields)")
        // One program: a tenth of six statically linked ones (KiB; 100 MB = 97,656 KiB).
        let size = try await runCommand("/usr/bin/dpkg-deb", ["--field", packages.current.deb, "Installed-Size"]).stdout
        let kibibytes = try #require(Int(size.trimmingCharacters(in: .whitespacesAndNewlines)), "Installed-Size: \(size)")
        #expect(kibibytes <= 97_656, "Installed-Size \(kibibytes) KiB is more than 100 MB")

        let contents = try await runCommand("/usr/bin/dpkg-deb", ["--contents", packages.current.deb]).stdout
        var paths = ["./usr/share/doc/screentime-server/copyright", "./usr/share/doc/screentime-server/changelog.gz",
                     "./usr/share/man/man1/screentimectl.1.gz", "./lib/systemd/system/screentime.target",
                     "./usr/lib/sysusers.d/screentime.conf", "./usr/libexec/screentime/screentime",
                     "./usr/bin/screentimectl -> ../libexec/screentime/screentime",
                     "./lib/systemd/system/screentime-backup.service", "./lib/systemd/system/screentime-backup.timer",
                     "./lib/systemd/system/screentime-metrics.socket", "./usr/share/doc/screentime-server/examples/screentime-dashboard.json"]
        for service in Self.services {
            paths += ["./usr/share/man/man8/\(service.binary).8.gz", "./usr/libexec/screentime/\(service.binary) -> screentime",
                      "./lib/systemd/system/screentime-\(service.name).socket", "./lib/systemd/system/screentime-\(service.name).service"]
        }
        for path in paths {
            #expect(contents.contains(" \(path)\n"), "\(path) is in the package")
        }
        #expect(!contents.contains(" ./etc/systemd/") && !contents.contains(" ./etc/avahi/"), "nothing in the administrator's /etc/systemd or Avahi's directory: \(contents)")
        let conffiles = try await runCommand("/usr/bin/dpkg-deb", ["--info", packages.current.deb, "conffiles"]).stdout
        for service in Self.services {
            #expect(conffiles.contains("/etc/screentime/\(service.name).env"), "\(conffiles)")
        }
        #expect(conffiles.contains("/etc/screentime/backup.env"), "the nightly backup's options: \(conffiles)")
        #expect(conffiles.split(separator: "\n").allSatisfy { $0.hasPrefix("/etc/screentime/") }, "conffiles only in /etc/screentime: \(conffiles)")

        // Stripped, and the debug symbols in the -dbgsym package (by build id).
        let unpacked = TemporaryDirectory()
        _ = try await runCommand("/usr/bin/dpkg-deb", ["--extract", packages.current.deb, unpacked.path])
        let sections = try await runCommand("/usr/bin/readelf", ["--section-headers", "--wide", unpacked.path + "/usr/bin/screentimectl"]).stdout
        #expect(!sections.contains(".debug_info") && !sections.contains(".symtab"), "screentimectl is stripped")
        // A free licence, with the licences of what is linked in, zlib's among them.
        let copyright = try String(contentsOfFile: unpacked.path + "/usr/share/doc/screentime-server/copyright", encoding: .utf8)
        #expect(copyright.contains("Files: *\nCopyright: 2026 ScreenTime Rewards Server developers\nLicense: Apache-2.0\n"), "\(copyright.prefix(3000))")
        for license in ["Apache-2.0 with Swift Runtime Library Exception", "Unicode-3.0", "Zlib", "MIT", "BSD-3-clause", "ISC", "OpenSSL", "SSLeay"] {
            #expect(copyright.contains("\nLicense: \(license)\n"), "the copyright file has the \(license) licence")
        }
        #expect(!copyright.contains("not-yet-licensed") && !copyright.contains("all rights are reserved"))
        let debugContents = try await runCommand("/usr/bin/dpkg-deb", ["--contents", packages.current.dbgsym]).stdout
        #expect(debugContents.contains("./usr/lib/debug/.build-id/"), "\(debugContents.prefix(500))")
    }

    @Test("install: the sockets listen and no service runs; the gateway's key and certificate are there (0600) and it answers over pinned TLS; each service answers with the changelog's version; the user exists; man pages render; units verify clean")
    func install() async throws {
        try Self.bootable()
        let packages = try await PackageBuild.shared.value
        try await Container.with { container in
            let debs = try container.handOver(packages)
            // Recommends: avahi-daemon, and the package works without it. The container is an
            // overlay of the host's /, which may have it: it goes, in the container only.
            _ = try await container.shell("dpkg-query -W avahi-daemon >/dev/null 2>&1 && dpkg --purge --force-depends avahi-daemon")
            #expect(try await container.run("dpkg-query", "-W", "-f", "${Status}", "avahi-daemon").stdout != "install ok installed", "the container has no avahi-daemon")
            let installed = try await container.dpkg("-i", debs.current)
            #expect(!installed.contains("static unit") && !installed.contains("not starting it"), "no line that reads like a failure: \(installed)")
            // It says which port it opened, to whom, and how to turn the server off.
            #expect(installed.contains("listens on TCP port 8443 on every interface, for devices on the home network only")
                    && installed.contains("systemctl disable --now screentime.target"), "\(installed)")
            #expect(try await container.run("getent", "passwd", "screentime").status == 0)
            for service in Self.services {
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).socket") == "active", "\(service.name).socket")
                #expect(try await container.property("UnitFileState", of: "screentime-\(service.name).socket") == "enabled", "\(service.name).socket")
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).service") == "inactive", "\(service.name) waits for its first client")
            }
            #expect(try await container.property("UnitFileState", of: "screentime.target") == "enabled")
            // The nightly backup: its timer enabled and waiting, its service not run on install.
            #expect(try await container.property("UnitFileState", of: "screentime-backup.timer") == "enabled")
            #expect(try await container.property("ActiveState", of: "screentime-backup.timer") == "active")
            #expect(try await container.property("ActiveState", of: "screentime-backup.service") == "inactive")
            // The metrics' socket is shipped off: nothing listens on 9464 until it is enabled.
            #expect(try await container.property("UnitFileState", of: "screentime-metrics.socket") == "disabled")
            #expect(try await container.property("ActiveState", of: "screentime-metrics.socket") == "inactive")
            let changelog = try await runCommand("/usr/bin/dpkg-parsechangelog", ["-l", Container.checkout + "/deploy/debian/changelog", "-S", "Version"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            for service in Self.local {
                let ping = try await container.client(service.name).call("rpc.ping")
                #expect(ping["service"]?.stringValue == service.name)
                #expect(ping["version"]?.stringValue == changelog, "\(service.name) reports the changelog's version")
            }
            let cli = try await container.run("/usr/bin/screentimectl", "ping", "store")
            #expect(cli.status == 0 && cli.stdout.contains("\"version\":\"\(changelog)\""), "\(cli)")
            try await Self.checkGateway(in: container, port: 8443, version: changelog)
            // Without them (deleted here), the gateway makes them itself on its first start,
            // in its sandbox: a first connection starts it.
            _ = try await container.run("systemctl", "stop", "screentime-gateway.service")
            _ = try await container.run("rm", "-rf", "/var/lib/screentime/gateway")
            _ = try await container.run("curl", "-sk", "--max-time", "30", "-o", "/dev/null", "https://localhost:8443/healthz")
            try await Self.checkGateway(in: container, port: 8443, version: changelog)

            // The options files may name secrets: root and the services' group only.
            let modes = try await container.shell("stat -c '%n %a %U:%G' /etc/screentime/*.env").stdout.split(separator: "\n")
            #expect(modes.count == Self.services.count + 1 && modes.allSatisfy { $0.hasSuffix(" 640 root:screentime") }, "\(modes)")
            // Someone outside the screentime group is told how to get in, not to start a server.
            let outsider = try await container.run("runuser", "-u", "nobody", "--", "/usr/bin/screentimectl", "ping", "store")
            #expect(outsider.status == 69 && outsider.stderr.contains("add yourself to the group (sudo adduser") && !outsider.stderr.contains("screentime-dev"), "\(outsider)")

            let manual = try await container.shell("MANWIDTH=80 man -P cat screentimectl 2>&1")
            #expect(manual.status == 0 && manual.stdout.contains("NAME") && manual.stdout.contains("screentimectl") && manual.stdout.contains("SYNOPSIS"), "\(manual.stdout.prefix(2000))")
            for service in Self.services {
                let page = try await container.shell("MANWIDTH=80 man -P cat 8 \(service.binary) 2>&1")
                #expect(page.status == 0 && page.stdout.contains("--runtime-dir"), "\(service.binary)(8): \(page.stdout.prefix(1000))")
                #expect(try await container.property("Documentation", of: "screentime-\(service.name).service").contains("man:\(service.binary)(8)"),
                        "the unit names its manual page (systemctl help)")
                // A daemon has no subcommand; the documents are named where they are installed.
                #expect(!page.stdout.lowercased().contains("subcommand"), "\(service.binary)(8): \(page.stdout.prefix(1000))")
                #expect(page.stdout.contains("/usr/share/doc/screentime-server/protocol.md") && !page.stdout.contains(" docs/protocol.md"), "\(service.binary)(8): \(page.stdout.prefix(2000))")
            }

            let units = Self.services.flatMap { ["/lib/systemd/system/screentime-\($0.name).socket", "/lib/systemd/system/screentime-\($0.name).service"] }
                + ["/lib/systemd/system/screentime-backup.service", "/lib/systemd/system/screentime-backup.timer", "/lib/systemd/system/screentime-metrics.socket"]
            let verify = try await container.run(["systemd-analyze", "verify", "/lib/systemd/system/screentime.target"] + units)
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")
            // Without avahi-daemon nothing is announced. A package that brings Avahi's
            // directory of services afterwards (as avahi-daemon does) fires the package's
            // trigger, which announces the gateway's port.
            _ = try await container.run("rm", "-rf", "/etc/avahi/services")
            _ = try await container.run("systemctl", "restart", "screentime-gateway.socket")
            #expect(try await container.run("test", "-e", Self.avahiFile).status != 0, "no announcement without avahi-daemon")
            try await container.shell("""
                mkdir -p /tmp/avahi-stand-in/DEBIAN /tmp/avahi-stand-in/etc/avahi/services
                printf 'Package: avahi-stand-in\\nVersion: 1\\nArchitecture: all\\nMaintainer: tests <tests@example.invalid>\\nDescription: Avahi directory of services\\n' > /tmp/avahi-stand-in/DEBIAN/control
                printf '<service-group/>\\n' > /tmp/avahi-stand-in/etc/avahi/services/stand-in.service
                dpkg-deb --build /tmp/avahi-stand-in /tmp/avahi-stand-in.deb >/dev/null
                """)
            let avahiArrives = try await container.dpkg("-i", "/tmp/avahi-stand-in.deb")
            let avahi = try await container.read(Self.avahiFile)
            #expect(avahi.contains("<type>_screentime._tcp</type>") && avahi.contains("<port>8443</port>"), "the trigger announced: \(avahiArrives) \(avahi)")
        }
    }

    @Test("idle: every service running and no request for a minute, not one line in the journal; a planned restart of the store is no warning in the services that follow it")
    func quietWhenIdle() async throws {
        try Self.bootable()
        let packages = try await PackageBuild.shared.value
        try await Container.with { container in
            let debs = try container.handOver(packages)
            try await container.dpkg("-i", debs.current)
            try await Self.checkGateway(in: container, port: 8443, version: ServerVersion.current)
            for service in Self.services {
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).service") == "active", "\(service.name) runs (GET /healthz asked each one)")
            }
            // Following the journal for a minute: any line the services write, or systemd
            // writes about them, shows up here at once.
            let minute = try await container.run("timeout", "60", "journalctl", "--follow", "--lines=0", "--no-pager", "--output=short-iso",
                                                 "--unit=screentime-*")
            let lines = minute.stdout.split(separator: "\n").filter { !$0.hasPrefix("-- ") }
            #expect(lines.isEmpty, "an idle minute logged \(lines.count) lines:\n\(lines.prefix(20).joined(separator: "\n"))")
            for service in Self.services {
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).service") == "active", "\(service.name) still runs")
            }
            // At start, Dispatch's timer thread asks for nice -4, which LimitNICE=-4 allows
            // where systemd may raise that limit (CAP_SYS_RESOURCE, as on any real host).
            let started = try await container.run("journalctl", "--no-pager", "--output=cat", "--unit=screentime-*").stdout
                .split(separator: "\n").filter { $0.contains("Failed to set thread priority") }
            let bounding = try await container.shell("sed -n 's/^CapBnd:[[:space:]]*//p' /proc/1/status").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if let mask = UInt64(bounding, radix: 16), mask & (1 << 24) != 0 {
                #expect(started.isEmpty, "LimitNICE=-4 lets Dispatch set its threads' nice values: \(started.prefix(5))")
            } else {
                print("NOTE: NOT CHECKED HERE: this container's systemd lacks CAP_SYS_RESOURCE, so LimitNICE=-4 cannot be applied; Dispatch logged \(started.count) line(s) at the services' start (errno=13), none while idle")
                #expect(started.allSatisfy { $0.contains("errno=13") }, "only the start's nice -4 is refused: \(started.prefix(5))")
            }

            // systemctl restart: push, the aggregator and the gateway lose the store, then
            // follow it again, saying so at info.
            let since = try await container.run("date", "+@%s").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await container.run("systemctl", "restart", "screentime-store.service").status == 0)
            try await container.waitUntil("push and the aggregator follow the store again", timeout: .seconds(60)) {
                let followed = try await container.run("journalctl", "--since", since, "--no-pager", "--output=cat",
                                                       "--unit=screentime-push", "--unit=screentime-aggregator").stdout
                return followed.split(separator: "\n").filter { $0 == "following the store" }.count >= 2
            }
            let warnings = try await container.run("journalctl", "--since", since, "--no-pager", "--output=short-iso", "--priority=warning",
                                                   "--unit=screentime-push", "--unit=screentime-aggregator", "--unit=screentime-gateway", "--unit=screentime-pairing")
            let warned = warnings.stdout.split(separator: "\n").filter { !$0.hasPrefix("-- ") }
            #expect(warned.isEmpty, "a planned restart of the store: \(warned.joined(separator: "\n"))")
        }
    }

    @Test("upgrade over itself and to a newer build: the data and an edited conffile stay, running services restart on the new binaries, idle ones stay idle, the sockets keep listening")
    func upgradeOverItself() async throws {
        try Self.bootable()
        let packages = try await PackageBuild.shared.value
        try await Container.with { container in
            let debs = try container.handOver(packages)
            _ = try await container.run("mkdir", "-p", "/etc/avahi/services")
            let installed = try await container.dpkg("-i", debs.current)
            #expect(try await container.read(Self.avahiFile).contains("<port>8443</port>"), "\(installed)")
            let edited = "# mine\nOPTIONS=\"--log-level debug\"\n"
            try await container.write(edited, to: "/etc/screentime/store.env")
            // The administrator moves the gateway to another port, as `systemctl edit
            // screentime-gateway.socket` does: the one place the port is set.
            let port = "[Socket]\nListenStream=\nListenStream=9443\n"
            _ = try await container.run("mkdir", "-p", "/etc/systemd/system/screentime-gateway.socket.d")
            try await container.write(port, to: Self.gatewayOverride)
            for command in [["daemon-reload"], ["restart", "screentime-gateway.socket", "screentime-gateway.service"]] {
                let done = try await container.run(["systemctl"] + command)
                #expect(done.status == 0, "systemctl \(command): \(done)")
            }
            #expect(try await container.read(Self.avahiFile).contains("<port>9443</port>"), "the announcement follows the socket's port")
            // A port.conf of 0.8.0 that the administrator changed: it stays in force, but read
            // before the override.conf of `systemctl edit`, which wins.
            try await container.write("[Socket]\nListenStream=\nListenStream=9999\n", to: "/etc/systemd/system/screentime-gateway.socket.d/port.conf")
            let changelog = try await runCommand("/usr/bin/dpkg-parsechangelog", ["-l", Container.checkout + "/deploy/debian/changelog", "-S", "Version"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try await Self.checkGateway(in: container, port: 9443, version: changelog)
            // /healthz started every service: pairing goes idle again (its socket stays).
            _ = try await container.run("systemctl", "stop", "screentime-pairing.service")
            _ = try await container.client("store").call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))

            for deb in [debs.current, debs.rebuild] {
                let before = try await container.property("MainPID", of: "screentime-store.service")
                let upgraded = try await container.dpkg("-i", deb)
                #expect(!upgraded.contains("static unit") && !upgraded.contains("not starting it"), "\(upgraded)")
                #expect(upgraded.contains("listens on TCP port 9443"), "\(upgraded)")
                #expect(try await container.property("MainPID", of: "screentime-store.service") != before, "the store was restarted")
                #expect(try await container.property("ActiveState", of: "screentime-store.service") == "active")
                #expect(try await container.property("ActiveState", of: "screentime-pairing.service") == "inactive", "an idle service is not started")
                for service in Self.services {
                    #expect(try await container.property("ActiveState", of: "screentime-\(service.name).socket") == "active")
                }
                #expect(try await container.read("/etc/screentime/store.env") == edited, "the administrator's configuration stays")
                #expect(try await container.read(Self.gatewayOverride) == port, "the administrator's port stays")
                #expect(try await container.read("/etc/systemd/system/screentime-gateway.socket.d/00-port.conf").contains("ListenStream=9999"), "the changed port.conf kept, renamed")
                #expect(try await container.run("test", "-e", "/etc/systemd/system/screentime-gateway.socket.d/port.conf").status != 0)
                #expect(try await container.read(Self.avahiFile).contains("<port>9443</port>"))
                let families = try await container.client("store").call(StoreMethods.listFamilies, Empty()).families.map(\.family)
                #expect(families == ["smith"], "the data stays")
            }
            #expect(try await container.run("dpkg-query", "-W", "-f", "${Version}", "screentime-server").stdout == "\(ServerVersion.current)+b1")
            try await Self.checkGateway(in: container, port: 9443, version: changelog)
            let modes = try await container.shell("stat -c '%n %a %U:%G' /etc/screentime/*.env").stdout.split(separator: "\n")
            #expect(modes.allSatisfy { $0.hasSuffix(" 640 root:screentime") }, "an upgrade keeps the options files private: \(modes)")

            // The administrator takes back every change of the socket: the package's own files
            // are untouched (dpkg finds none missing or changed) and the port is 8443 again.
            let reverted = try await container.run("systemctl", "revert", "screentime-gateway.socket")
            #expect(reverted.status == 0, "\(reverted)")
            #expect(try await container.run("test", "-e", "/etc/systemd/system/screentime-gateway.socket.d").status != 0, "\(reverted)")
            // (The one difference dpkg finds is the administrator's own edit of store.env above.)
            let verified = try await container.run("dpkg", "--verify", "screentime-server")
            #expect(verified.status == 0 && verified.stdout == "??5?????? c /etc/screentime/store.env\n", "dpkg --verify after systemctl revert: \(verified)")
            for command in [["daemon-reload"], ["restart", "screentime-gateway.socket", "screentime-gateway.service"]] {
                let done = try await container.run(["systemctl"] + command)
                #expect(done.status == 0, "systemctl \(command): \(done)")
            }
            try await Self.checkGateway(in: container, port: 8443, version: changelog)
            // The store runs with the edited options: it logs every request at debug.
            _ = try await container.client("store").call("rpc.ping")
            try await container.waitUntil("the store logs at debug level") {
                try await container.run("journalctl", "-u", "screentime-store", "-o", "cat", "--no-pager").stdout.contains("request served")
            }
        }
    }

    @Test("upgrade from the hand-built 0.7 package: the data stays, an edited env file stays as it was, an untouched one becomes the new default, no question asked; remove keeps data and configuration; purge deletes the configuration, keeps the data unless the administrator says to delete it, and keeps the user")
    func upgradeFrom07ThenRemoveAndPurge() async throws {
        try Self.bootable()
        let packages = try await PackageBuild.shared.value
        try await Container.with { container in
            let debs = try container.handOver(packages)
            try await container.dpkg("-i", debs.handBuilt07)
            #expect(try await container.run("dpkg-query", "-W", "-f", "${Version}", "screentime-server").stdout == "0.7.0")
            _ = try await container.client("store").call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
            let edited = try await container.read("/etc/screentime/store.env") + "OPTIONS=\"--log-level debug\"\n"
            try await container.write(edited, to: "/etc/screentime/store.env")
            let before = try await container.property("MainPID", of: "screentime-store.service")
            // What earlier versions left: sockets also wanted by sockets.target, and the
            // internet drop-in on the service, where it filtered nothing.
            try await container.shell("""
                mkdir -p /etc/systemd/system/sockets.target.wants /etc/systemd/system/screentime-gateway.service.d
                for s in store pairing push aggregator; do ln -sf /lib/systemd/system/screentime-$s.socket /etc/systemd/system/sockets.target.wants/; done
                printf '[Service]\\nIPAddressAllow=any\\n' > /etc/systemd/system/screentime-gateway.service.d/internet.conf
                """)
            // And the port drop-in of earlier builds (a conffile then), as they shipped it.
            _ = try await container.run("mkdir", "-p", "/etc/systemd/system/screentime-gateway.socket.d")
            try await container.write(Self.earlierPortDropIn, to: "/etc/systemd/system/screentime-gateway.socket.d/port.conf")

            // dpkg runs with no terminal: a conffile question would fail the upgrade.
            let upgraded = try await container.dpkg("-i", debs.current)
            #expect(try await container.shell("ls /etc/systemd/system/sockets.target.wants/ | grep screentime").stdout.isEmpty,
                    "the sockets.target links are gone")
            #expect(try await container.read("/etc/systemd/system/screentime-gateway.socket.d/internet.conf").contains("IPAddressAllow=any"), "the internet drop-in moved to the socket")
            #expect(try await container.run("test", "-e", "/etc/systemd/system/screentime-gateway.service.d/internet.conf").status != 0)
            #expect(try await container.run("test", "-e", "/etc/systemd/system/screentime-gateway.socket.d/port.conf").status != 0,
                    "the unchanged port drop-in of earlier builds is gone: the socket's own ListenStream= is the port")
            #expect(upgraded.contains("for devices from any address"), "\(upgraded)")
            #expect(try await container.run("dpkg-query", "-W", "-f", "${Version}", "screentime-server").stdout == ServerVersion.current)
            #expect(try await container.read("/etc/screentime/store.env") == edited, "the edited file stays")
            let template = try String(contentsOfFile: Container.checkout + "/deploy/service.env.in", encoding: .utf8)
            #expect(try await container.read("/etc/screentime/pairing.env") == template.replacingOccurrences(of: "@NAME@", with: "pairing").replacingOccurrences(of: "@BINARY@", with: "screentime-pairingd"),
                    "an untouched 0.7 file becomes the package's default")
            #expect(try await container.shell("ls /etc/screentime/*.screentime-kept 2>/dev/null").stdout.isEmpty)
            #expect(try await container.property("MainPID", of: "screentime-store.service") != before, "the store runs the new binary")
            let families = try await container.client("store").call(StoreMethods.listFamilies, Empty()).families.map(\.family)
            #expect(families == ["smith"], "the data survives the upgrade")
            for service in Self.services {
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).socket") == "active")
                #expect(try await container.property("UnitFileState", of: "screentime-\(service.name).socket") == "enabled")
            }
            try await Self.checkGateway(in: container, port: 8443, version: ServerVersion.current)

            // Remove: everything stops, the units go, the data and the configuration stay.
            _ = try await container.client("pairing").call("rpc.ping")
            try await container.dpkg("-r", "screentime-server")
            for service in Self.services {
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).service") == "inactive", "\(service.name) stopped")
                #expect(try await container.property("ActiveState", of: "screentime-\(service.name).socket") == "inactive", "\(service.name).socket stopped")
                #expect(try await container.property("LoadState", of: "screentime-\(service.name).socket") == "not-found")
            }
            #expect(try await container.run("test", "-e", "/var/lib/screentime/store.sqlite").status == 0, "removal keeps the data")
            #expect(try await container.read("/etc/screentime/store.env") == edited, "removal keeps the configuration")

            // Purge where nobody can be asked: the configuration goes, the family's data stays
            // (the question's default), and installing again finds it.
            let kept = try await container.run(["env", "DEBIAN_FRONTEND=noninteractive", "dpkg", "--purge", "screentime-server"], timeout: .seconds(300))
            #expect(kept.status == 0 && (kept.stdout + kept.stderr).contains("the family's data is kept in /var/lib/screentime"), "\(kept)")
            #expect(try await container.run("test", "-e", "/var/lib/screentime/store.sqlite").status == 0, "a purge keeps the data by default")
            #expect(try await container.run("test", "-e", "/etc/screentime").status != 0, "purge deletes the configuration")
            try await container.dpkg("-i", debs.current)
            let again = try await container.client("store").call(StoreMethods.listFamilies, Empty()).families.map(\.family)
            #expect(again == ["smith"], "installed again, the server has the family's data")

            // Purge with the answer "delete": data and configuration go, the user stays (Debian policy).
            try await container.shell("echo 'screentime-server screentime-server/purge-data boolean true' | debconf-set-selections")
            let purged = try await container.run(["env", "DEBIAN_FRONTEND=noninteractive", "dpkg", "--purge", "screentime-server"], timeout: .seconds(300))
            #expect(purged.status == 0, "\(purged)")
            #expect(try await container.run("test", "-e", "/var/lib/screentime").status != 0, "purge deletes the data when told to")
            #expect(try await container.run("test", "-e", "/etc/screentime").status != 0, "purge deletes the configuration")
            #expect(try await container.run("test", "-e", "/etc/avahi/services/screentime.service").status != 0)
            #expect(try await container.run("test", "-e", "/etc/systemd/system/screentime-gateway.socket.d").status != 0, "purge deletes the drop-ins it put there")
            #expect(try await container.run("getent", "passwd", "screentime").status == 0, "purge keeps the system user")
            #expect(try await container.run("dpkg", "--status", "screentime-server").status != 0, "dpkg no longer knows the package")
        }
    }
}

extension DebianPackageTests {
    /// The gateway as the package runs it: its key and self-signed certificate made by the
    /// gateway at install (under the state directory, 0600, as the screentime user), started
    /// by its first connection on `port`, answering over TLS pinned to that key
    /// (curl checks the pin from endpoint.json), every service behind it reachable, and
    /// `rpc.ping` reporting the changelog's version.
    static func checkGateway(in container: Container, port: Int, version: String) async throws {
        try await container.waitUntil("the gateway has its key and certificate") {
            try await container.run("test", "-s", "/var/lib/screentime/gateway/endpoint.json").status == 0
        }
        for file in ["key.pem", "certificate.pem"] {
            let stat = try await container.run("stat", "-c", "%a %U", "/var/lib/screentime/gateway/" + file)
            #expect(stat.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "600 screentime", "\(file): \(stat)")
        }
        let endpoint = try await container.read("/var/lib/screentime/gateway/endpoint.json")
        let pin = try #require((try? JSONSerialization.jsonObject(with: Data(endpoint.utf8)) as? [String: Any])?["pin"] as? String, "\(endpoint)")
        let pinned = ["curl", "-sS", "--max-time", "30", "--cacert", "/var/lib/screentime/gateway/certificate.pem", "--pinnedpubkey", "sha256//" + pin.replacingOccurrences(of: "sha256//", with: "")]
        let healthz = try await container.run(pinned + ["-w", "\n%{http_code}", "https://localhost:\(port)/healthz"])
        #expect(healthz.stdout.hasSuffix("\n200") && healthz.stdout.contains("\"ok\""), "GET /healthz over pinned TLS: \(healthz)")
        let ping = try await container.run(pinned + ["-H", "Content-Type: application/json", "--data", #"{"id":1,"method":"rpc.ping"}"#, "https://localhost:\(port)/v1/rpc"])
        #expect(ping.stdout.contains("\"service\":\"gateway\"") && ping.stdout.contains("\"version\":\"\(version)\""), "rpc.ping through the gateway: \(ping)")
        #expect(try await container.property("ActiveState", of: "screentime-gateway.service") == "active")
    }
}

/// The services as deploy/services lists them.
enum Deployment {
    static let services: [(name: String, binary: String)] = {
        let list = (try? String(contentsOfFile: Container.checkout + "/deploy/services", encoding: .utf8)) ?? ""
        return list.split(separator: "\n").compactMap { line in
            let words = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0].split(separator: " ", omittingEmptySubsequences: true)
            return words.count == 2 ? (String(words[0]), String(words[1])) : nil
        }
    }()
}

/// The packages the suite installs, built once per test run.
struct PackageBuild: Sendable {
    struct Built: Sendable {
        var deb: String
        var dbgsym: String
        var dsc: String
    }

    /// This tree's package.
    var current: Built
    /// A binary-only rebuild of it (version +b1): a newer build of the same source.
    var rebuild: String
    /// The 0.7 package as it was built by hand (Tests/Fixtures/hand-built-0.7).
    var handBuilt07: String

    /// Where the shipped binaries are (deploy/build-release.sh prints it).
    static let binaries: String? = {
        guard let directory = ProcessInfo.processInfo.environment["SCREENTIME_RELEASE_BIN_DIR"], !directory.isEmpty else { return nil }
        return directory
    }()

    static var missingBinaries: String {
        "SCREENTIME_RELEASE_BIN_DIR is not set: build the shipped binaries with deploy/build-release.sh and set it to the directory it prints (.ci/run does)"
    }

    static let shared = Task<PackageBuild, any Error> { try await Self.build() }

    private static func build() async throws -> PackageBuild {
        guard let binaries else { throw TestFailure(Self.missingBinaries) }
        // Hundreds of megabytes, kept until the test process ends: one directory per process,
        // and those of processes that have ended are removed here.
        let temporary = FileManager.default.temporaryDirectory.path
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? [] where entry.hasPrefix("st-debs-") {
            if let pid = pid_t(entry.dropFirst("st-debs-".count)), kill(pid, 0) != 0, errno == ESRCH {
                try? FileManager.default.removeItem(atPath: temporary + "/" + entry)
            }
        }
        let out = temporary + "/st-debs-\(getpid())"
        try? FileManager.default.removeItem(atPath: out)
        let script = Container.checkout + "/deploy/build-deb.sh"
        // dpkg-deb's own knobs: gzip -1 instead of xz, minutes quicker on these big binaries
        // (the contents, and what lintian checks, are the same).
        let environment = ["DPKG_DEB_COMPRESSOR_TYPE": "gzip", "DPKG_DEB_COMPRESSOR_LEVEL": "1"]
        let current = try await runCommand(script, ["--bin-dir", binaries, "--out", out + "/current"], environment: environment, timeout: .seconds(1800))
        guard current.status == 0 else { throw TestFailure("build-deb.sh failed (\(current.status)):\n\(current.stderr.suffix(6000))") }
        let files = current.stdout.split(separator: "\n").map(String.init)
        func file(_ suffix: String) throws -> String {
            guard let path = files.first(where: { $0.hasSuffix(suffix) }) else { throw TestFailure("build-deb.sh made no *\(suffix): \(files)") }
            return path
        }
        let built = Built(deb: try file("/screentime-server_\(ServerVersion.current)_\(Self.architecture).deb"), dbgsym: try file("/screentime-server-dbgsym_\(ServerVersion.current)_\(Self.architecture).deb"), dsc: try file(".dsc"))

        let rebuilt = try await runCommand(script, ["--bin-dir", binaries, "--out", out + "/rebuild", "--binnmu", "1"], environment: environment, timeout: .seconds(1800))
        guard rebuilt.status == 0, let rebuild = rebuilt.stdout.split(separator: "\n").first(where: { $0.hasSuffix("/screentime-server_\(ServerVersion.current)+b1_\(Self.architecture).deb") }) else {
            throw TestFailure("build-deb.sh --binnmu 1 failed (\(rebuilt.status)):\n\(rebuilt.stdout)\(rebuilt.stderr.suffix(6000))")
        }

        let old = try await runCommand(Container.checkout + "/Tests/Fixtures/hand-built-0.7/build-deb.sh", ["--bin-dir", binaries, "--out", out + "/0.7"],
                                     environment: ["SCREENTIME_DEB_UNCOMPRESSED": "1"], timeout: .seconds(600))
        guard old.status == 0 else { throw TestFailure("the 0.7 build failed (\(old.status)): \(old.stderr)") }
        return PackageBuild(current: built, rebuild: String(rebuild), handBuilt07: old.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static let architecture: String = {
        #if arch(arm64)
        "arm64"
        #else
        "amd64"
        #endif
    }()
}

extension Container {
    /// The packages copied into the container (it has its own /tmp), as paths inside it.
    /// The container is made a server as Debian installs one: a container image's
    /// /usr/sbin/policy-rc.d (Docker's forbids every start, and the container sees the
    /// host's) is taken away, or no maintainer script could start a unit.
    func handOver(_ packages: PackageBuild) throws -> (current: String, rebuild: String, handBuilt07: String) {
        try? FileManager.default.removeItem(atPath: self.root + "/usr/sbin/policy-rc.d")
        let directory = "/var/cache/screentime-debs"
        try FileManager.default.createDirectory(atPath: self.root + directory, withIntermediateDirectories: true)
        func copy(_ path: String) throws -> String {
            let inside = directory + "/" + (path as NSString).lastPathComponent
            if !FileManager.default.fileExists(atPath: self.root + inside) { try FileManager.default.copyItem(atPath: path, toPath: self.root + inside) }
            return inside
        }
        return (try copy(packages.current.deb), try copy(packages.rebuild), try copy(packages.handBuilt07))
    }

    /// dpkg with no terminal (a question would fail it), which must succeed; what it printed.
    @discardableResult
    func dpkg(_ arguments: String...) async throws -> String {
        let result = try await self.run(["dpkg"] + arguments, timeout: .seconds(300))
        guard result.status == 0 else { throw TestFailure("dpkg \(arguments.joined(separator: " ")) failed (\(result.status)):\n\(result.stdout)\(result.stderr)") }
        return result.stdout + result.stderr
    }

    func read(_ path: String) async throws -> String {
        try String(contentsOfFile: self.root + path, encoding: .utf8)
    }

    func write(_ text: String, to path: String) async throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: self.root + path))
    }
}
