import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Synchronization
import SystemdContainer
import Testing
import TestSupport

/// The services installed with deploy/install.sh under a real systemd, checked through
/// systemctl and journalctl inside the container. Skipped, with the reason in the test
/// output, where a container cannot boot (not root, no systemd-nspawn).
/// Set once, read from any task.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { self.value.withLock { $0 = true } }
    var isSet: Bool { self.value.withLock { $0 } }
}

@Suite("Under a real systemd: install, socket activation, journal, restarts, watchdog, permissions",
       .serialized, .enabled(if: Container.unavailable == nil, "SYSTEM TESTS NOT RUN: \(Container.unavailable ?? "")"))
struct SystemdTests {
    static let services = ["store", "pairing", "push", "aggregator"]

    @Test("after install the four sockets listen and no service runs; the first request starts each, active (running) with its STATUS= line; units verify clean and score at most 1.0")
    func installAndActivate() async throws {
        try await Container.with { container in
            try await container.install()
            for service in Self.services {
                #expect(try await container.property("ActiveState", of: "screentime-\(service).socket") == "active", "\(service).socket")
                #expect(try await container.property("ActiveState", of: "screentime-\(service).service") == "inactive", "\(service) waits")
            }
            for service in Self.services {
                let ping = try await container.client(service).call("rpc.ping")
                #expect(ping["service"]?.stringValue == service)
                try await container.waitUntil("\(service) reports its status") {
                    try await container.property("StatusText", of: "screentime-\(service).service").hasPrefix("Serving")
                }
                #expect(try await container.property("SubState", of: "screentime-\(service).service") == "running")
            }
            let verify = try await container.shell("systemd-analyze verify /etc/systemd/system/screentime-*.service /etc/systemd/system/screentime-*.socket /etc/systemd/system/screentime.target")
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")
            for service in Self.services {
                let security = try await container.run("systemd-analyze", "security", "--no-pager", "screentime-\(service).service")
                let score = security.stdout.split(separator: "\n").last.flatMap { line in
                    line.split(separator: " ").compactMap { Double($0) }.first
                }
                #expect(score.map { $0 <= 1.0 } == true, "screentime-\(service).service: \(security.stdout.split(separator: "\n").last ?? "?")")
            }
        }
    }

