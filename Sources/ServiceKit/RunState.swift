import Foundation
import Glibc
import RPCCore
import ServerStatus
import Synchronization

/// Writes the service's ``ServiceRunState`` (what ``ServiceMain`` does at start and end).
/// A runtime directory it may not write to leaves the state unsaid, never the service down.
public final class RunStateFile: Sendable {
    public let path: String
    public let started: ServiceRunState
    /// The details last written (``note(_:)``).
    private let details = Mutex<[String: Int]?>(nil)

    public init(service: String, version: String, runtimeDirectory: String) {
        self.path = ServiceRunState.path(service: service, runtimeDirectory: runtimeDirectory)
        let before = ServiceRunState.read(service: service, runtimeDirectory: runtimeDirectory)
        self.started = ServiceRunState(
            service: service, version: version, pid: getpid(), state: .running, startedAt: Date().timeIntervalSince1970,
            endedAt: nil, starts: (before?.starts ?? 0) + 1, restarts: (before?.restarts ?? 0) + (before?.state == .failed ? 1 : 0), error: nil)
    }

    /// Returns the error that kept it from writing, if any.
    @discardableResult
    public func write(_ state: ServiceRunState) -> (any Error)? {
        do {
            let directory = (self.path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            let data = Data(try RPCJSON.encodeSorted(state))
            // Readable by the administrator's screentimectl (the services' umask is 0077).
            let temporary = self.path + ".\(getpid()).tmp"
            guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o644]) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: temporary])
            }
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

    /// Writes the service's details of the present (the gateway's devices connected), when
    /// they changed.
    public func note(_ details: [String: Int]) {
        let changed = self.details.withLock { known in
            guard known != details else { return false }
            known = details
            return true
        }
        guard changed else { return }
        var state = self.started
        state.details = details
        self.write(state)
    }

    public func ended(_ state: ServiceRunState.State, error: String? = nil) {
        var ended = self.started
        ended.details = self.details.withLock { $0 }
        ended.state = state
        ended.endedAt = Date().timeIntervalSince1970
        ended.error = error
        self.write(ended)
    }
}
