import ArgumentParser
import OptionChecks
import DevStack
import Foundation

@main
struct DevCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-dev",
        abstract: "Runs the whole ScreenTime Rewards stack locally, as systemd would, without installing anything.",
        subcommands: [Up.self, Status.self],
        defaultSubcommand: Up.self
    )
}

/// Where the stack lives: `<dir>/run` (sockets), `<dir>/state` (data).
struct StackDirectory: ParsableArguments {
    @Option(name: .customLong("dir"), help: ArgumentHelp("Directory of the stack's sockets (run/) and data (state/).", discussion: "Default: $SCREENTIME_DEV_DIR, else ./.screentime.", valueName: "dir"))
    var directory: String?

    var path: String {
        let given = self.directory ?? ProcessInfo.processInfo.environment["SCREENTIME_DEV_DIR"] ?? ".screentime"
        return URL(fileURLWithPath: given).standardizedFileURL.path
    }
    var runtime: String { self.path + "/run" }
    var state: String { self.path + "/state" }
}

struct Up: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Starts the stack: binds the five sockets (the gateway's on TCP), starts each service on its first connection, restarts it if it crashes; Ctrl-C stops everything.",
        discussion: """
            Each service gets its socket as systemd would hand it over (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID) and a \
            NOTIFY_SOCKET for its READY=1 and STATUS= lines; its log lines are printed under its name. The data stays in \
            <dir>/state across runs.
            """
    )

    @OptionGroup var directory: StackDirectory

    @Option(name: .customLong("bin-dir"), help: ArgumentHelp("Where the service binaries are.", discussion: "Default: beside this executable (swift build puts them there).", valueName: "dir"))
    var binDirectory: String?

    @Option(name: .customLong("log-level"), help: "The services' log level: trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(name: .customLong("stop-timeout"), help: ArgumentHelp("Seconds a service may take to stop on Ctrl-C before it is killed.", valueName: "seconds"))
    var stopTimeout: Double = 15

    @Option(name: .customLong("gateway-port"), help: ArgumentHelp("TCP port of the device gateway (HTTPS, WebSocket); 0 picks a free one.", valueName: "port"))
    var gatewayPort = 8443

    @Option(name: .customLong("gateway-address"), help: ArgumentHelp("IPv4 address the gateway listens on; 0.0.0.0 lets phones on the home network reach it.", valueName: "address"))
    var gatewayAddress = "127.0.0.1"

    @Option(name: .customLong("metrics-port"), help: ArgumentHelp(
        "Serve the stack's Prometheus metrics on http://127.0.0.1:PORT/metrics (the gateway's --metrics-listen; it starts with the gateway).", valueName: "port"))
    var metricsPort: Int?

    static let services = [
        ("store", "screentime-stored"), ("pairing", "screentime-pairingd"), ("push", "screentime-pushd"), ("aggregator", "screentime-aggregatord"),
        ("gateway", "screentime-gatewayd"),
    ]

    func validate() throws {
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(self.logLevel) else {
            throw ValidationError("--log-level must be trace, debug, info, notice, warning, error or critical")
        }
        try checkOption("--stop-timeout", self.stopTimeout, in: 0.1...600, "seconds")
        try checkOption("--gateway-port", self.gatewayPort, in: 0...65535)
        if let metricsPort { try checkOption("--metrics-port", metricsPort, in: 1...65535) }
    }

    func run() throws {
        let binaries = self.binDirectory ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
        let runtime = self.directory.runtime
        let state = self.directory.state
        var definitions: [Supervisor.ServiceDefinition] = []
        for (name, executable) in Self.services {
            let binary = binaries + "/" + executable
            guard FileManager.default.isExecutableFile(atPath: binary) else {
                throw ValidationError("\(binary) is missing: build the services first (swift build), or pass --bin-dir")
            }
            var arguments = ["--runtime-dir", runtime, "--state-dir", state, "--log-target", "stderr", "--log-level", self.logLevel]
            if name == "gateway", let metricsPort = self.metricsPort { arguments += ["--metrics-listen", "127.0.0.1:\(metricsPort)"] }
            definitions.append(.init(name: name, binary: binary, arguments: arguments, tcp: name == "gateway" ? (self.gatewayAddress, self.gatewayPort) : nil))
        }
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let console = Console(names: Self.services.map(\.0))
        // A socket in use or a path too long: said as it is (exit 1), without the usage text.
        let supervisor = try Supervisor(services: definitions, runtimeDirectory: runtime, console: console, stopTimeout: .seconds(self.stopTimeout))
        let port = supervisor.tcpPort(of: "gateway") ?? self.gatewayPort
        // The gateway starts on its first connection, like the others; its key, certificate
        // and endpoint file (what pairing puts in invitations) are made now.
        try Self.prepareGateway(binary: binaries + "/screentime-gatewayd", runtime: runtime, state: state, address: self.gatewayAddress, port: port)
        console.message("""
            ScreenTime Rewards stack in \(self.directory.path): sockets in run/, data in state/.
            Each service starts on the first connection to its socket. Ctrl-C stops everything.
            Point screentimectl at it (from this directory it finds it by itself):
                export SCREENTIME_RUNTIME_DIR=\(runtime)
                screentimectl call store rpc.ping
            The device gateway: https://\(self.gatewayAddress == "0.0.0.0" ? "localhost" : self.gatewayAddress):\(port) (its pin: screentimectl gateway pin)
                curl -k https://\(self.gatewayAddress == "0.0.0.0" ? "localhost" : self.gatewayAddress):\(port)/v1/info
            gateway port: \(port)
            """ + (self.metricsPort.map { "\nMetrics (once the gateway runs): curl http://127.0.0.1:\($0)/metrics" } ?? ""))
        try supervisor.run()
    }
}

extension Up {
    static func prepareGateway(binary: String, runtime: String, state: String, address: String, port: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--runtime-dir", runtime, "--state-dir", state, "--log-target", "stderr", "--log-level", "warning",
                             "--listen", "\(address):\(port)", "--init-only"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw DevError("screentime-gatewayd --init-only failed (exit \(process.terminationStatus))") }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Shows the services of a running stack: state, pid, status line.")

    @OptionGroup var directory: StackDirectory

    func run() throws {
        let file = self.directory.runtime + "/dev-status.json"
        guard let data = FileManager.default.contents(atPath: file),
              let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let services = object["services"] as? [[String: Any]]
        else {
            throw ValidationError("no stack is running in \(self.directory.path) (start one with: screentime-dev up)")
        }
        for service in services {
            let name = (service["name"] as? String ?? "?").padding(toLength: 11, withPad: " ", startingAt: 0)
            print("\(name) \(service["state"] as? String ?? "?")")
        }
    }
}
