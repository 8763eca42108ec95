import ArgumentParser
import Foundation
import RPCClient
import RPCCore
import StoreAPI

/// What a self-hoster would run instead: Redis over a Unix socket, measured by
/// `redis-benchmark` in the same run as the store. `store.fetch` of one record beside
/// `GET`; a durable one-record `store.modify` beside `SET`, with Redis not persisting at
/// all and with `appendfsync always` (an fsync before each reply, as the store's
/// guarantee), at 1 and 50 clients.
struct RedisBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redis",
        abstract: "Benchmarks the store beside Redis over a Unix socket: fetch vs GET, durable saves vs SET (no persistence, and appendfsync always), 1 and 50 clients.",
        discussion: "Needs redis-server and redis-benchmark (Debian: redis-server, redis-tools; Benchmarks/run installs them)."
    )

    @Option(help: "Seconds of each run.")
    var seconds: Double = 5

    @OptionGroup var common: CommonOptions

    func run() async throws {
        for tool in ["redis-server", "redis-benchmark"] where Redis.path(tool) == nil {
            throw BenchError("\(tool) is not installed (apt-get install redis-server redis-tools, or run Benchmarks/run)")
        }
        let seconds = self.common.quick ? 1 : self.seconds
        let services = try BenchServices(self.common)
        defer { services.stop() }
        let work = services.work
        try services.launch("screentime-stored")
        let socket = services.socket("store")
        let admin = try await StoreBenchmark.benchFamily(services.client("store", callTimeout: .seconds(60)))
        let record = StoreBenchmark.usage(0)
        _ = try await admin.call(StoreMethods.modify, ModifyParams(family: "bench", zone: "data", saves: [record]))
        // Redis values as large as the store's record on the wire.
        let valueBytes = try RPCJSON.makeEncoder().encode(record.fields).count

        let volatile = try Redis(work: work, name: "volatile", arguments: ["--save", "", "--appendonly", "no"])
        defer { volatile.stop() }
        let always = try Redis(work: work, name: "always", arguments: ["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
        defer { always.stop() }

        var figures: [Figure] = []
        let fetchRate = try await Self.fetches(socket: socket, seconds: seconds)
        let getRate = try volatile.benchmark("get", clients: 1, valueBytes: valueBytes, seconds: seconds)
        figures.append(Figure(name: "store.fetch, 1 client", value: fetchRate, unit: "requests/s", comparison: "Redis GET, 1 client", comparisonValue: getRate,
                              ratio: fetchRate / getRate, target: "≥ 1x", met: fetchRate >= getRate))
        for clients in [1, 50] {
            let (saveRate, _) = try await StoreBenchmark.durableSaves(socket: socket, clients: clients, seconds: seconds)
            let fsynced = try always.benchmark("set", clients: clients, valueBytes: valueBytes, seconds: seconds)
            let plain = try volatile.benchmark("set", clients: clients, valueBytes: valueBytes, seconds: seconds)
            let label = "\(clients) client\(clients == 1 ? "" : "s")"
            figures.append(Figure(name: "durable store.modify of 1 record, \(label)", value: saveRate, unit: "saves/s",
                                  comparison: "Redis SET appendfsync always, \(label)", comparisonValue: fsynced, ratio: saveRate / fsynced,
                                  target: clients == 50 ? "≥ 1x" : nil, met: clients == 50 ? saveRate >= fsynced : nil))
            figures.append(Figure(name: "  Redis SET without persistence, \(label)", value: plain, unit: "sets/s"))
        }
        Report.print("The store beside Redis \(Redis.version) (\(valueBytes)-byte values, \(Report.format(seconds)) s runs\(self.common.quick ? ", quick mode" : ""))", figures)
        if let json = self.common.json { try Report.writeJSON(figures, to: json) }
    }

    /// `store.fetch` of one record by name, one call at a time on one connection.
    static func fetches(socket: String, seconds: Double) async throws -> Double {
        let client = RPCClient(configuration: ClientConfiguration(socketPath: socket))
        let params = FetchParams(family: "bench", zone: "data", recordNames: ["r0"])
        for _ in 0..<200 { _ = try await client.call(StoreMethods.fetch, params) }  // warm-up
        let started = ContinuousClock.now
        let deadline = started + .seconds(seconds)
        var count = 0
        while ContinuousClock.now < deadline {
            _ = try await client.call(StoreMethods.fetch, params)
            count += 1
        }
        await client.close()
        return Double(count) / (ContinuousClock.now - started).seconds
    }
}

/// A redis-server on a Unix socket in the work directory, stopped with the benchmark.
final class Redis {
    let socket: String
    let process = Process()

    init(work: String, name: String, arguments: [String]) throws {
        let directory = work + "/redis-\(name)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.socket = directory + "/redis.sock"
        self.process.executableURL = URL(fileURLWithPath: Redis.path("redis-server")!)
        self.process.arguments = ["--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700", "--dir", directory, "--daemonize", "no",
                                  "--logfile", directory + "/redis.log"] + arguments
        try Interruption.run(self.process)
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: self.socket) {
            guard Date() < deadline, self.process.isRunning else { throw BenchError("redis-server did not start; see \(directory)/redis.log") }
            usleep(20_000)
        }
        say("redis-server (\(name)) pid \(self.process.processIdentifier)")
    }

    /// Operations per second of `redis-benchmark -t TEST` for about `seconds`: a short
    /// calibration run sizes the measured one.
    func benchmark(_ test: String, clients: Int, valueBytes: Int, seconds: Double) throws -> Double {
        let calibration = try self.run(test, clients: clients, valueBytes: valueBytes, requests: max(1000, clients * 20))
        return try self.run(test, clients: clients, valueBytes: valueBytes, requests: max(clients * 20, Int(calibration * seconds)))
    }

    private func run(_ test: String, clients: Int, valueBytes: Int, requests: Int) throws -> Double {
        let (status, text) = try Tools.output(Redis.path("redis-benchmark")!, [
            "-s", self.socket, "-t", test, "-c", "\(clients)", "-n", "\(requests)", "-d", "\(valueBytes)", "-r", "100000", "--csv",
        ])
        // "test","rps","avg_latency_ms",…  then  "SET","81234.56",…
        let lines = text.split(separator: "\n")
        guard status == 0, lines.count >= 2,
              let rps = Double(lines[1].split(separator: ",").dropFirst().first?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) ?? "")
        else { throw BenchError("redis-benchmark -t \(test) failed: \(text)") }
        return rps
    }

    func stop() { Interruption.kill(self.process) }

    static func path(_ tool: String) -> String? { Tools.path(tool) }

    static var version: String {
        guard let text = try? Tools.output(Self.path("redis-server") ?? "/usr/bin/redis-server", ["--version"]).text else { return "?" }
        return text.split(separator: " ").first { $0.hasPrefix("v=") }.map { String($0.dropFirst(2)) } ?? "?"
    }
}
