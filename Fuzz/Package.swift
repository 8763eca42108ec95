// swift-tools-version:6.0
// The coverage-guided fuzz target, a package of its own so that the main package's
// `swift build` and `swift test` never see it: it is built only by `Fuzz/run`, with
// `-sanitize=fuzzer,address`, into its own scratch directory.
import PackageDescription

let package = Package(
    name: "ScreenTimeFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ScreenTimeServer", path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // Frames, request envelopes and every declared method's params, through the
        // code the services run; started through libFuzzer's LLVMFuzzerRunDriver.
        .executableTarget(
            name: "screentime-fuzz",
            dependencies: [
                .product(name: "RPCCore", package: "ScreenTimeServer"),
                .product(name: "StoreAPI", package: "ScreenTimeServer"),
                .product(name: "PairingAPI", package: "ScreenTimeServer"),
                .product(name: "PushAPI", package: "ScreenTimeServer"),
                .product(name: "AggregatorAPI", package: "ScreenTimeServer"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
