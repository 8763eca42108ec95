import Foundation
import RPCClient
import RPCCore

/// The whole server at rest, as a home server holds it between a family's uses: the five
/// services started afresh, each answering one request, then their proportional set sizes
/// added up (PSS counts a page that several processes map once among them: the one program's
/// code is paid once), beside the C floor server's in the same run. The services are the
/// one program the package ships (the names beside this executable, links to `screentime`),
/// whatever `--bin-dir` the rest of the benchmark uses.
enum StackMemory {
    static let services = [("screentime-stored", "store"), ("screentime-pairingd", "pairing"), ("screentime-pushd", "push"),
                           ("screentime-aggregatord", "aggregator"), ("screentime-gatewayd", "gateway")]

    static func figures(services bench: BenchServices, c: CFloor) async throws -> [Figure] {
        let runtime = bench.work + "/stack"
        try FileManager.default.createDirectory(atPath: runtime + "/state", withIntermediateDirectories: true)
        var pids: [String: Int32] = [:]
        var gateway: LaunchedService?
        for (binary, name) in Self.services {
            var arguments = ["--runtime-dir", runtime, "--state-dir", runtime + "/state"]
            if name == "gateway" { arguments += ["--listen", "127.0.0.1:0", "--host", "localhost"] }
            let service = try bench.launch(binary, arguments, from: Locations.binDirectory)
            pids[name] = service.process.processIdentifier
            if name == "gateway" { gateway = service }
        }
        // One request each: rpc.ping on the four services' sockets, /healthz over TLS on
        // the gateway's port (the gateway serves no local socket).
        for (_, name) in Self.services where name != "gateway" {
            let client = RPCClient(configuration: ClientConfiguration(socketPath: runtime + "/\(name).sock", callTimeout: .seconds(60), connectTimeout: .seconds(30)))
            _ = try await client.call("rpc.ping")
            await client.close()
        }
        if let gateway {
            let port = try GatewayBenchmark.port(try await GatewayBenchmark.endpoint(work: runtime, gateway: gateway))
            let status = try CFloor.run("/usr/bin/curl", ["-skf", "-o", "/dev/null", "--max-time", "30", "https://127.0.0.1:\(port)/healthz"])
            guard status == 0 else { throw BenchError("the gateway did not answer /healthz (curl exited \(status))") }
        }
        var total = 0.0
        var figures: [Figure] = []
        for (_, name) in Self.services {
            let pss = try Self.pss(pids[name]!)
            total += pss
            figures.append(Figure(name: "  \(name): idle PSS after one request", value: pss, unit: "MiB"))
        }
        let floor = try FloorServer.with([c.binary, "server", bench.work + "/pss-floor.sock", "100"]) { try Self.pss($0.processIdentifier) }
        figures.insert(Figure(name: "the whole stack idle (5 services, one request each): PSS", value: total, unit: "MiB",
                              comparison: "C floor server PSS", comparisonValue: floor, ratio: total / floor,
                              target: "≤ 64 MiB", met: total <= 64), at: 0)
        return figures
    }

    /// `Pss:` of /proc/PID/smaps_rollup, in MiB.
    static func pss(_ pid: Int32) throws -> Double {
        let rollup = try String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)
        guard let line = rollup.split(separator: "\n").first(where: { $0.hasPrefix("Pss:") }),
              let kibibytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { throw BenchError("no Pss in /proc/\(pid)/smaps_rollup") }
        return kibibytes / 1024
    }
}
