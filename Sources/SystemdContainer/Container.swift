import Foundation
import Glibc
import ProcessSpawn
import Synchronization

/// A real systemd, booted in a container: an overlay whose lower layer is `/` (so the
/// checkout and its build are inside) and whose upper layer is on a tmpfs, booted with
/// `systemd-nspawn -b`; commands run in it through `nsenter`. Needs root and
/// systemd-nspawn (Debian's systemd-container). Used by the system tests and the cold-start
/// benchmark.
public final class Container: Sendable {
    public let base: String
    public let nspawn: pid_t
    /// The container's systemd (PID 1 inside).
    public let systemd: pid_t
    /// Whether it was booted so that systemd can enforce `IPAddressAllow=`/`Deny=`.
    public let ipFirewall: Bool
    /// Shut down already (its nspawn reaped): a second shutdown must not wait for it.
    private let down = Mutex(false)

    /// The container's file system, seen from the host.
    public var root: String { self.base + "/root" }

    /// Why a container cannot boot here, or nil when it can.
    public static let unavailable: String? = {
        guard getuid() == 0 else { return "they need root (systemd-nspawn and an overlay mount)" }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-nspawn") else { return "systemd-nspawn is missing (apt-get install systemd-container)" }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/nsenter") else { return "nsenter is missing (util-linux)" }
        return nil
    }()

    /// Boots a container, runs `body` with it, and powers it off (also when `body` throws).
    /// `ipFirewall`: boot it so that its systemd can enforce IP access lists (see ``boot(ipFirewall:)``).
    public static func with<T>(ipFirewall: Bool = false, _ body: (Container) async throws -> T) async throws -> T {
        let container = try await Self.boot(ipFirewall: ipFirewall)
        do {
            let result = try await body(container)
            await container.powerOff()
            return result
        } catch {
            await container.powerOff()
            throw error
        }
    }

    /// Boots a container on a fresh overlay.
    ///
    /// By default its systemd silently ignores `IPAddressAllow=`/`IPAddressDeny=`: it gets
    /// the host's cgroup layout (on a hybrid host, no unified hierarchy of its own) and
    /// nspawn's system call filter refuses `bpf()`. With `ipFirewall` it gets a unified
    /// cgroup hierarchy (`SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1`), `bpf()` and `CAP_BPF`, which
    /// is what systemd needs to attach its BPF firewall to a unit's cgroup.
    public static func boot(ipFirewall: Bool = false) async throws -> Container {
        let base = "/dev/shm/st-systemd-\(UUID().uuidString.prefix(8))"
        for directory in ["upper", "work", "root"] {
            try FileManager.default.createDirectory(atPath: "\(base)/\(directory)", withIntermediateDirectories: true)
        }
        let mounted = try await runCommand("/usr/bin/mount", ["-t", "overlay", "overlay", "-o", "lowerdir=/,upperdir=\(base)/upper,workdir=\(base)/work", "\(base)/root"])
        guard mounted.status == 0 else { throw ContainerError("cannot mount the overlay: \(mounted.stderr)") }
        // Its own machine id, or journald and systemd would share the host's.
        try? FileManager.default.removeItem(atPath: "\(base)/root/etc/machine-id")
        return try await Self.start(base: base, ipFirewall: ipFirewall)
    }

    /// Boots systemd on the overlay at `base` (a new one, or one a container was shut down on).
    private static func start(base: String, ipFirewall: Bool) async throws -> Container {
        var environment = ProcessInfo.processInfo.environment
        var firewall: [String] = []
        if ipFirewall {
            environment["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "1"
            firewall = ["--system-call-filter=bpf", "--capability=CAP_BPF,CAP_NET_ADMIN"]
        }
        let nspawn = try Spawn(
            executable: "/usr/bin/systemd-nspawn",
            arguments: ["-D", "\(base)/root", "-b", "--register=no", "--keep-unit", "--link-journal=no", "--console=pipe", "--private-network"] + firewall,
            environment: environment, stdout: "\(base)/boot.log", stderr: "\(base)/boot.log"
        ).start()
        let deadline = ContinuousClock.now + .seconds(60)
        var systemd: pid_t?
        while ContinuousClock.now < deadline {
            if ChildExit.poll(nspawn) != nil {
                throw ContainerError("systemd-nspawn exited: \((try? String(contentsOfFile: "\(base)/boot.log", encoding: .utf8)) ?? "")")
            }
            // Looked up each time: nspawn's first child is an intermediate process that
            // exits once it has started the container's init.
            systemd = Self.child(of: nspawn).flatMap { Self.command(of: $0) == "systemd" ? $0 : nil } ?? systemd
            if let pid = systemd {
                let state = try await runCommand("/usr/bin/nsenter", ["-t", "\(pid)", "-a", "systemctl", "is-system-running"])
                let text = state.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                // "starting": what the host has enabled (a database, say) may take its time
                // and is not waited for; systemd itself is up.
                if ["running", "degraded", "starting"].contains(text) { return Container(base: base, nspawn: nspawn, systemd: pid, ipFirewall: ipFirewall) }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        var jobs: String?
        if let systemd { jobs = try? await runCommand("/usr/bin/nsenter", ["-t", "\(systemd)", "-a", "systemctl", "list-jobs", "--no-pager"]).stdout }
        let log = (try? String(contentsOfFile: "\(base)/boot.log", encoding: .utf8)) ?? ""
        Self.killContainer(nspawn: nspawn)
        _ = try? await ChildExit.wait(nspawn, timeout: .seconds(10))
        _ = try? await runCommand("/usr/bin/umount", ["\(base)/root"])
        throw ContainerError("the container's systemd did not come up within 60 s; systemd \(systemd.map(String.init) ?? "not found"), jobs: \(jobs ?? "?")\nboot log:\n\(log.suffix(3000))")
    }

    private init(base: String, nspawn: pid_t, systemd: pid_t, ipFirewall: Bool) {
        self.base = base
        self.nspawn = nspawn
        self.systemd = systemd
        self.ipFirewall = ipFirewall
    }

    /// Reboots: shuts this container's systemd down and boots it again on the same file
    /// system, as a machine restarts (what was enabled starts, what was not stays off).
    /// Use the container returned; this one is gone.
    public func reboot() async throws -> Container {
        await self.shutDown()
        return try await Self.start(base: self.base, ipFirewall: self.ipFirewall)
    }

    /// Kills nspawn and what runs under it. Killing nspawn alone leaves the container's
    /// init running, orphaned, with every service it started; killing the init of a PID
    /// namespace kills everything in it.
    private static func killContainer(nspawn: pid_t) {
        var pending = [nspawn]
        var tree: [pid_t] = []
        while let pid = pending.popLast() {
            tree.append(pid)
            let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
            pending += children.split(separator: " ").compactMap { pid_t($0) }
        }
        for pid in tree.reversed() { kill(pid, SIGKILL) }
    }

    private static func command(of pid: pid_t) -> String? {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func child(of parent: pid_t) -> pid_t? {
        let tasks = (try? String(contentsOfFile: "/proc/\(parent)/task/\(parent)/children", encoding: .utf8)) ?? ""
        return tasks.split(separator: " ").compactMap { pid_t($0) }.first
    }

    /// Runs a command inside the container.
    @discardableResult
    public func run(_ arguments: String..., timeout: Duration = .seconds(120)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await self.run(arguments, timeout: timeout)
    }

    @discardableResult
    public func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runCommand("/usr/bin/nsenter", ["-t", "\(self.systemd)", "-a"] + arguments, timeout: timeout)
    }

    @discardableResult
    public func shell(_ script: String, timeout: Duration = .seconds(120)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await self.run(["/bin/bash", "-c", script], timeout: timeout)
    }

    /// `systemctl show -p NAME --value UNIT`.
    public func property(_ name: String, of unit: String) async throws -> String {
        try await self.run("systemctl", "show", "-p", name, "--value", unit).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The path, seen from the host, of a file inside the container (a socket, say),
    /// through the container's root in /proc.
    public func hostPath(_ inside: String) -> String {
        "/proc/\(self.systemd)/root" + inside
    }

    /// A host directory's `entries` as the container reaches them: the directory itself
    /// when the container sees it (the overlay shows the host's `/`), else copies staged
    /// under `/var/lib/screentime-staged` (a checkout or a build under /tmp is hidden by
    /// the container's own tmpfs /tmp). Returns the directory to use inside.
    public func reach(_ directory: String, entries: [String]) async throws -> String {
        if let first = entries.first, try await self.run("test", "-e", directory + "/" + first).status == 0 { return directory }
        let staged = "/var/lib/screentime-staged" + directory
        let files = FileManager.default
        try files.createDirectory(atPath: self.root + staged, withIntermediateDirectories: true)
        for entry in entries where !files.fileExists(atPath: self.root + staged + "/" + entry) {
            try files.copyItem(atPath: directory + "/" + entry, toPath: self.root + staged + "/" + entry)
        }
        return staged
    }

    /// Waits until `condition` holds (checked every 100 ms).
    public func waitUntil(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? await condition()) == true { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ContainerError("\(what) did not happen within \(timeout)")
    }

    public func powerOff() async {
        await self.shutDown()
        _ = try? await runCommand("/usr/bin/umount", [self.root])
        try? FileManager.default.removeItem(atPath: self.base)
    }

    /// Powers the container's systemd off and waits for nspawn to exit; the overlay stays.
    /// Once only: after a reboot the old value's nspawn is gone, and its pid may be another's.
    private func shutDown() async {
        guard !self.down.withLock({ down in defer { down = true }; return down }) else { return }
        _ = try? await self.run("systemctl", "poweroff")
        let deadline = ContinuousClock.now + .seconds(30)
        while ChildExit.poll(self.nspawn) == nil {
            if ContinuousClock.now > deadline {
                Self.killContainer(nspawn: self.nspawn)
                _ = try? await ChildExit.wait(self.nspawn, timeout: .seconds(5))
                break
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
}

public struct ContainerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
