// `screentime`: the one program the package ships. The four services, the gateway and
// screentimectl are names it answers to (symbolic links to it), as busybox and systemd's own
// tools do: one copy of the Swift runtime and Foundation on disk instead of six
// (docs/architecture.md, "One program, six names"). Each name runs exactly the command its
// own binary runs in the development build, with the same --help and manual page.
import AdminCommands
import AggregatorDaemon
import ArgumentParser
import GatewayDaemon
import PairingDaemon
import PushDaemon
import ServerVersion
import StoreDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The names `screentime` answers to, and the command each one runs.
let programs: [(name: String, command: any AsyncParsableCommand.Type)] = [
    ("screentimectl", ScreenTimeCtl.self),
    ("screentime-stored", StoreService.self),
    ("screentime-pairingd", PairingService.self),
    ("screentime-pushd", PushService.self),
    ("screentime-aggregatord", AggregatorService.self),
    ("screentime-gatewayd", GatewayCommand.self),
]

func usage() -> String {
    let names = programs.map { "  \($0.name.padding(toLength: 24, withPad: " ", startingAt: 0))\($0.command.configuration.abstract)" }
    return """
        Usage: screentime NAME [ARGUMENTS...]
               NAME [ARGUMENTS...]   (a link to screentime named NAME)

        The ScreenTime Rewards server in one program; NAME is one of:
        \(names.joined(separator: "\n"))

        `screentime NAME --help` (or `NAME --help`) describes each one.
        """
}

func printError(_ message: String) {
    let line = message + "\n"
    _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
}

/// Runs `command` as its own binary would (its `@main`): in an async function, where the
/// async `main` is the one chosen (top-level code would pick the synchronous one).
func run<Command: AsyncParsableCommand>(_ command: Command.Type, _ arguments: [String]) async {
    await command.main(arguments)
}

let arguments = CommandLine.arguments
let invokedAs = arguments.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
if let program = programs.first(where: { $0.name == invokedAs }) {
    await run(program.command, Array(arguments.dropFirst()))
} else if arguments.count > 1, let program = programs.first(where: { $0.name == arguments[1] }) {
    await run(program.command, Array(arguments.dropFirst(2)))
} else {
    switch arguments.dropFirst().first {
    case "-h", "--help", "help":
        print(usage())
    case "--version":
        print(ServerVersion.current)
    case nil:
        printError(usage())
        exit(64)
    case let name?:
        printError("screentime: \(name) is not one of its programs\n\n\(usage())")
        exit(64)
    }
}
