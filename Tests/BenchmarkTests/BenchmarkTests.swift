import Foundation
import Testing
import TestSupport

/// The benchmark command in quick mode: every benchmark still runs and the report is
/// written. No figure is asserted: shared machines are noisy.
@Suite("screentime-bench all --quick: every benchmark runs; BENCHMARKS.md, JSON and SVG are written")
struct BenchmarkTests {
    @Test("a quick run of every benchmark (cold start is run by the system tests) writes the report")
    func quickRun() async throws {
        let out = TemporaryDirectory()
        let binaries = (Binaries.path("screentime-stored") as NSString).deletingLastPathComponent
        let run = try await runCommand(Binaries.path("screentime-bench"),
                                       ["all", "--quick", "--repeat", "1", "--skip", "coldstart", "--out-dir", out.path, "--bin-dir", binaries],
                                       timeout: .seconds(900))
        #expect(run.status == 0, "\(run.stdout.suffix(3000))\(run.stderr.suffix(2000))")
        let markdown = (try? String(contentsOfFile: out.file("BENCHMARKS.md"), encoding: .utf8)) ?? ""
        for section in ["## Targets", "## store", "## pairing", "## push", "## gateway", "## kit", "## aggregator", "## wake", "## redis", "## postgres", "## coldstart"] {
            #expect(markdown.contains(section), "\(section) in BENCHMARKS.md")
        }
        #expect(!markdown.contains("Skipped: redis"), "redis-server and redis-tools must be installed (.ci/run installs them)")
        #expect(!markdown.contains("Skipped: PostgreSQL"), "postgresql must be installed (.ci/run installs it)")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out.file("benchmarks.json")))) as? [String: Any]
        let benchmarks = json?["benchmarks"] as? [[String: Any]] ?? []
        #expect(benchmarks.count == 10)
        for benchmark in benchmarks where benchmark["skipped"] == nil {
            #expect((benchmark["runs"] as? [[Any]])?.first?.isEmpty == false, "\(benchmark["name"] ?? "?") has figures")
        }
        #expect(((try? String(contentsOfFile: out.file("benchmarks.svg"), encoding: .utf8)) ?? "").hasPrefix("<svg"))

        // Every benchmark left out, the earlier results reused: the report is the same figures.
        let again = TemporaryDirectory()
        let skips = ["store", "pairing", "push", "gateway", "kit", "aggregator", "wake", "redis", "postgres", "coldstart"].flatMap { ["--skip", $0] }
        let rerun = try await runCommand(Binaries.path("screentime-bench"),
                                         ["all", "--quick", "--repeat", "1", "--out-dir", again.path, "--reuse", out.file("benchmarks.json")] + skips,
                                         timeout: .seconds(60))
        #expect(rerun.status == 0, "\(rerun.stdout.suffix(2000))\(rerun.stderr.suffix(2000))")
        let reused = (try? String(contentsOfFile: again.file("BENCHMARKS.md"), encoding: .utf8)) ?? ""
        #expect(reused.contains("From the run of"))
        #expect(reused.contains("store.fetch of 1 record (C client), p50"))
        #expect(reused.contains("## coldstart\n\nSkipped: left out (--skip)."), "no earlier coldstart result to reuse")
    }
}

