import Foundation

/// The server's systemd units, as a restore stops and starts them.
enum ServerUnits {
    /// The services, in deploy/services' order.
    static let services = ["store", "pairing", "push", "aggregator", "gateway"]
    static let sockets = Self.services.map { "screentime-\($0).socket" }
    static let serviceUnits = Self.services.map { "screentime-\($0).service" }
    static let backupTimer = "screentime-backup.timer"

    enum Failure: Error, CustomStringConvertible {
        case systemctl(String)
        var description: String { switch self { case .systemctl(let what): what } }
    }

    /// Whether systemd runs this machine (sd_booted(3)'s test).
    static var systemdIsRunning: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: "/run/systemd/system", isDirectory: &isDirectory) && isDirectory.boolValue
    }

    static func isActive(_ unit: String) -> Bool {
        (try? SystemCommand.run("/usr/bin/systemctl", ["is-active", "--quiet", unit]).status) == 0
    }

    /// Sockets first, then the services: nothing can start one again meanwhile.
    static func stopAll(alsoTimer: Bool) throws {
        try Self.systemctl(["stop"] + (alsoTimer ? [Self.backupTimer] : []) + Self.sockets + Self.serviceUnits)
    }

    /// The sockets (the target wants them all), and the gateway at once: it writes its
    /// endpoint (the URLs and pin that pairing puts in invitations) when it starts.
    static func startAll(alsoTimer: Bool) throws {
        try Self.systemctl(["start", "screentime.target"] + Self.sockets)
        try Self.systemctl(["start", "screentime-gateway.service"])
        if alsoTimer { try Self.systemctl(["start", Self.backupTimer]) }
    }

    private static func systemctl(_ arguments: [String]) throws {
        let outcome: SystemCommand.Outcome
        do {
            outcome = try SystemCommand.run("/usr/bin/systemctl", arguments)
        } catch {
            throw Failure.systemctl("cannot run /usr/bin/systemctl: \(error)")
        }
        guard outcome.status == 0 else { throw Failure.systemctl("systemctl \(arguments.joined(separator: " ")) failed: \(outcome.firstError)") }
    }
}
