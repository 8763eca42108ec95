import Foundation
import Logging
import RPCCore
import Synchronization

/// Counts wrong pairing secrets in a sliding window per family and source address (an
/// IPv6 /64 as one, as the gateway gives it; a caller on this machine is one address), and
/// refuses further attempts (`limit_exceeded`) from an address over its limit for that
/// family, or for a family over its ceiling from all addresses together.
///
/// A family's count is per address so that no one can keep a family from pairing from
/// one address: the secrets are 128-bit, so no number of guesses finds one, and a count
/// per family alone was a switch anyone knowing the family's id could hold down. The
/// ceiling is high enough that only many addresses together reach it; there is no limit
/// over all families (docs/architecture.md, "Pairing's limits"). A family that does not
/// exist is counted alike, so the answers tell nothing of which families exist; its
/// wrong guesses are kept in memory only.
///
/// An attempt counts from the moment it begins (``begin(family:)``), before its secret is
/// checked, and is taken back only once it turns out not to be a wrong guess: so attempts
/// sent at once cannot all pass the check before any of them is counted. Wrong guesses are
/// kept in a small state file (written whole, then renamed over the old one), so that a
/// restart or an idle exit does not reset the window. Each invitation's own count (5
/// wrong, then locked) is kept in the store.
final class AttemptLimiter: Sendable {
    struct Limits: Sendable {
        /// Wrong guesses for one family from one address.
        var perAddress: Int
        /// Wrong guesses for one family from every address together.
        var perFamily: Int
        var window: Duration
    }

    /// An attempt under way, counted until it ends.
    struct Attempt: Sendable {
        let family: String
        let from: String
        var key: String { Self.key(family, self.from) }
        static func key(_ family: String, _ from: String) -> String { family + " " + from }
    }

    /// A wrong guess, by wall-clock time (it must mean the same after a restart).
    struct Failure: Codable, Sendable {
        var family: String
        /// The address it came from (absent in files written before addresses were kept).
        var from: String?
        var at: Double
        /// Kept in the state file: a guess at a family that exists (one at a family that
        /// does not is held in memory only).
        var kept = true

        enum CodingKeys: String, CodingKey { case family, from, at }
    }

    /// Wrong guesses held at most (the oldest go first): memory stays bounded whatever
    /// names are guessed at.
    static let capacity = 100_000

    private struct Saved: Codable {
        var failures: [Failure]
    }

    private struct State {
        var failures: [Failure] = []
        /// Attempts under way, by family and by family and address.
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

    /// Counts an attempt for `family` from `from` (nil: this machine), or throws
    /// `limit_exceeded` if that address has had too many wrong guesses for the family
    /// lately, or the family from every address. End it with ``failed(_:kept:)`` or
    /// ``withdraw(_:)``.
    func begin(family: String, from: String?) throws(RPCError) -> Attempt {
        let attempt = Attempt(family: family, from: from ?? "local")
        let now = Date().timeIntervalSince1970
        let window = self.windowSeconds
        // The check and the count are one step: no other attempt comes in between.
        let wait: Double? = self.state.withLock { state in
            if let oldest = state.failures.first, oldest.at < now - window { state.failures.removeAll { $0.at < now - window } }
            let familyFailures = state.failures.filter { $0.family == family }
            let fromAddress = familyFailures.filter { ($0.from ?? "local") == attempt.from }
            if fromAddress.count + (state.inFlight[attempt.key] ?? 0) >= self.limits.perAddress {
                return fromAddress.first.map { $0.at + window - now } ?? 1
            }
            if familyFailures.count + (state.inFlight[family] ?? 0) >= self.limits.perFamily {
                return familyFailures.first.map { $0.at + window - now } ?? 1
            }
            state.inFlight[family, default: 0] += 1
            state.inFlight[attempt.key, default: 0] += 1
            return nil
        }
        if let wait {
            throw RPCError(.limitExceeded, "too many wrong pairing attempts; try again in \(max(1, Int(wait.rounded(.up)))) seconds")
        }
        return attempt
    }

    /// The attempt was a wrong guess: it stays counted for the window, and on disk too when
    /// `kept` (a family that exists). True when this guess reaches a limit.
    @discardableResult
    func failed(_ attempt: Attempt, kept: Bool) -> Bool {
        let failure = Failure(family: attempt.family, from: attempt.from, at: Date().timeIntervalSince1970, kept: kept)
        return self.state.withLock { state in
            Self.end(attempt, &state)
            state.failures.append(failure)
            if state.failures.count > Self.capacity { state.failures.removeFirst(state.failures.count - Self.capacity) }
            if kept { self.save(state.failures.filter(\.kept)) }
            let family = state.failures.filter { $0.family == attempt.family }
            return family.count == self.limits.perFamily || family.count { ($0.from ?? "local") == attempt.from } == self.limits.perAddress
        }
    }

    /// The attempt was not a wrong guess (the right secret, or a failure of something
    /// else): it no longer counts.
    func withdraw(_ attempt: Attempt) {
        self.state.withLock { state in Self.end(attempt, &state) }
    }

    private static func end(_ attempt: Attempt, _ state: inout State) {
        for key in [attempt.family, attempt.key] {
            let left = (state.inFlight[key] ?? 1) - 1
            state.inFlight[key] = left > 0 ? left : nil
        }
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