/// The PostgreSQL benchmark's harness: it starts its own server (as nobody when run as
/// root), runs pgbench against it and leaves no server behind. Without PostgreSQL the
/// benchmark fails, and so does this test.
@Suite("screentime-bench postgres --quick: PostgreSQL started, measured by pgbench, stopped")
struct PostgresBenchmarkTests {
    @Test("a quick run measures the store beside PostgreSQL and leaves no PostgreSQL process")
    func quickRun() async throws {
        let work = TemporaryDirectory()
        let binaries = (Binaries.path("screentime-stored") as NSString).deletingLastPathComponent
        let json = work.file("figures.json")
        let run = try await runCommand(Binaries.path("screentime-bench"),
                                       ["postgres", "--quick", "--records", "2000", "--json", json, "--work-dir", work.file("run"), "--bin-dir", binaries],
                                       timeout: .seconds(300))
        #expect(run.status == 0, "PostgreSQL 15 and pgbench must be installed (.ci/run installs postgresql): \(run.stdout.suffix(3000))\(run.stderr.suffix(2000))")
        let figures = (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json)))) as? [[String: Any]] ?? []
        for comparison in ["PostgreSQL INSERT, 1 client", "PostgreSQL INSERT, 32 clients", "PostgreSQL prepared point SELECT p50"] {
            let figure = figures.first { ($0["comparison"] as? String)?.hasPrefix(comparison) == true }
            #expect((figure?["comparisonValue"] as? Double).map { $0 > 0 } == true, "\(comparison) measured: \(figure ?? [:])")
        }
        // The server shut down cleanly, and no process of it is left.
        let log = (try? String(contentsOfFile: work.file("run/postgres/server.log"), encoding: .utf8)) ?? ""
        #expect(log.contains("database system is shut down"), "\(log.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: work.file("run/postgres/data/postmaster.pid")))
        // The server names its data directory; its backends work in it.
        let left = try FileManager.default.contentsOfDirectory(atPath: "/proc").filter { $0.allSatisfy(\.isNumber) }.filter { pid in
            let commandLine = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
            let directory = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd")) ?? ""
            return String(decoding: commandLine, as: UTF8.self).contains(work.file("run")) || directory.hasPrefix(work.file("run"))
        }
        #expect(left.isEmpty, "processes left running: \(left)")
    }
}

/// `--profile`: perf samples a benchmark's hottest phase and its top frames reach the report.
@Suite("screentime-bench all --profile: the hottest phase profiled, its top frames in BENCHMARKS.md",
       .enabled(if: PerfCheck.unavailable == nil, "PROFILE TEST NOT RUN: \(PerfCheck.unavailable ?? "")"))
struct ProfileTests {
    @Test("a profiled quick run of the pairing benchmark records its phase and writes the frames")
    func profiledRun() async throws {
        let out = TemporaryDirectory()
        let binaries = (Binaries.path("screentime-stored") as NSString).deletingLastPathComponent
        let others = ["store", "push", "gateway", "kit", "aggregator", "wake", "redis", "postgres", "coldstart"].flatMap { ["--skip", $0] }
        let run = try await runCommand(Binaries.path("screentime-bench"),
                                       ["all", "--quick", "--repeat", "1", "--profile", "--out-dir", out.path, "--bin-dir", binaries] + others,
                                       timeout: .seconds(300))
        #expect(run.status == 0, "\(run.stdout.suffix(3000))\(run.stderr.suffix(2000))")
        let markdown = (try? String(contentsOfFile: out.file("BENCHMARKS.md"), encoding: .utf8)) ?? ""
        #expect(markdown.contains("Where the time goes: pairing 40 devices"), "\(markdown.suffix(2000))")
        #expect(markdown.contains("| Self | Process | Function |"))
        let report = (try? String(contentsOfFile: out.file("profiles/pairing-pairing-40-devices.txt"), encoding: .utf8)) ?? ""
        #expect(report.contains("## With callees"), "\(report.prefix(1000))")
        // Samples were taken, and of the services, not only of the kernel.
        #expect(report.contains("screentime-pairingd") || report.contains("screentime-stored"), "\(report.prefix(2000))")
    }
}

/// Whether perf can sample here (installed, and allowed to open a cpu-clock event).
enum PerfCheck {
    static let unavailable: String? = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/perf") else { return "perf is missing (apt-get install linux-perf; .ci/run installs it)" }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("perf-check-\(getpid()).data").path
        defer { try? FileManager.default.removeItem(atPath: data) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/perf")
        process.arguments = ["record", "-q", "-e", "cpu-clock", "-o", data, "--", "/bin/true"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return "perf cannot be started" }
        process.waitUntilExit()
        return process.terminationStatus == 0 ? nil : "perf cannot record a cpu-clock event here (kernel.perf_event_paranoid, or a seccomp profile)"
    }()
}
