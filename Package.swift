// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

/// The products of the packages below that targets depend on, each named once.
extension Target.Dependency {
    static var asyncHTTPClient: Self { .product(name: "AsyncHTTPClient", package: "async-http-client") }
    static var grdb: Self { .product(name: "GRDB", package: "GRDB.swift") }
    static var postgresNIO: Self { .product(name: "PostgresNIO", package: "postgres-nio") }
    static var grdbSQLite: Self { .product(name: "GRDBSQLite", package: "GRDB.swift") }
    static var hummingbird: Self { .product(name: "Hummingbird", package: "hummingbird") }
    static var hummingbirdCore: Self { .product(name: "HummingbirdCore", package: "hummingbird") }
    static var hummingbirdHTTP2: Self { .product(name: "HummingbirdHTTP2", package: "hummingbird") }
    static var hummingbirdTLS: Self { .product(name: "HummingbirdTLS", package: "hummingbird") }
    static var argumentParser: Self { .product(name: "ArgumentParser", package: "swift-argument-parser") }
    static var swiftASN1: Self { .product(name: "SwiftASN1", package: "swift-asn1") }
    static var x509: Self { .product(name: "X509", package: "swift-certificates") }
    static var crypto: Self { .product(name: "Crypto", package: "swift-crypto") }
    static var httpTypes: Self { .product(name: "HTTPTypes", package: "swift-http-types") }
    static var logging: Self { .product(name: "Logging", package: "swift-log") }
    static var coreMetrics: Self { .product(name: "CoreMetrics", package: "swift-metrics") }
    static var mustache: Self { .product(name: "Mustache", package: "swift-mustache") }
    static var nioCore: Self { .product(name: "NIOCore", package: "swift-nio") }
    static var nioEmbedded: Self { .product(name: "NIOEmbedded", package: "swift-nio") }
    static var nioHTTP1: Self { .product(name: "NIOHTTP1", package: "swift-nio") }
    static var nioPosix: Self { .product(name: "NIOPosix", package: "swift-nio") }
    static var nioTLS: Self { .product(name: "NIOTLS", package: "swift-nio") }
    static var nioWebSocket: Self { .product(name: "NIOWebSocket", package: "swift-nio") }
    static var nioExtras: Self { .product(name: "NIOExtras", package: "swift-nio-extras") }
    static var nioHTTPTypes: Self { .product(name: "NIOHTTPTypes", package: "swift-nio-extras") }
    static var nioHTTPTypesHTTP1: Self { .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras") }
    static var nioSSL: Self { .product(name: "NIOSSL", package: "swift-nio-ssl") }
    static var prometheus: Self { .product(name: "Prometheus", package: "swift-prometheus") }
    static var serviceLifecycle: Self { .product(name: "ServiceLifecycle", package: "swift-service-lifecycle") }
    static var unixSignals: Self { .product(name: "UnixSignals", package: "swift-service-lifecycle") }
    static var wsClient: Self { .product(name: "WSClient", package: "swift-websocket") }
}

let package = Package(
    name: "ScreenTimeServer",
    // The kit is linked into the iPhone app (Synchronization's Mutex needs iOS 18 and macOS 15);
    // the server builds on Linux.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // The one program the package ships: the services, the gateway and screentimectl are
        // names it answers to (Sources/screentime).
        .executable(name: "screentime", targets: ["screentime"]),
        .executable(name: "screentimectl", targets: ["screentimectl"]),
        .executable(name: "screentime-stored", targets: ["screentime-stored"]),
        .executable(name: "screentime-pairingd", targets: ["screentime-pairingd"]),
        .executable(name: "screentime-pushd", targets: ["screentime-pushd"]),
        .executable(name: "screentime-aggregatord", targets: ["screentime-aggregatord"]),
        .executable(name: "screentime-bench", targets: ["screentime-bench"]),
        .executable(name: "screentime-dev", targets: ["screentime-dev"]),
        .executable(name: "screentime-gatewayd", targets: ["screentime-gatewayd"]),
        .executable(name: "screentime-relayd", targets: ["screentime-relayd"]),
        .library(name: "StoreAPI", targets: ["StoreAPI"]),
        .library(name: "PairingAPI", targets: ["PairingAPI"]),
        .library(name: "PushAPI", targets: ["PushAPI"]),
        .library(name: "AggregatorAPI", targets: ["AggregatorAPI"]),
        .library(name: "GatewayAPI", targets: ["GatewayAPI"]),
        .library(name: "RPCCore", targets: ["RPCCore"]),
        .library(name: "RPCServer", targets: ["RPCServer"]),
        .library(name: "RPCClient", targets: ["RPCClient"]),
        .library(name: "ServiceKit", targets: ["ServiceKit"]),
        .library(name: "ScreenTimeKit", targets: ["ScreenTimeKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // libsystemd, found through pkg-config (Debian: libsystemd-dev).
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // A small Swift API over libsystemd: listen fds, sd_notify, the journal.
        .target(
            name: "SystemdKit",
            dependencies: [
                "CSystemd", "LineLogging", .logging,
            ],
            swiftSettings: strict
        ),
        // The server's version, in one place (deploy/debian/changelog matches it).
        .target(name: "ServerVersion", swiftSettings: strict),
        // The wire's JSON: values, the parser of untrusted input (depth-limited), the
        // writer, the decoder into Codable types, RFC 3339 dates. No dependencies.
        .target(name: "WireJSON", swiftSettings: strict),
        // Log lines on stderr, one entry a line whatever a request put in it: the services'
        // handler off the journal, and the wake relay's.
        .target(name: "LineLogging", dependencies: [.logging], swiftSettings: strict),
        // The wire: frames, envelopes, error codes, method declarations, schemas.
        .target(
            name: "RPCCore",
            dependencies: [
                "WireJSON", .nioCore, .nioExtras,
            ],
            swiftSettings: strict
        ),
        // The server runtime: listeners, connections, dispatch, limits, shutdown.
        .target(
            name: "RPCServer",
            dependencies: [
                "RPCCore", "ServiceMetrics", "CSystemd", "SystemdKit", .nioCore, .nioPosix, .nioExtras,
                .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // The server as a whole, as its administrator sees it: which services run (from the
        // state files they write), disk, certificate, backups; the metrics of all of them.
        .target(
            name: "ServerStatus",
            dependencies: ["RPCCore", "RPCClient", "PairingAPI", "AggregatorAPI", "ServerVersion"],
            swiftSettings: strict
        ),
        // A service's metrics: swift-metrics instruments on its own Prometheus registry.
        .target(
            name: "ServiceMetrics",
            dependencies: [
                .coreMetrics, .prometheus,
            ],
            swiftSettings: strict
        ),
        // The async client used by services and by screentimectl.
        .target(
            name: "RPCClient",
            dependencies: [
                "RPCCore", .nioCore, .nioPosix, .nioExtras, .logging,
            ],
            swiftSettings: strict
        ),
        // Giving memory glibc keeps back to the system (push, the gateway).
        .target(
            name: "MemoryReturn",
            swiftSettings: strict
        ),
        // The range check of every executable's numeric options, with one wording.
        .target(
            name: "OptionChecks",
            dependencies: [.argumentParser],
            swiftSettings: strict
        ),
        // What every service executable shares: options, paths, logging, main.
        .target(
            name: "ServiceKit",
            dependencies: [
                "OptionChecks", "ServerStatus", "RPCCore", "RPCServer", "ServiceMetrics", "SystemdKit", "LineLogging",
                .argumentParser, .logging, .nioPosix, .serviceLifecycle, .unixSignals,
            ],
            swiftSettings: strict
        ),
        // The record store's wire contract: methods, records, changes, shares, credentials.
        // Shared by the store and every client of it.
        .target(
            name: "StoreAPI",
            dependencies: ["RPCCore", .crypto],
            swiftSettings: strict
        ),
        // The record store's engine: schema, SQLite through GRDB, group commit, queries,
        // change feeds, access control, maintenance; Serving/ binds it to its methods.
        .target(
            name: "RecordStore",
            dependencies: [
                "RPCCore", "ServiceMetrics", "RPCServer", "RPCClient", "ServiceKit", "StoreAPI",
                "DurableSQLite", .grdb, .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // The store's command line (screentime-stored), for its own binary and for `screentime`.
        .target(
            name: "StoreDaemon",
            dependencies: [
                "OptionChecks", "RecordStore", "ServerVersion", "ServiceKit", .argumentParser,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentime-stored",
            dependencies: ["StoreDaemon", .argumentParser],
            swiftSettings: strict
        ),
        // The pairing service's wire contract, and what both devices compute themselves:
        // the pairing URI and the short verification code.
        .target(
            name: "PairingAPI",
            dependencies: ["RPCCore", "StoreAPI", .crypto],
            swiftSettings: strict
        ),
        // The pairing service's engine: invitations, enrollment, short codes, credentials,
        // lockouts, all kept in the store. No sockets of its own.
        .target(
            name: "PairingEngine",
            dependencies: [
                "PairingAPI", "ServiceMetrics", "StoreAPI", "ServiceKit", "RPCCore", "RPCServer", "RPCClient",
                .crypto, .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // Pairing's command line (screentime-pairingd), for its own binary and for `screentime`.
        .target(
            name: "PairingDaemon",
            dependencies: [
                "OptionChecks", "PairingEngine", "ServerVersion", "ServiceKit", .argumentParser,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentime-pairingd",
            dependencies: ["PairingDaemon", .argumentParser],
            swiftSettings: strict
        ),
        // The push service's wire contract: subscriptions, notifications, listening, acks.
        .target(
            name: "PushAPI",
            dependencies: ["RPCCore", "StoreAPI", "RelayCore"],
            swiftSettings: strict
        ),
        // The push service's engine: subscriptions, fan-out of the store's changes, durable
        // per-device queues, live listeners, webhooks. No sockets of its own.
        .target(
            name: "PushEngine",
            dependencies: [
                "ServiceMetrics", "PushAPI", "MemoryReturn", "StoreAPI", "ServiceKit", "ChangeFeed",
                "DurableSQLite", "RPCCore", "RPCServer", "RPCClient", "RelayCore", "APNs", .grdb, .logging,
                .serviceLifecycle, .asyncHTTPClient, .nioSSL, .crypto,
            ],
            swiftSettings: strict
        ),
        // Push's command line (screentime-pushd), for its own binary and for `screentime`.
        .target(
            name: "PushDaemon",
            dependencies: [
                "OptionChecks", "PushEngine", "ServerVersion", "ServiceKit", .argumentParser,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentime-pushd",
            dependencies: ["PushDaemon", .argumentParser],
            swiftSettings: strict
        ),
        // SQLite opened the services' way: WAL, fsynced commits, migrations, a meta table.
        .target(
            name: "DurableSQLite",
            dependencies: [
                "CSQLiteConfig", "RPCCore", .grdb, .grdbSQLite, .logging, .nioPosix,
            ],
            swiftSettings: strict
        ),
        // Following the store's change log from a saved position, in batches, with retries;
        // the store's credentials kept from it.
        .target(
            name: "ChangeFeed",
            dependencies: [
                "StoreAPI", "RPCClient", "RPCCore",
                .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // The aggregator's wire contract.
        .target(name: "AggregatorAPI", dependencies: ["RPCCore", "StoreAPI"], swiftSettings: strict),
        // Local days, overlap, points: the counting rules, free of I/O.
        .target(name: "UsageModel", swiftSettings: strict),
        // The aggregator's engine: ingest of usage from the store's changes, daily summaries,
        // points, earned time, alerts, reports, retention. No sockets of its own.
        .target(
            name: "AggregatorEngine",
            dependencies: [
                "ServiceMetrics", "AggregatorAPI", "UsageModel", "StoreAPI", "PushAPI", "ServiceKit",
                "ChangeFeed", "DurableSQLite", "RPCCore", "RPCServer", "RPCClient", .grdb, .logging,
                .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // The aggregator's command line (screentime-aggregatord), for its own binary and for `screentime`.
        .target(
            name: "AggregatorDaemon",
            dependencies: [
                "OptionChecks", "AggregatorEngine", "ServerVersion", "ServiceKit", .argumentParser,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentime-aggregatord",
            dependencies: ["AggregatorDaemon", .argumentParser],
            swiftSettings: strict
        ),
        // libqrencode and libpng, found through pkg-config (Debian: libqrencode-dev, libpng-dev).
        .systemLibrary(name: "CQRencode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        // sqlite3_config, which is variadic (DurableSQLite turns SQLite's memory statistics off).
        .systemLibrary(name: "CSQLiteConfig", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // QR codes for pairing invitations: the symbol and its terminal, SVG and PNG renderings.
        .target(name: "QRCode", dependencies: ["CQRencode", "CPNG"], swiftSettings: strict),
        // Benchmarks: each figure beside its floor, measured in the same run.
        .executableTarget(
            name: "screentime-bench",
            dependencies: [
                "OptionChecks", "ScreenTimeKit", "APNs", "APNsStandIn", "RelayCore", "DurableSQLite",
                "RPCCore", "RPCClient", "StoreAPI", "PairingAPI", "PushAPI", "AggregatorAPI", "UsageModel",
                "ServiceKit", "SystemdContainer",
                // The PostgreSQL benchmark's server and pgbench: children with a clean signal mask.
                "ProcessSpawn", .grdb, .argumentParser,
                // The bare SwiftNIO request/reply server, a floor beside the C one.
                .nioCore, .nioPosix, .nioExtras,
                // The gateway benchmark's TLS WebSocket clients and its bare NIO TLS WebSocket echo floor.
                .nioHTTP1, .nioWebSocket, .nioSSL, .nioTLS,
            ],
            swiftSettings: strict
        ),
        // Starting child processes with only the descriptors meant for them.
        .target(name: "ProcessSpawn", swiftSettings: strict),
        // A real systemd booted in a container, for the system tests and the cold-start benchmark.
        .target(name: "SystemdContainer", dependencies: ["ProcessSpawn"], swiftSettings: strict),
        // The local stack: sockets held, services started on demand and restarted, logs.
        .target(name: "DevStack", dependencies: ["ProcessSpawn"], swiftSettings: strict),
        .executableTarget(
            name: "screentime-dev",
            dependencies: [
                "OptionChecks", "DevStack", .argumentParser,
            ],
            swiftSettings: strict
        ),
        // The gateway's own wire types: what a device's client and the gateway share.
        .target(name: "GatewayAPI", dependencies: ["RPCCore"], swiftSettings: strict),
        // The device gateway's engine: TLS and its self-signed certificate, HTTP and
        // WebSocket on Hummingbird, the relay to the services, limits. No main here.
        .target(
            name: "Gateway",
            dependencies: [
                "GatewayAPI", "EdgeLimits", "ServerStatus", "ServiceMetrics", .nioTLS, "ChangeFeed", "RPCCore", "RPCServer",
                "RPCClient", "StoreAPI", "PairingAPI", "PushAPI", "AggregatorAPI", "SystemdKit", "ServiceKit",
                // The dashboard: its pages' templates and the pairing invitation's QR code.
                "QRCode", .mustache, .hummingbird, .hummingbirdCore, .nioCore, .nioPosix, .nioHTTP1,
                .nioWebSocket, .httpTypes, .nioHTTPTypes, .nioHTTPTypesHTTP1, .nioSSL, .x509, .swiftASN1,
                .crypto, .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // What bounds a server on the internet, the gateway's and the relay's: an address's
        // key (an IPv6 /64 as one), connections per address and in all, the deadline of a
        // connection's request, and counts per key in sliding windows.
        .target(name: "EdgeLimits", dependencies: [.nioCore, .logging], swiftSettings: strict),
        // The wake relay the app's publisher runs: sealing handles, verifying wakes signed
        // with a home server's key, the APNs request and its provider token. No Linux-only
        // API: the app and the home server use its types too.
        .target(
            name: "RelayCore",
            dependencies: ["RPCCore", .crypto],
            swiftSettings: strict
        ),
        // APNs over HTTP/2 with a provider token: for the relay, and for push in direct mode.
        .target(
            name: "APNs",
            dependencies: [
                "RelayCore", .asyncHTTPClient, .nioCore, .nioSSL, .logging,
            ],
            swiftSettings: strict
        ),
        // The relay's HTTP service (Hummingbird over TLS).
        .target(
            name: "RelayServer",
            dependencies: [
                "RelayCore", "APNs", "EdgeLimits", .hummingbird, .hummingbirdCore, .hummingbirdTLS, .hummingbirdHTTP2,
                .httpTypes, .asyncHTTPClient, .nioCore, .nioSSL, .crypto, .logging, .serviceLifecycle,
                // Several copies' shared counts and seen wakes.
                .postgresNIO,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentime-relayd",
            dependencies: [
                "OptionChecks", "LineLogging", "RelayCore", "RelayServer", "ServerVersion", .argumentParser, .logging,
                .nioCore, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        // The gateway's command line (screentime-gatewayd), for its own binary and for `screentime`.
        .target(
            name: "GatewayDaemon",
            dependencies: [
                "OptionChecks", "Gateway", "ServerVersion", "RPCCore", "ServiceKit", "SystemdKit",
                .argumentParser, .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentime-gatewayd",
            dependencies: ["GatewayDaemon", .argumentParser],
            swiftSettings: strict
        ),
        // screentimectl's commands, for its own binary and for `screentime`.
        .target(
            name: "AdminCommands",
            dependencies: [
                "OptionChecks", "ServerStatus", "ProcessSpawn", "ServerVersion", "AggregatorAPI",
                "PairingAPI", "PushAPI", "StoreAPI", .crypto,
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .grdb, "QRCode", "RPCCore", "RPCClient", "ScreenTimeKit", .argumentParser, .logging,
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "screentimectl",
            dependencies: ["AdminCommands", .argumentParser],
            swiftSettings: strict
        ),
        // One program, six names: what the package installs (docs/architecture.md).
        .executableTarget(
            name: "screentime",
            dependencies: [
                "AdminCommands", "StoreDaemon", "PairingDaemon", "PushDaemon", "AggregatorDaemon", "GatewayDaemon",
                "ServerVersion", .argumentParser,
            ],
            swiftSettings: strict
        ),
        // ScreenTimeKit: the client library an app links instead of CloudKit. Transports
        // (the local Unix sockets, the gateway's pinned TLS WebSocket), typed records,
        // conflicts, the offline queue, notifications, pairing and the seeds' flows.
        // Platform-neutral: only dependencies that also build for iOS and macOS.
        .target(
            name: "ScreenTimeKit",
            dependencies: [
                "RPCCore", "RPCClient", "StoreAPI", "PairingAPI", "PushAPI", "AggregatorAPI", "GatewayAPI", "RelayCore",
                // The wake relay's one request (URLSession on Apple's platforms).
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
                .nioCore, .nioPosix, .nioSSL, .nioTLS, .nioHTTP1, .nioWebSocket, .crypto, .grdb, .logging,
            ],
            swiftSettings: strict
        ),
        // A small service used only by the integration tests.
        .executableTarget(
            name: "screentime-testd",
            dependencies: [
                "ServiceKit", "RPCCore", "RPCServer", .argumentParser, .logging,
            ],
            path: "Tests/Fixtures/TestService",
            swiftSettings: strict
        ),
        .testTarget(
            name: "RPCCoreTests",
            dependencies: [
                "RPCCore", "LineLogging", "SystemdKit", "ServiceKit", .nioCore, .nioEmbedded, .logging,
            ],
            swiftSettings: strict
        ),
        // What the integration tests share: starting real processes, raw sockets, temp dirs.
        .target(
            name: "TestSupport",
            dependencies: ["RPCCore", "ProcessSpawn"],
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        // Runs a service in the test's process: its engine, its real server on a temporary
        // socket, its background services, in a ServiceGroup.
        .target(
            name: "ServiceHarness",
            dependencies: [
                "TestSupport", "RPCCore", "RPCServer", "RPCClient", "ServiceKit",
                .logging, .nioPosix, .serviceLifecycle,
            ],
            path: "Tests/ServiceHarness",
            swiftSettings: strict
        ),
        // What every service declares, serves, describes and documents, checked together.
        .testTarget(
            name: "ContractTests",
            dependencies: [
                "ServiceHarness", "TestSupport", "RPCCore", "RPCServer", "RPCClient", "ServiceKit",
                "StoreAPI", "PairingAPI", "PushAPI", "AggregatorAPI",
                "RecordStore", "PairingEngine", "PushEngine", "AggregatorEngine",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RPCIntegrationTests",
            dependencies: [
                "TestSupport", "RPCCore", "RPCClient", "screentime-testd", "screentimectl", .nioCore,
                .nioPosix,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StoreTests",
            dependencies: [
                "TestSupport", "RPCCore", "RPCClient", "StoreAPI", "ChangeFeed",
                // The logic tests run the store's engine in process; the process tests, its binary.
                "RecordStore", "DurableSQLite", "ServiceHarness", "screentime-stored", "screentimectl", .grdb,
                .logging,
            ],
            swiftSettings: strict
        ),
        // What the tests of the services that need the whole stack share: a store, pairing
        // (and push) in one directory, a family bootstrapped through the real flow.
        .target(
            name: "StackSupport",
            dependencies: ["TestSupport", "ServiceHarness", "RPCCore", "RPCClient", "StoreAPI", "PairingAPI", "PushAPI", "RecordStore", "PairingEngine"],
            path: "Tests/StackSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "PairingTests",
            dependencies: [
                "TestSupport", "StackSupport", "RPCCore", "RPCClient", "StoreAPI", "PairingAPI",
                "screentime-stored", "screentime-pairingd", "screentimectl",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "AggregatorTests",
            dependencies: [
                "TestSupport", "StackSupport", "ServiceHarness", "AggregatorEngine", "PushEngine", "RPCCore",
                "RPCClient", "StoreAPI", "AggregatorAPI", "PushAPI", "UsageModel", "screentime-stored",
                "screentime-pairingd", "screentime-pushd", "screentime-aggregatord", .grdb,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PushTests",
            dependencies: [
                "TestSupport", "WakeTestSupport", .crypto, "StackSupport", "ServiceHarness", "PushEngine",
                "RPCCore", "RPCClient", "StoreAPI", "PushAPI", "screentime-stored", "screentime-pairingd",
                "screentime-pushd", .nioCore, .nioPosix, .nioHTTP1,
                // Writes a push database as an earlier version left it.
                .grdb,
                // Reads push's position in the store's log as push saves it.
                "DurableSQLite",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "DevStackTests",
            dependencies: [
                "TestSupport", "StackSupport", "RPCCore", "RPCClient", "StoreAPI", .grdb, "screentime-dev",
                "screentimectl", "screentime-stored", "screentime-pairingd", "screentime-pushd",
                "screentime-aggregatord", "screentime-gatewayd",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BenchmarkTests",
            dependencies: [
                "TestSupport", "screentime-bench", "screentime-stored", "screentime-pairingd",
                "screentime-pushd", "screentime-aggregatord",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "TestSupport", "StackSupport", "RPCCore", "RPCClient", "StoreAPI", .grdb, "screentime-dev",
                "screentimectl", "screentime-stored", "screentime-pairingd", "screentime-pushd",
                "screentime-aggregatord", "screentime-gatewayd",
            ],
            swiftSettings: strict
        ),
        .target(
            // APNs on this machine (HTTP/2 over TLS, checking what Apple checks) and a CA of
            // its own: for the wake tests and the wake benchmark.
            name: "APNsStandIn",
            dependencies: [
                "RelayCore", "WireJSON", .x509, .swiftASN1, .hummingbird, .hummingbirdHTTP2, .httpTypes,
                .nioCore, .nioSSL, .crypto, .logging,
            ],
            swiftSettings: strict
        ),
        .target(
            // The stand-in as tests use it (its pushes as arrivals), and a relay in the
            // test's own process.
            name: "WakeTestSupport",
            dependencies: [
                "TestSupport", "APNsStandIn", "RelayCore", "RelayServer", .asyncHTTPClient, .nioCore, .nioSSL,
                .crypto, .logging,
            ],
            path: "Tests/WakeTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "RelayTests",
            dependencies: [
                "TestSupport", "WakeTestSupport", "APNs", "EdgeLimits", "RelayCore", "RelayServer", "screentime-relayd",
                .asyncHTTPClient, .nioCore, .nioSSL, .crypto, .logging, .serviceLifecycle,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "TestSupport", "ServerStatus", "ServiceMetrics", "ProcessSpawn", "StackSupport",
                "ServiceHarness", "ServiceKit", "PushEngine", "AggregatorEngine", "EdgeLimits", "Gateway", "GatewayAPI",
                "RPCCore", "RPCClient", "StoreAPI", "PairingAPI", "PushAPI", "screentime-stored",
                "screentime-pairingd", "screentime-pushd", "screentime-aggregatord", "screentime-gatewayd",
                "screentimectl",
                // The dashboard's browser tests: JSON over HTTP to chromedriver.
                .asyncHTTPClient, .wsClient, .httpTypes, .nioWebSocket, .nioCore, .nioPosix, .nioHTTP1,
                .nioEmbedded, .nioSSL, .logging,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ScreenTimeKitTests",
            dependencies: [
                "ScreenTimeKit", "WakeTestSupport", "TestSupport", "StackSupport", "RPCCore", "RPCClient",
                "StoreAPI", "PairingAPI", "PushAPI", "AggregatorAPI", "screentime-stored",
                "screentime-pairingd", "screentime-pushd", "screentime-aggregatord", "screentime-gatewayd",
                "screentimectl", "ProcessSpawn", .nioCore, .nioPosix, .nioSSL, .nioTLS, .crypto, .grdb,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SystemdTests",
            dependencies: [
                "ServerVersion", "TestSupport", "SystemdContainer", "RPCCore", "RPCClient", "StoreAPI",
                "screentime-stored", "screentime-pairingd", "screentime-pushd", "screentime-aggregatord",
                "screentime-gatewayd", "screentimectl", "screentime", "screentime-bench",
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