    @Test("journalctl -u shows the request log with its structured fields, and a failed request its error code")
    func journal() async throws {
        try await Container.with { container in
            try await container.install()
            // Every request is logged at debug; refusals at the default level too.
            try await container.shell("echo 'OPTIONS=--log-level debug' > /etc/screentime/store.env")
            let store = container.client("store")
            _ = try await store.call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
            let refusal = await #expect(throws: RPCError.self) { _ = try await store.call(StoreMethods.createZone, ZoneParams(family: "nobody", zone: "z")) }
            let code = try #require(refusal?.code.rawValue)
            try await container.waitUntil("the failure is in the journal") {
                try await container.run("journalctl", "-u", "screentime-store", "-o", "json", "--no-pager").stdout.contains("\"ERROR_CODE\":\"\(code)\"")
            }
            let lines = try await container.run("journalctl", "-u", "screentime-store", "-o", "json", "--no-pager").stdout.split(separator: "\n")
            let records = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let served = records.first { $0["METHOD"] as? String == "store.createFamily" && $0["MESSAGE"] as? String == "request served" }
            #expect(served?["REQUEST_ID"] != nil && served?["DURATION_US"] != nil && served?["_SYSTEMD_UNIT"] as? String == "screentime-store.service",
                    "\(String(describing: served))")
            let failed = records.first { $0["ERROR_CODE"] as? String == code }
            #expect(failed?["METHOD"] as? String == "store.createZone" && failed?["PRIORITY"] as? String == "6", "\(String(describing: failed))")
            let filtered = try await container.run("journalctl", "-u", "screentime-store", "ERROR_CODE=\(code)", "-o", "cat", "--no-pager")
            #expect(filtered.stdout.contains("request failed"))
        }
    }

    @Test("kill -9 while a client keeps writing: systemd restarts the store, no connection is refused, no acknowledged write is lost; a hung service is killed by the watchdog")
    func restartsAndWatchdog() async throws {
        try await Container.with { container in
            try await container.install()
            let store = container.client("store")
            _ = try await store.call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
            let first = try await container.property("MainPID", of: "screentime-store.service")
            let writer = Task {
                var acknowledged: [String] = []
                var failures: [String] = []
                for index in 0..<300 {
                    do {
                        _ = try await store.call(StoreMethods.createZone, ZoneParams(family: "smith", zone: "zone-\(index)"))
                        acknowledged.append("zone-\(index)")
                    } catch {
                        failures.append("\(error)")
                    }
                }
                return (acknowledged, failures)
            }
            try await Task.sleep(for: .milliseconds(200))
            try await container.run("kill", "-9", first)
            let (acknowledged, failures) = await writer.value
            #expect(failures.count <= 1 && !failures.contains { $0.contains("refused") || $0.contains("cannot connect") }, "\(failures)")
            let zones = Set(try await store.call(StoreMethods.listZones, FamilyParams(family: "smith")).zones.map(\.name))
            #expect(acknowledged.count >= 299 && acknowledged.allSatisfy(zones.contains))
            #expect(try await container.property("MainPID", of: "screentime-store.service") != first)
            #expect(try await container.property("NRestarts", of: "screentime-store.service") == "1")

            // A hung service: stopped with SIGSTOP, it stops pinging; the watchdog kills it.
            try await container.shell("mkdir -p /etc/systemd/system/screentime-pairing.service.d && printf '[Service]\\nWatchdogSec=3\\n' > /etc/systemd/system/screentime-pairing.service.d/watchdog.conf && systemctl daemon-reload")
            _ = try await container.client("pairing").call("rpc.ping")
            let hung = try await container.property("MainPID", of: "screentime-pairing.service")
            try await container.run("kill", "-STOP", hung)
            try await container.waitUntil("the watchdog restarts pairing", timeout: .seconds(30)) {
                let pid = try await container.property("MainPID", of: "screentime-pairing.service")
                return pid != hung && pid != "0"
            }
            #expect(try await container.run("journalctl", "-u", "screentime-pairing", "--no-pager").stdout.contains("Watchdog timeout"))
            #expect(try await container.client("pairing").call("rpc.ping")["service"] == "pairing")
        }
    }

    @Test("a service whose event loops are wedged, its process running on, stops its watchdog keep-alives: systemd kills it and starts it again")
    func wedgedEventLoops() async throws {
        try await Container.with { container in
            try await container.install()
            // --debug-wedge-on-sigusr2 (hidden, for this test): SIGUSR2 blocks every event loop.
            try await container.shell("""
                echo 'OPTIONS=--debug-wedge-on-sigusr2' > /etc/screentime/aggregator.env
                mkdir -p /etc/systemd/system/screentime-aggregator.service.d
                printf '[Service]\\nWatchdogSec=3\\n' > /etc/systemd/system/screentime-aggregator.service.d/watchdog.conf
                systemctl daemon-reload
                """)
            #expect(try await container.client("aggregator").call("rpc.ping")["service"] == "aggregator")
            let wedged = try await container.property("MainPID", of: "screentime-aggregator.service")
            try await container.run("kill", "-USR2", wedged)
            // The signal is handled a moment later: the service says when its loops are wedged.
            try await container.waitUntil("the aggregator wedging its event loops", timeout: .seconds(10)) {
                try await container.run("journalctl", "-u", "screentime-aggregator", "--no-pager").stdout.contains("blocking every event loop")
            }
            // Wedged, not stopped: the process still runs (state S, not T as after SIGSTOP),
            // and answers nothing.
            await expectError(.timeout) { _ = try await container.client("aggregator", timeout: .seconds(1)).call("rpc.ping") }
            let state = try await container.run("grep", "^State:", "/proc/\(wedged)/status").stdout
            #expect(!state.contains("T (stopped)") && !state.isEmpty, "\(state)")
            try await container.waitUntil("the watchdog restarts the aggregator", timeout: .seconds(30)) {
                let pid = try await container.property("MainPID", of: "screentime-aggregator.service")
                return pid != wedged && pid != "0"
            }
            let journal = try await container.run("journalctl", "-u", "screentime-aggregator", "--no-pager").stdout
            #expect(journal.contains("Watchdog timeout") && journal.contains("blocking every event loop"), "\(journal.suffix(2000))")
            #expect(try await container.client("aggregator").call("rpc.ping")["service"] == "aggregator")
        }
    }

    @Test("systemctl stop while clients keep writing: the requests in flight finish and are answered, the stop is clean, and the next request activates the store again")
    func stopWithRequestsInFlight() async throws {
        try await Container.with { container in
            try await container.install()
            let store = container.client("store")
            _ = try await store.call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
            _ = try await store.call(StoreMethods.createZone, ZoneParams(family: "smith", zone: "usage"))

            // Writers on their own connections, each sending atomic 200-record batches one
            // after the other, so the store is always busy with some when the stop comes
            // (each writer spends most of its time on its own side, building a batch and
            // reading the reply: with 12, the store was seen with none in flight).
            let stopped = Flag()
            let writers = (0..<24).map { writer in
                Task {
                    let client = container.client("store")
                    var outcomes: [(names: [String], error: RPCError?)] = []
                    var batch = 0
                    // Keep writing until a while after the stop, across the re-activation.
                    var afterStop = 0
                    while afterStop < 3 {
                        let names = (0..<200).map { "w\(writer)-b\(batch)-\($0)" }
                        let saves = names.map { name in
                            RecordSave(recordType: "UsageRecord", recordName: name, fields: [
                                "logicalID": "org.khan", "deviceID": "tablet", "category": "learning", "totalSeconds": .int(60),
                                "sessionStart": .date(Date(timeIntervalSince1970: 1_790_000_000)), "sessionEnd": .date(Date(timeIntervalSince1970: 1_790_000_060)),
                            ])
                        }
                        do {
                            _ = try await client.call(StoreMethods.modify, ModifyParams(family: "smith", zone: "usage", saves: saves, savePolicy: .allKeys, atomic: true))
                            outcomes.append((names, nil))
                        } catch let error as RPCError {
                            outcomes.append((names, error))
                        }
                        batch += 1
                        if stopped.isSet { afterStop += 1 }
                    }
                    return outcomes
                }
            }
            try await Task.sleep(for: .milliseconds(500))
            let pid = try await container.property("MainPID", of: "screentime-store.service")
            try await container.run("systemctl", "stop", "screentime-store.service")
            stopped.set()
            var outcomes: [(names: [String], error: RPCError?)] = []
            for writer in writers {
                let written = try await writer.value
                #expect(written.last?.error == nil, "writes go on once the store is activated again")
                outcomes += written
            }

            // The stop was a graceful one, with requests in flight that it waited for. (The
            // journal may take a moment to show the last lines on a busy machine.)
            var journal: [[String: Any]] = []
            for _ in 0..<25 {
                journal = try await container.run("journalctl", "_PID=\(pid)", "-o", "json", "--no-pager").stdout.split(separator: "\n")
                    .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                if journal.contains(where: { $0["MESSAGE"] as? String == "stopped" }) { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            let stopping = journal.first { $0["MESSAGE"] as? String == "stopping" }
            #expect((stopping?["IN_FLIGHT"] as? String).flatMap(Int.init).map { $0 > 0 } == true, "\(String(describing: stopping))")
            #expect(journal.contains { $0["MESSAGE"] as? String == "stopped" },
                    "the store logged its clean stop; its last lines: \(journal.suffix(8).map { $0["MESSAGE"] as? String ?? "?" })")
            #expect(!journal.contains { ($0["MESSAGE"] as? String)?.contains("cancelling") == true })

            // Every answered batch is stored; a batch that got no answer (sent on a connection
            // the stopping store no longer read) left nothing behind, so a retry is safe.
            let failed = outcomes.filter { $0.error != nil }
            #expect(failed.allSatisfy { $0.error?.code == .unavailable }, "\(failed.map { $0.error.map(String.init(describing:)) ?? "" })")
            for outcome in outcomes {
                let fetched = try await store.call(StoreMethods.fetch, FetchParams(family: "smith", zone: "usage", recordNames: outcome.names))
                if outcome.error == nil {
                    #expect(fetched.missing.isEmpty, "an acknowledged batch lost \(fetched.missing.count) records")
                } else {
                    #expect(fetched.records.isEmpty, "an unanswered batch was applied (\(fetched.records.count) records): its reply was lost")
                }
            }
            #expect(try await container.property("MainPID", of: "screentime-store.service") != pid)
        }
    }

    @Test("a user outside the screentime group is refused by the socket's permissions; a member gets in")
    func permissions() async throws {
        try await Container.with { container in
            try await container.install()
            let outsider = try await container.run("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/local/bin/screentimectl", "call", "store", "rpc.ping")
            #expect(outsider.status != 0 && outsider.stderr.lowercased().contains("permission denied"), "\(outsider)")
            let member = try await container.run("setpriv", "--reuid=nobody", "--regid=screentime", "--clear-groups", "/usr/local/bin/screentimectl", "call", "store", "rpc.ping")
            #expect(member.status == 0, "\(member)")

            // Idle exit, then the next connection activates it again.
            try await container.shell("echo 'OPTIONS=--idle-exit 1' > /etc/screentime/pairing.env && systemctl restart screentime-pairing.service")
            try await container.waitUntil("pairing exits when idle") {
                try await container.property("ActiveState", of: "screentime-pairing.service") == "inactive"
            }
            #expect(try await container.property("Result", of: "screentime-pairing.service") == "success")
            #expect(try await container.property("ActiveState", of: "screentime-pairing.socket") == "active")
            #expect(try await container.client("pairing").call("rpc.ping")["service"] == "pairing")
            #expect(try await container.property("ActiveState", of: "screentime-pairing.service") == "active")
        }
    }

    @Test("uninstall keeps the data, install again (an upgrade) finds it; --purge removes it")
    func uninstallAndUpgrade() async throws {
        try await Container.with { container in
            try await container.install()
            _ = try await container.client("store").call(StoreMethods.createFamily, CreateFamilyParams(family: "smith"))
            #expect(try await container.run("\(try await container.checkout())/deploy/uninstall.sh").status == 0)
            #expect(try await container.property("LoadState", of: "screentime-store.socket") == "not-found")
            try await container.install()
            let families = try await container.client("store").call(StoreMethods.listFamilies, Empty()).families.map(\.family)
            #expect(families == ["smith"])
            #expect(try await container.run("\(try await container.checkout())/deploy/uninstall.sh", "--purge").status == 0)
            #expect(try await container.run("test", "-e", "/var/lib/screentime").status != 0)
        }
    }

    @Test("the cold-start benchmark boots its own container and reports a cold first reply and idle memory for every service (quick run; no thresholds)")
    func coldStartBenchmark() async throws {
        let output = TemporaryDirectory()
        let run = try await runCommand(Binaries.path("screentime-bench"), ["coldstart", "--quick", "--json", output.file("cold.json"), "--bin-dir", Container.binaries],
                                       timeout: .seconds(300))
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let figures = try JSONDecoder().decode([[String: JSONValue]].self, from: Data(contentsOf: URL(fileURLWithPath: output.file("cold.json"))))
        for service in Self.services {
            for name in ["\(service): cold first reply p50", "\(service): idle RSS"] {
                let value = figures.first { $0["name"]?.stringValue == name }?["value"]
                #expect(value.flatMap(\.doubleValue).map { $0 > 0 && $0.isFinite } == true, "\(name): \(String(describing: value))")
            }
        }
    }
}
