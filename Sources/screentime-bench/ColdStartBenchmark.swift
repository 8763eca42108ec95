import ArgumentParser
import Foundation
import Glibc
import SystemdContainer

/// Cold start under a real systemd: the services installed with deploy/install.sh in a
/// booted container, each stopped while its socket stays with systemd, then timed from the
/// first connection to the first reply; beside a minimal C socket-activated service
/// (Benchmarks/floor/activated.c) under the same unit settings and under a bare unit.
/// Then each service's resident memory once idle. When deploy/build-release.sh --separate
/// also linked each program on its own (separate/ beside the one program), the services are
/// installed again from those and measured the same way, in the same container: the one
/// program's cold start and memory beside the separate programs'.
struct ColdStartBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coldstart",
        abstract: "Benchmarks cold start under a real systemd (a container; needs root and systemd-nspawn) and idle memory per service.",
        discussion: """
            Each round stops the service (its socket stays listening), then times connect, \
            rpc.ping and the reply: systemd starting the process included. The comparison is \
            a minimal C service activated the same way with the same hardening (the sandbox's \
            set-up is systemd's work, the same for any service), and the same C service under a \
            bare unit for reference.
            """
    )

    static let services = ["store", "pairing", "push", "aggregator"]

    /// The executable of a service: `screentime-stored` for `store`.
    static func executable(of service: String) -> String {
        service == "store" ? "screentime-stored" : "screentime-\(service)d"
    }
    static let floorUnit = "screentime-cfloor"
    static let bareUnit = "screentime-cfloor-bare"
    static let floorBinary = "/usr/local/libexec/screentime-bench/activated"

    @Option(help: "Cold starts timed per service.")
    var rounds = 15

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard self.rounds >= 3 else { throw ValidationError("--rounds must be at least 3") }
    }

    func run() async throws {
        if let reason = Container.unavailable { throw BenchError("the cold-start benchmark boots a systemd container and cannot run here: \(reason)") }
        let rounds = self.common.quick ? 3 : self.rounds
        let directory = try WorkDirectory(self.common.workDirectory)
        defer { directory.removeUnlessKept() }
        let floor = directory.path + "/activated"
        let source = Locations.packageRoot + "/Benchmarks/floor/activated.c"
        guard try CFloor.run("/usr/bin/env", ["cc", "-O2", "-o", floor, source, "-lsystemd"]) == 0 else {
            throw BenchError("cannot compile \(source) (cc and libsystemd-dev are needed)")
        }
        let binDirectory = self.common.binDirectory ?? Locations.binDirectory
        let separate = binDirectory + "/separate"
        let compareSeparate = FileManager.default.isExecutableFile(atPath: separate + "/" + Self.executable(of: "store"))
        if !compareSeparate { say("no \(separate) (deploy/build-release.sh --separate): the one program is measured alone") }

        say("booting a systemd container")
        let figures = try await Container.with { container in
            try await Self.install(into: container, binDirectory: binDirectory, floor: floor)
            var coldStarts: [String: Samples] = [:]
            for unit in Self.services.map({ "screentime-\($0)" }) + [Self.floorUnit, Self.bareUnit] {
                say("\(unit): \(rounds) cold starts")
                coldStarts[unit] = try await Self.coldStarts(of: unit, in: container, rounds: rounds)
            }
            // Every service has just answered; let them settle, then read their memory.
            try await Task.sleep(for: .seconds(2))
            var rss: [String: Memory] = [:]
            for unit in Self.services.map({ "screentime-\($0)" }) + [Self.floorUnit] {
                rss[unit] = try await Self.memory(of: unit, in: container)
            }
            var separateColdStarts: [String: Samples] = [:]
            var separateRSS: [String: Memory] = [:]
            if compareSeparate {
                try await Self.installPrograms(into: container, binDirectory: separate)
                for unit in Self.services.map({ "screentime-\($0)" }) {
                    say("\(unit), a program of its own: \(rounds) cold starts")
                    separateColdStarts[unit] = try await Self.coldStarts(of: unit, in: container, rounds: rounds)
                }
                try await Task.sleep(for: .seconds(2))
                for unit in Self.services.map({ "screentime-\($0)" }) {
                    separateRSS[unit] = try await Self.memory(of: unit, in: container)
                }
            }
            return Self.figures(coldStarts: coldStarts, rss: rss)
                + Self.oneProgramFigures(coldStarts: coldStarts, rss: rss, separateColdStarts: separateColdStarts, separateRSS: separateRSS)
        }
        Report.print("Cold start under systemd (p50 of \(rounds) rounds) and idle memory", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
    }

    static func figures(coldStarts: [String: Samples], rss: [String: Memory]) -> [Figure] {
        let floor = coldStarts[Self.floorUnit]?.p50 ?? .nan
        let bare = coldStarts[Self.bareUnit]?.p50 ?? .nan
        var figures: [Figure] = []
        for service in Self.services {
            let p50 = coldStarts["screentime-\(service)"]?.p50 ?? .nan
            figures.append(Figure(name: "\(service): cold first reply p50", value: p50 / 1000, unit: "ms",
                                  comparison: "C service, same unit", comparisonValue: floor / 1000, ratio: p50 / floor,
                                  target: "≤ 3x", met: p50 <= 3 * floor))
        }
        figures.append(Figure(name: "C service, bare unit: cold first reply p50", value: bare / 1000, unit: "ms"))
        let floorRSS = rss[Self.floorUnit]?.resident ?? .nan
        for service in Self.services {
            let memory = rss["screentime-\(service)"]
            let mib = memory?.resident ?? .nan
            figures.append(Figure(name: "\(service): idle RSS", value: mib, unit: "MiB",
                                  comparison: "C service", comparisonValue: floorRSS, ratio: mib / floorRSS,
                                  target: "≤ 16 MiB", met: mib <= 16))
            // What RSS is made of: most is code mapped from files (the binary, the Swift
            // runtime and Foundation), which the kernel can drop and, with shared
            // libraries, shares between the services; the private part is the heap and stacks.
            figures.append(Figure(name: "\(service): idle private (anonymous) memory", value: memory?.anonymous ?? .nan, unit: "MiB"))
            figures.append(Figure(name: "\(service): idle PSS", value: memory?.proportional ?? .nan, unit: "MiB"))
        }
        return figures
    }

    /// The one program beside the separate programs: each service's cold first reply and
    /// idle PSS (the one program's pages are shared between the services).
    static func oneProgramFigures(coldStarts: [String: Samples], rss: [String: Memory],
                                  separateColdStarts: [String: Samples], separateRSS: [String: Memory]) -> [Figure] {
        guard !separateColdStarts.isEmpty else { return [] }
        var figures: [Figure] = []
        for service in Self.services {
            let unit = "screentime-\(service)"
            let one = coldStarts[unit]?.p50 ?? .nan
            let own = separateColdStarts[unit]?.p50 ?? .nan
            figures.append(Figure(name: "\(service): cold first reply p50, one program", value: one / 1000, unit: "ms",
                                  comparison: "a program of its own", comparisonValue: own / 1000, ratio: one / own,
                                  target: "≤ 1.05x (no slower)", met: one <= 1.05 * own))
        }
        for service in Self.services {
            let unit = "screentime-\(service)"
            let one = rss[unit]?.proportional ?? .nan
            let own = separateRSS[unit]?.proportional ?? .nan
            figures.append(Figure(name: "\(service): idle PSS, one program", value: one, unit: "MiB",
                                  comparison: "a program of its own", comparisonValue: own, ratio: one / own))
        }
        return figures
    }

    /// Installs the services with deploy/install.sh, and the C service under two units.
    static func install(into container: Container, binDirectory: String, floor: String) async throws {
        let files = FileManager.default
        try await Self.installPrograms(into: container, binDirectory: binDirectory)
        try files.createDirectory(atPath: container.root + (Self.floorBinary as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try? files.removeItem(atPath: container.root + Self.floorBinary)
        try files.copyItem(atPath: floor, toPath: container.root + Self.floorBinary)

        // The C service under the pairing service's own [Service] settings, hardening included.
        let pairing = try String(contentsOfFile: container.root + "/etc/systemd/system/screentime-pairing.service", encoding: .utf8)
        let hardened = pairing.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { $0 != "[Service]" }
            .filter { !$0.hasPrefix("ExecStart=") && !$0.hasPrefix("EnvironmentFile=") }
            .joined(separator: "\n")
        let units = [
            "\(Self.floorUnit).socket": Self.socketUnit(Self.floorUnit),
            "\(Self.floorUnit).service": "[Unit]\nDescription=C cold-start floor, hardened like the services\n\n" + hardened + "\nExecStart=\(Self.floorBinary)\n",
            "\(Self.bareUnit).socket": Self.socketUnit(Self.bareUnit),
            "\(Self.bareUnit).service": "[Unit]\nDescription=C cold-start floor, bare unit\n\n[Service]\nType=notify\nExecStart=\(Self.floorBinary)\n",
        ]
        for (name, text) in units {
            try text.write(toFile: container.root + "/etc/systemd/system/" + name, atomically: true, encoding: .utf8)
        }
        // Many starts in a row are the point here: lift systemd's start rate limit, and its
        // socket's trigger limit (20 activations in 2 s would fail the socket).
        for unit in Self.services.map({ "screentime-\($0)" }) + [Self.floorUnit, Self.bareUnit] {
            for (kind, setting) in [("service", "[Unit]\nStartLimitIntervalSec=0\n"), ("socket", "[Socket]\nTriggerLimitIntervalSec=0\n")] {
                let dropIn = container.root + "/etc/systemd/system/\(unit).\(kind).d"
                try files.createDirectory(atPath: dropIn, withIntermediateDirectories: true)
                try setting.write(toFile: dropIn + "/bench.conf", atomically: true, encoding: .utf8)
            }
        }
        let sockets = Self.services.map { "screentime-\($0).socket" }.joined(separator: " ")
        let started = try await container.shell("systemctl daemon-reload && systemctl restart \(sockets) && systemctl start \(Self.floorUnit).socket \(Self.bareUnit).socket")
        guard started.status == 0 else { throw BenchError("cannot start the C service's sockets: \(started.stderr)") }
    }

    /// deploy/install.sh from `binDirectory`: the one program and its names (links), or
    /// separate programs; the services it restarted are stopped again.
    static func installPrograms(into container: Container, binDirectory: String) async throws {
        let files = FileManager.default
        // install.sh installs the gateway too.
        let names = Self.services.map { Self.executable(of: $0) } + ["screentime-gatewayd", "screentimectl"]
        for name in names where !files.isExecutableFile(atPath: binDirectory + "/" + name) {
            throw BenchError("\(binDirectory)/\(name) is missing: build first (deploy/build-release.sh screentime-bench), or pass --bin-dir")
        }
        let program = files.isExecutableFile(atPath: binDirectory + "/screentime") ? ["screentime"] : []
        let staged = try await container.reach(binDirectory, entries: names + program)
        let checkout = try await container.reach(Locations.packageRoot, entries: ["deploy", "docs", "systemd"])
        let installed = try await container.run([checkout + "/deploy/install.sh", "--bin-dir", staged])
        guard installed.status == 0 else { throw BenchError("deploy/install.sh failed in the container: \(installed.stdout)\(installed.stderr)") }
        let stopped = try await container.run(["systemctl", "stop"] + Self.services.map { "screentime-\($0).service" } + ["screentime-gateway.service"])
        guard stopped.status == 0 else { throw BenchError("cannot stop the services: \(stopped.stderr)") }
    }

    static func socketUnit(_ name: String) -> String {
        "[Unit]\nDescription=\(name) socket\n\n[Socket]\nListenStream=/run/screentime-bench/\(name).sock\nSocketMode=0666\nRemoveOnStop=yes\n"
    }

    static func socketPath(_ unit: String) -> String {
        unit.hasPrefix("screentime-cfloor") ? "/run/screentime-bench/\(unit).sock" : "/run/screentime/\(unit.dropFirst("screentime-".count)).sock"
    }

    /// Stops the service (the socket stays with systemd), then times the first reply.
    static func coldStarts(of unit: String, in container: Container, rounds: Int) async throws -> Samples {
        var samples = Samples()
        let socket = container.hostPath(Self.socketPath(unit))
        for _ in 0..<rounds {
            let stopped = try await container.run("systemctl", "stop", "\(unit).service")
            guard stopped.status == 0 else { throw BenchError("systemctl stop \(unit) failed: \(stopped.stderr)") }
            do {
                samples.add(try FirstReply.time(socket: socket))
            } catch {
                // Why the service did not answer: its last lines in the journal.
                let journal = try? await container.run("journalctl", "--unit=\(unit).service", "--lines=30", "--no-pager", "--output=short-iso")
                throw BenchError("\(unit): \(error)\n\(journal?.stdout ?? "")")
            }
        }
        return samples
    }

    struct Memory {
        var resident: Double
        var proportional: Double
        var anonymous: Double
    }

    /// Rss, Pss and Anonymous of the service's main process (`/proc/PID/smaps_rollup`), in MiB.
    static func memory(of unit: String, in container: Container) async throws -> Memory {
        let pid = try await container.property("MainPID", of: "\(unit).service")
        let rollup = try await container.run("cat", "/proc/\(pid)/smaps_rollup")
        func field(_ name: String) throws -> Double {
            guard let line = rollup.stdout.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }),
                  let kib = line.split(separator: " ").compactMap({ Double($0) }).first
            else { throw BenchError("no \(name) for \(unit) (pid \(pid)): \(rollup.stderr)") }
            return kib / 1024
        }
        return Memory(resident: try field("Rss"), proportional: try field("Pss"), anonymous: try field("Anonymous"))
    }
}

