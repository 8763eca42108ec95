import ArgumentParser
import Foundation
import RPCClient
import RPCCore
import ServerVersion
import Synchronization

public struct ScreenTimeCtl: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "screentimectl",
        abstract: "Administer a ScreenTime Rewards server, and play its parent and child devices.",
        discussion: """
            SERVICE is a service name (store, pairing, push, aggregator), whose socket is \
            <runtime-dir>/<name>.sock, or a path to a socket.

            Device mode: each --profile is a simulated device (its id, role and credential), so \
            one terminal can be a parent and another a child. It runs through ScreenTimeKit, as an \
            app does: on the local sockets, or from any machine through the gateway with \
            --server https://host:8443 --pin PIN (kept in the profile by `parent enroll` and \
            `child accept`, so later commands need neither). `screentimectl demo [--server URL]` \
            runs the whole story against a running server and prints its timings.

            Shell completions: screentimectl --generate-completion-script bash|zsh|fish.

            Exit status:
              0   success
              1   the service answered with an error (its code and message are on stderr)
              64  the command line is wrong, or the profile has the wrong role for the command
              65  the input is not valid (parameters that are not JSON, text too long for a QR code, a bad CSV)
              66  no such profile
              69  the service cannot be reached (not running, wrong socket, connection lost)
              73  an output file or a profile cannot be written (or the profile exists already)
              75  the service did not answer in time (--timeout)
              77  this device was removed from the family (its credential was revoked): pair it again
              130 interrupted (Ctrl-C)
            """,
        version: ServerVersion.current,
        subcommands: [
            StatusCommand.self, Ping.self, Describe.self, Call.self, QR.self,
            FamilyCommand.self, ParentCommand.self, ChildCommand.self, DevicesCommand.self, DeviceCommand.self,
            AppsCommand.self, CommandsCommand.self, UsageCommand.self, WatchCommand.self,
            SummaryCommand.self, BalanceCommand.self, LedgerCommand.self, ReportCommand.self, DemoCommand.self,
            AskCommand.self, RequestsCommand.self, GrantCommand.self, TakeAwayCommand.self, PauseCommand.self, ResumeCommand.self, AuditCommand.self, DowntimeCommand.self, ChoresCommand.self, DigestCommand.self,
            BackupCommand.self, RestoreCommand.self, RecomputeCommand.self, GatewayCommand.self,
        ]
    )

    public init() {}
}

/// How to reach a service; shared by every subcommand.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("runtime-dir"), help: ArgumentHelp("Directory of the service sockets.", discussion: "Default: $SCREENTIME_RUNTIME_DIR, else a stack screentime-dev up runs in this directory (.screentime/run, or $SCREENTIME_DEV_DIR/run), else /run/screentime.", valueName: "dir"))
    var runtimeDirectory: String?

    @Option(help: ArgumentHelp("Seconds to wait for an answer.", valueName: "seconds"))
    var timeout: Double = 30

    @Option(help: ArgumentHelp("A device credential to send as the request's auth token.", discussion: "Default: $SCREENTIME_TOKEN."))
    var token: String?

    @Flag(name: .long, help: "Pretty-print JSON even when stdout is not a terminal.")
    var pretty = false

    @Flag(name: .long, help: "Print compact JSON even on a terminal.")
    var compact = false

    func validate() throws {
        guard self.timeout > 0 else { throw ValidationError("--timeout must be a positive number of seconds") }
        if self.pretty && self.compact { throw ValidationError("--pretty and --compact exclude each other") }
    }

    func socketPath(for service: String) -> String {
        if service.contains("/") { return service }
        let fromEnvironment = ProcessInfo.processInfo.environment["SCREENTIME_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        let directory = self.runtimeDirectory ?? fromEnvironment ?? Self.devStack ?? "/run/screentime"
        return (directory as NSString).appendingPathComponent("\(service).sock")
    }

    /// The runtime directory of a `screentime-dev up` stack: `$SCREENTIME_DEV_DIR/run`, or
    /// `.screentime/run` here, when it holds sockets.
    static var devStack: String? {
        let base = ProcessInfo.processInfo.environment["SCREENTIME_DEV_DIR"] ?? ".screentime"
        let runtime = URL(fileURLWithPath: base).appendingPathComponent("run").standardizedFileURL.path
        return FileManager.default.fileExists(atPath: runtime + "/store.sock") ? runtime : nil
    }

    /// `atLeast`: a floor for the call timeout, for calls that take long by nature (a
    /// database's backup on an SD card).
    func client(for service: String, atLeast: Double = 0) -> RPCClient {
        let token = self.token ?? ProcessInfo.processInfo.environment["SCREENTIME_TOKEN"]
        return RPCClient(configuration: ClientConfiguration(
            socketPath: self.socketPath(for: service),
            callTimeout: .milliseconds(Int64(max(self.timeout, atLeast) * 1000)),
            connectTimeout: .milliseconds(500),
            auth: token.map(Auth.init(token:))
        ))
    }

    var prettyOutput: Bool {
        if self.pretty { return true }
        if self.compact { return false }
        return isatty(STDOUT_FILENO) == 1
    }
}

