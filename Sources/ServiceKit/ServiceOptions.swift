import ArgumentParser
import OptionChecks
import Foundation
import Logging
import RPCCore

/// The options every service executable accepts. Paths follow systemd's variables
/// (`$RUNTIME_DIRECTORY`, `$STATE_DIRECTORY`, `$CONFIGURATION_DIRECTORY`); a flag overrides
/// its variable; without either, the FHS defaults under /run, /var/lib and /etc apply.
public struct ServiceOptions: ParsableArguments, Sendable {
    @Option(name: .customLong("runtime-dir"), help: ArgumentHelp("Directory of the service sockets.", discussion: "Default: $RUNTIME_DIRECTORY, else /run/screentime.", valueName: "dir"))
    public var runtimeDirectory: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Directory of the service's data.", discussion: "Default: $STATE_DIRECTORY, else /var/lib/screentime.", valueName: "dir"))
    public var stateDirectory: String?

    @Option(name: .customLong("config-dir"), help: ArgumentHelp("Directory of the configuration.", discussion: "Default: $CONFIGURATION_DIRECTORY, else /etc/screentime.", valueName: "dir"))
    public var configurationDirectory: String?

    @Option(help: ArgumentHelp("Socket path to bind when not socket-activated.", discussion: "Default: <runtime-dir>/<service>.sock. Ignored when systemd passes the socket.", valueName: "path"))
    public var socket: String?

    @Option(name: .customLong("socket-mode"), help: ArgumentHelp("File mode of a socket this process binds, in octal.", valueName: "mode"))
    public var socketMode: String = "0660"

    @Option(name: .customLong("max-frame-size"), help: ArgumentHelp("Largest request frame accepted, in bytes.", valueName: "bytes"))
    public var maximumFrameSize: Int = defaultMaximumFrameSize

    @Option(name: .customLong("max-connections"), help: "Connections served at once; more are refused with limit_exceeded.")
    public var maximumConnections: Int = 1024

    @Option(name: .customLong("max-in-flight"), help: ArgumentHelp("Requests running at once per connection, streams included; more are refused with limit_exceeded.", discussion: "Unary requests never reach it: a connection reads at most 32 of them (or this many, if fewer) ahead of their replies, and the rest wait in the socket."))
    public var maximumInFlight: Int = 128

    @Option(name: .customLong("idle-timeout"), help: ArgumentHelp("Close a connection after this many seconds with nothing arriving on it and none of its requests running (a live stream is running); 0: never.", valueName: "seconds"))
    public var idleTimeoutSeconds: Double = 300

    @Option(name: .customLong("frame-timeout"), help: ArgumentHelp("Seconds a frame may take to arrive once its first byte has; then the connection gets invalid_frame and is closed.", valueName: "seconds"))
    public var frameTimeoutSeconds: Double = 10

    @Option(name: .customLong("idle-exit"), help: ArgumentHelp("Exit after this many seconds without a connection (socket activation only; systemd starts the service again on the next connection).", valueName: "seconds"))
    public var idleExitSeconds: Double?

    @Option(name: .customLong("shutdown-timeout"), help: ArgumentHelp("Seconds requests in flight may take to finish after SIGTERM.", valueName: "seconds"))
    public var shutdownTimeoutSeconds: Double = 10

    @Flag(name: .customLong("no-metrics"), help: "Count nothing for the metrics: rpc.metrics answers an empty text (the cost of counting, measured by the benchmarks).")
    public var noMetrics = false

    @Option(name: .customLong("log-level"), help: ArgumentHelp("trace, debug, info, notice, warning, error or critical.", discussion: "Default: $SCREENTIME_LOG_LEVEL, else info."))
    public var logLevel: String?

    @Option(name: .customLong("log-target"), help: "auto (the journal when stderr is connected to it, else stderr), journal or stderr.")
    public var logTarget: LogTarget = .auto

    /// Testing the watchdog only (docs/operations.md): SIGUSR2 then blocks every event loop.
    @Flag(name: .customLong("debug-wedge-on-sigusr2"), help: .hidden)
    public var debugWedgeOnSIGUSR2 = false

    public init() {}

    public mutating func validate() throws {
        guard UInt32(self.socketMode, radix: 8) != nil else {
            throw ValidationError("--socket-mode must be an octal file mode such as 0660, not \(self.socketMode)")
        }
        try checkOption("--max-frame-size", self.maximumFrameSize, in: 64...Int(UInt32.max), "bytes")
        guard self.maximumConnections > 0 else { throw ValidationError("--max-connections must be at least 1") }
        guard self.maximumInFlight > 0 else { throw ValidationError("--max-in-flight must be at least 1") }
        guard self.idleTimeoutSeconds >= 0 else { throw ValidationError("--idle-timeout must not be negative (0 turns it off)") }
        guard self.frameTimeoutSeconds > 0 else { throw ValidationError("--frame-timeout must be a positive number of seconds") }
        if let idle = self.idleExitSeconds, idle <= 0 { throw ValidationError("--idle-exit must be a positive number of seconds") }
        guard self.shutdownTimeoutSeconds >= 0 else { throw ValidationError("--shutdown-timeout must not be negative") }
        if let level = self.logLevel ?? ProcessInfo.processInfo.environment["SCREENTIME_LOG_LEVEL"], Logger.Level(rawValue: level) == nil {
            throw ValidationError("unknown log level \"\(level)\"; use trace, debug, info, notice, warning, error or critical")
        }
    }

    /// `--idle-timeout` as a duration; nil when off.
    public var idleTimeout: Duration? {
        self.idleTimeoutSeconds > 0 ? .seconds(self.idleTimeoutSeconds) : nil
    }

    /// `--frame-timeout` as a duration.
    public var frameTimeout: Duration { .seconds(self.frameTimeoutSeconds) }

    /// The log level from the flag, else `$SCREENTIME_LOG_LEVEL`, else info.
    public var resolvedLogLevel: Logger.Level {
        (self.logLevel ?? ProcessInfo.processInfo.environment["SCREENTIME_LOG_LEVEL"]).flatMap(Logger.Level.init(rawValue:)) ?? .info
    }
}

public enum LogTarget: String, ExpressibleByArgument, Sendable, CaseIterable {
    case auto
    case journal
    case stderr
}

/// The directories a service uses, resolved once at start.
public struct ServicePaths: Sendable, Hashable {
    public var runtimeDirectory: String
    public var stateDirectory: String
    public var configurationDirectory: String

    public init(options: ServiceOptions, environment: [String: String] = ProcessInfo.processInfo.environment) {
        // systemd may list several directories separated by colons; the first is ours.
        func pick(_ flag: String?, _ variable: String, _ fallback: String) -> String {
            if let flag { return flag }
            if let value = environment[variable]?.split(separator: ":").first { return String(value) }
            return fallback
        }
        self.runtimeDirectory = pick(options.runtimeDirectory, "RUNTIME_DIRECTORY", "/run/screentime")
        self.stateDirectory = pick(options.stateDirectory, "STATE_DIRECTORY", "/var/lib/screentime")
        self.configurationDirectory = pick(options.configurationDirectory, "CONFIGURATION_DIRECTORY", "/etc/screentime")
    }

    public init(runtimeDirectory: String, stateDirectory: String, configurationDirectory: String) {
        self.runtimeDirectory = runtimeDirectory
        self.stateDirectory = stateDirectory
        self.configurationDirectory = configurationDirectory
    }

    /// `<runtime-dir>/<service>.sock`: where every service's socket lives.
    public func socketPath(for service: String) -> String {
        (self.runtimeDirectory as NSString).appendingPathComponent("\(service).sock")
    }
}
