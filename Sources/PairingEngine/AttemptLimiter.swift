import Foundation
import Logging
import RPCCore
import Synchronization

/// Counts wrong pairing secrets in a sliding window per family, and refuses further
/// attempts for a family (`limit_exceeded`) while it is over its limit.
///
/// There is no limit over all families together: the secrets are 128-bit, so no number of
/// guesses finds one, and such a limit would give anyone who can reach the service a
/// switch that stops every family from pairing (docs/architecture.md, "Pairing's limits").
///
/// An attempt counts from the moment it begins (``begin(family:)``), before its secret is
/// checked, and is taken back only once it turns out not to be a wrong guess: so attempts
/// sent at once cannot all pass the check before any of them is counted. Wrong guesses are
/// kept in a small state file (written whole, then renamed over the old one), so that a
/// restart or an idle exit does not reset the window. Each invitation's own count (5
/// wrong, then locked) is kept in the store.
final class AttemptLimiter: Sendable {
    struct Limits: Sendable {
        var perFamily: Int
        var window: Duration
    }

    /// An attempt under way, counted until it ends.
    struct Attempt: Sendable {
        let family: String
    }

    /// A wrong guess, by wall-clock time (it must mean the same after a restart).
    struct Failure: Codable, Sendable {
        var family: String
        var at: Double
    }

    private struct Saved: Codable {
        var failures: [Failure]
    }

    private struct State {
        var failures: [Failure] = []
        var inFlight: [String: Int] = [:]
    }

    /// The state file, in the service's state directory.
    static let fileName = "pairing-attempts.json"

    private let limits: Limits
    private let file: String?
    private let logger: Logger
    private let state: Mutex<State>

    /// `file`: where the wrong guesses are kept (nil: in memory only).
    init(_ limits: Limits, file: String?, logger: Logger) {
        self.limits = limits
        self.file = file
        self.logger = logger
        var state = State()
        if let file, let data = FileManager.default.contents(atPath: file) {
            do {
                let now = Date().timeIntervalSince1970
                // A time ahead of the clock (it was set back) counts as now.
                state.failures = try RPCJSON.decode(Saved.self, from: data).failures.map { Failure(family: $0.family, at: min($0.at, now)) }
            } catch {
                logger.error("the saved pairing attempts cannot be read; starting with none", metadata: ["path": "\(file)", "error": "\(error)"])
            }
        }
        self.state = Mutex(state)
    }

    /// Counts an attempt for `family`, or throws `limit_exceeded` if the family has had too
    /// many wrong guesses lately. End it with ``failed(_:)`` or ``withdraw(_:)``.
    func begin(family: String) throws(RPCError) -> Attempt {
        let now = Date().timeIntervalSince1970
        let window = self.windowSeconds
        // The check and the count are one step: no other attempt comes in between.
        let wait: Double? = self.state.withLock { state in
            state.failures.removeAll { $0.at < now - window }
            let familyFailures = state.failures.filter { $0.family == family }
            if familyFailures.count + (state.inFlight[family] ?? 0) >= self.limits.perFamily {
                return familyFailures.first.map { $0.at + window - now } ?? 1
            }
            state.inFlight[family, default: 0] += 1
            return nil
        }
        if let wait {
            throw RPCError(.limitExceeded, "too many wrong pairing attempts; try again in \(max(1, Int(wait.rounded(.up)))) seconds")
        }
        return Attempt(family: family)
    }

    /// The attempt was a wrong guess: it stays counted for the window, on disk too. True
    /// when this guess locks the family out (it reached the limit).
    @discardableResult
    func failed(_ attempt: Attempt) -> Bool {
        let failure = Failure(family: attempt.family, at: Date().timeIntervalSince1970)
        return self.state.withLock { state in
            Self.end(attempt, &state)
            state.failures.append(failure)
            self.save(state.failures)
            return state.failures.count { $0.family == attempt.family } == self.limits.perFamily
        }
    }

    /// The attempt was not a wrong guess (the right secret, or a failure of something
    /// else): it no longer counts.
    func withdraw(_ attempt: Attempt) {
        self.state.withLock { state in Self.end(attempt, &state) }
    }

    private static func end(_ attempt: Attempt, _ state: inout State) {
        let left = (state.inFlight[attempt.family] ?? 1) - 1
        state.inFlight[attempt.family] = left > 0 ? left : nil
    }

    private var windowSeconds: Double {
        Double(self.limits.window.components.seconds) + Double(self.limits.window.components.attoseconds) / 1e18
    }

    /// Writes the failures to a temporary file, flushes it and renames it over the old one
    /// (under the lock, so that saves land in order). Rare: only wrong guesses write, and
    /// past the limits nothing is checked any more.
    private func save(_ failures: [Failure]) {
        guard let file else { return }
        let temporary = file + ".tmp"
        do {
            let data = Data(try RPCJSON.encode(Saved(failures: failures)))
            guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteUnknown)
            }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
            try handle.synchronize()
            try handle.close()
            guard rename(temporary, file) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        } catch {
            self.logger.error("cannot save the pairing attempts; the limits hold until the service restarts",
                              metadata: ["path": "\(file)", "error": "\(error)"])
        }
    }
}