struct Ping: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check that a service answers; print its name, version, pid and uptime.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The service: a name (store, pairing, push, aggregator) or a socket path.") var service: String

    func run() async throws {
        let client = self.connection.client(for: self.service)
        let started = ContinuousClock.now
        let result = try await Output.orExit { try await client.call(Builtin.ping, Empty()) }
        let elapsed = ContinuousClock.now - started
        if self.connection.prettyOutput {
            print("\(result.service) \(result.version): pid \(result.pid), up \(Output.duration(result.uptimeSeconds)), answered in \(elapsed.formatted(.units(allowed: [.milliseconds, .microseconds], width: .narrow)))")
        } else {
            Output.print(JSONValue.object([
                "service": .string(result.service), "version": .string(result.version), "pid": .int(Int64(result.pid)),
                "uptimeSeconds": .double(result.uptimeSeconds),
            ]), pretty: false)
        }
    }
}

struct Describe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a service's methods with their parameters, results and errors (rpc.describe).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The service: a name or a socket path.") var service: String
    @Argument(help: "Only this method.") var method: String?

    func run() async throws {
        let client = self.connection.client(for: self.service)
        var params: JSONValue = [:]
        if let method { params = ["method": .string(method)] }
        let result = try await Output.orExit { try await client.call(Builtin.describe.name, params: params) }
        Output.print(result, pretty: self.connection.prettyOutput)
    }
}

struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Call any method with JSON parameters; print the result, or each reply of a stream until it ends.",
        discussion: """
            Examples:
              screentimectl call store rpc.ping
              screentimectl call test test.echo '{"message": "hi"}'
              echo '{"count": 3}' | screentimectl call test test.count -
            A stream prints one reply per line (compact) until its final reply; Ctrl-C cancels it.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The service: a name or a socket path.") var service: String
    @Argument(help: "The method, e.g. store.listZones.") var method: String
    @Argument(help: "Parameters as one JSON object, or - to read them from standard input. Default: {}.") var params: String?

    func run() async throws {
        let params = try self.readParams()
        let client = self.connection.client(for: self.service)
        let pretty = self.connection.prettyOutput
        let answered = AnswerFlag()
        let stream = Task {
            try await Output.orExit {
                do {
                    for try await event in client.stream(self.method, params: params) {
                        answered.set()
                        switch event {
                        case .item(let item): Output.print(item, pretty: pretty)
                        case .end(let end): Output.print(end, pretty: pretty)
                        }
                    }
                } catch let error as RPCError {
                    throw error
                } catch {
                    throw RPCError(.internal, "\(error)")
                }
            }
        }
        // Ctrl-C cancels the call (the service gets rpc.cancel) and exits 130.
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT)
        interrupt.setEventHandler {
            stream.cancel()
            Foundation.exit(130)
        }
        interrupt.resume()
        // --timeout bounds the wait for the first reply; a stream may then run on.
        let seconds = self.connection.timeout
        let deadline = Task {
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            if !answered.isSet {
                Output.fail("screentimectl: timeout: \(self.method) did not answer within \(seconds) s", exitCode: 75)
            }
        }
        try await stream.value
        deadline.cancel()
    }

    private func readParams() throws -> JSONValue {
        var text = self.params ?? "{}"
        if text == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
            Output.fail("screentimectl: invalid_json: the parameters are not valid JSON: \(text.prefix(200))", exitCode: 65)
        }
        guard case .object = value else {
            Output.fail("screentimectl: invalid_json: the parameters must be a JSON object, such as {\"zone\": \"default\"}", exitCode: 65)
        }
        return value
    }
}

enum Output {
    static func print(_ value: JSONValue, pretty: Bool) {
        let encoder = RPCJSON.makeEncoder(pretty: pretty)
        guard let data = try? encoder.encode(value) else { return }
        do {
            try FileHandle.standardOutput.write(contentsOf: data + Data("\n".utf8))
        } catch {
            // The reader went away (`| head`): nobody is left to print to.
            Foundation.exit(0)
        }
    }

    /// Runs a call; an error is printed as `screentimectl: CODE: message` and ends the
    /// process with the documented exit status.
    static func orExit<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as CLIError {
            fail("screentimectl: \(error)", exitCode: error.code.exitStatus)
        } catch let error as RPCError {
            var line = "screentimectl: \(error.code): \(error.message)"
            // A conflict's data is the record as it stands, for programs, and a connection
            // failure's repeats its message: the message says it for people.
            if error.code != .conflict, !error.isConnectionFailure, let data = error.data, let text = try? String(decoding: RPCJSON.makeEncoder().encode(data), as: UTF8.self) {
                line += " \(text)"
            }
            let status: Int32
            switch error.code {
            case .unavailable where error.isPermissionDenied:
                line += "\n  The server's sockets are for root and the screentime group. Run the command with sudo, or add yourself to the group (sudo adduser \(ProcessInfo.processInfo.environment["USER"] ?? "$USER") screentime) and log in again."
                status = 69
            case .unavailable where error.data?["socket"] != nil:
                line += "\n  Is the server running? Start a local one with `screentime-dev up`, or `systemctl start screentime.target`; --runtime-dir or $SCREENTIME_RUNTIME_DIR tell where its sockets are."
                status = 69
            case .timeout: status = 75
            case .cancelled: status = 130
            case .deviceRevoked:
                line += "\n  A parent removed this device from the family (or replaced it); nothing more is sent from this profile, and what it had queued is kept. To use it again, ask a parent for a new invitation (`screentimectl child invite` on theirs) and accept it: `screentimectl child accept --profile NAME 'screentime://pair?…'`."
                status = 77
            default: status = 1
            }
            if error.code == .unavailable { fail(line, exitCode: 69) }
            fail(line, exitCode: status)
        }
    }

    /// A line written at once (a pipe's reader sees it now, not when a buffer fills).
    static func line(_ text: String) {
        do {
            try FileHandle.standardOutput.write(contentsOf: Data((text + "\n").utf8))
        } catch {
            Foundation.exit(0)
        }
    }

    static func fail(_ message: String, exitCode: Int32) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        Foundation.exit(exitCode)
    }

    /// "1 batch", "3 batches": a number and its noun, agreed.
    static func count(_ number: Int, _ one: String, _ many: String) -> String {
        "\(number) \(number == 1 ? one : many)"
    }

    static func duration(_ seconds: Double) -> String {
        Duration.seconds(seconds).formatted(.units(allowed: [.days, .hours, .minutes, .seconds], width: .narrow))
    }
}

/// A flag set once from any task.
final class AnswerFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .relaxed) }
    var isSet: Bool { self.value.load(ordering: .relaxed) }
}
