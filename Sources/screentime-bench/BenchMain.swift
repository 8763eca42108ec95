import ArgumentParser

@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-bench",
        abstract: "Benchmarks of the ScreenTime Rewards services, each figure printed beside its floor measured in the same run.",
        discussion: "Build in release mode first (swift build -c release); the benchmarks start the release binaries beside this one.",
        subcommands: [StoreBenchmark.self, PairingBenchmark.self, PushBenchmark.self, GatewayBenchmark.self, AggregatorBenchmark.self, ColdStartBenchmark.self, RedisBenchmark.self, AllBenchmarks.self, NIOFloorServer.self, NIOWebSocketEchoServer.self]
    )
}