/// One connection, one `rpc.ping`, one reply, with blocking calls: nothing of a runtime in
/// the measured path.
enum FirstReply {
    static func time(socket path: String) throws -> Duration {
        let started = ContinuousClock.now
        let fd = try BlockingFrames.connect(path)
        defer { close(fd) }
        try BlockingFrames.send(fd, Array(#"{"id":1,"method":"rpc.ping"}"#.utf8))
        let reply = try BlockingFrames.receive(fd)
        let elapsed = ContinuousClock.now - started
        guard String(decoding: reply, as: UTF8.self).contains("\"result\"") else {
            throw BenchError("\(path) answered with an error: \(String(decoding: reply, as: UTF8.self))")
        }
        return elapsed
    }
}

/// Length-prefixed frames over a Unix socket with blocking calls.
enum BlockingFrames {
    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw BenchError("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw BenchError("cannot connect to \(path): \(reason)")
        }
        return fd
    }

    static func send(_ fd: Int32, _ body: [UInt8]) throws {
        let frame = withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + body
        guard frame.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == frame.count else {
            throw BenchError("cannot send a frame: \(String(cString: strerror(errno)))")
        }
    }

    static func receive(_ fd: Int32) throws -> [UInt8] {
        var header = [UInt8](repeating: 0, count: 4)
        try Self.readFully(fd, &header)
        var reply = [UInt8](repeating: 0, count: Int(UInt32(bigEndian: header.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })))
        try Self.readFully(fd, &reply)
        return reply
    }

    private static func readFully(_ fd: Int32, _ buffer: inout [UInt8]) throws {
        var done = 0
        while done < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BenchError("the connection closed before the reply") }
            done += count
        }
    }
}
