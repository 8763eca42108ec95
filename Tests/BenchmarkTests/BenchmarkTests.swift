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
        for section in ["## Targets", "## store", "## pairing", "## push", "## gateway", "## aggregator", "## redis", "## coldstart"] {
            #expect(markdown.contains(section), "\(section) in BENCHMARKS.md")
        }
        #expect(!markdown.contains("Skipped: redis"), "redis-server and redis-tools must be installed (.ci/run installs them)")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out.file("benchmarks.json")))) as? [String: Any]
        let benchmarks = json?["benchmarks"] as? [[String: Any]] ?? []
        #expect(benchmarks.count == 7)
        for benchmark in benchmarks where benchmark["skipped"] == nil {
            #expect((benchmark["runs"] as? [[Any]])?.first?.isEmpty == false, "\(benchmark["name"] ?? "?") has figures")
        }
        #expect(((try? String(contentsOfFile: out.file("benchmarks.svg"), encoding: .utf8)) ?? "").hasPrefix("<svg"))

        // Every benchmark left out, the earlier results reused: the report is the same figures.
        let again = TemporaryDirectory()
        let skips = ["store", "pairing", "push", "gateway", "aggregator", "redis", "coldstart"].flatMap { ["--skip", $0] }
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
