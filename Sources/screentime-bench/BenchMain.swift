import ArgumentParser

@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-bench",
        abstract: "Benchmarks of the ScreenTime Rewards services, each figure printed beside its floor measured in the same run.",
        discussion: "Build first with deploy/build-release.sh screentime-bench (as Benchmarks/run does): the benchmarks start the binaries beside this one, built as the package ships them (release, Swift runtime linked in statically).",
        subcommands: [StoreBenchmark.self, PairingBenchmark.self, PushBenchmark.self, GatewayBenchmark.self, KitBenchmark.self, AggregatorBenchmark.self, WakeBenchmark.self, ColdStartBenchmark.self, RedisBenchmark.self, PostgresBenchmark.self, AllBenchmarks.self, NIOFloorServer.self, NIOWebSocketEchoServer.self]
    )
}
