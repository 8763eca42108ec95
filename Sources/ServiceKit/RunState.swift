import Foundation
import Glibc

/// What a service says of itself in `<runtime-dir>/status/<service>.json`: running (and
/// since when), exited when idle, stopped, or failed, with how many times it started and
/// restarted after a failure. Written when it starts and when it ends, so that the gateway's
/// metrics endpoint, the dashboard and `screentimectl status` know which services run
/// without connecting to the others' sockets (a connection would start an idle service).
/// The runtime directory is a tmpfs: the files go with a reboot.
public struct ServiceRunState: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, Hashable {
        case running
        /// Exited after its idle time (socket activation): systemd starts it on the next
        /// connection. Healthy.
        case idleExited = "idle-exited"
        /// Stopped by its manager (SIGTERM).
        case stopped
        /// Ended with an error, or gone without a word (killed, crashed).
        case failed
    }

    public var service: String
    public var version: String
    public var pid: Int32
    public var state: State
    /// Seconds since 1970.
    public var startedAt: Double
    public var endedAt: Double?
    /// Starts since the server's boot, and those of them that followed a failure.
    public var starts: Int
    public var restarts: Int
    /// Why it failed, when it could say.
    public var error: String?

    /// `<runtime-dir>/status`.
    public static func directory(runtimeDirectory: String) -> String {
        (runtimeDirectory as NSString).appendingPathComponent("status")
    }

    static func path(service: String, runtimeDirectory: String) -> String {
        (directory(runtimeDirectory: runtimeDirectory) as NSString).appendingPathComponent("\(service).json")
    }

    /// The service's file as it reads now; a file that says running for a process that is
    /// gone says failed. Nil: the service has not started since the boot (or writes none).
    public static func read(service: String, runtimeDirectory: String) -> ServiceRunState? {
        guard let data = FileManager.default.contents(atPath: path(service: service, runtimeDirectory: runtimeDirectory)),
              var state = try? JSONDecoder().decode(ServiceRunState.self, from: data) else { return nil }
        if state.state == .running, !Self.alive(state.pid) {
            state.state = .failed
            state.error = state.error ?? "the process ended without a word (killed or crashed)"
        }
        return state
    }

    /// Whether a process with that id exists (of any user: EPERM says it does).
    static func alive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }
}

/// Writes the service's ``ServiceRunState`` (what ``ServiceMain`` does at start and end).
/// A runtime directory it may not write to leaves the state unsaid, never the service down.
final class RunStateFile: Sendable {
    let path: String
    let started: ServiceRunState

    init(service: String, version: String, runtimeDirectory: String) {
        self.path = ServiceRunState.path(service: service, runtimeDirectory: runtimeDirectory)
        let before = ServiceRunState.read(service: service, runtimeDirectory: runtimeDirectory)
        self.started = ServiceRunState(
            service: service, version: version, pid: getpid(), state: .running, startedAt: Date().timeIntervalSince1970,
            endedAt: nil, starts: (before?.starts ?? 0) + 1, restarts: (before?.restarts ?? 0) + (before?.state == .failed ? 1 : 0), error: nil)
    }

    /// Returns the error that kept it from writing, if any.
    @discardableResult
    func write(_ state: ServiceRunState) -> (any Error)? {
        do {
            let directory = (self.path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let data = try encoder.encode(state)
            // Readable by the administrator's screentimectl (the services' umask is 0077).
            let temporary = self.path + ".\(getpid()).tmp"
            guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o644]) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: temporary])
            }
            chmod(temporary, 0o644)
            guard rename(temporary, self.path) == 0 else {
                let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                unlink(temporary)
                throw error
            }
            return nil
        } catch {
            return error
        }
    }

    func ended(_ state: ServiceRunState.State, error: String? = nil) {
        var ended = self.started
        ended.state = state
        ended.endedAt = Date().timeIntervalSince1970
        ended.error = error
        self.write(ended)
    }
}
