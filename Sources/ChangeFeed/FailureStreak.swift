import Logging
import RPCCore
import Synchronization

/// How loud to be about a failed call to the store. The first `unavailable` after the
/// store answered is what a restart looks like (systemd stopping it for an upgrade or a
/// `systemctl restart`, or starting it again after a crash; the next try activates it
/// again): `info`. Any other error, a second failure in a row, and a failure before the
/// store ever answered, are `warning`s.
public final class FailureStreak: Sendable {
    private struct State {
        var answered = false
        var failures = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// The store answered: a streak of failures, if any, is over.
    public func reset() {
        self.state.withLock { $0 = State(answered: true, failures: 0) }
    }

    /// Counts a failure; the level to log it at.
    public func level(after error: any Error) -> Logger.Level {
        let first = self.state.withLock { state in
            state.failures += 1
            return state.answered && state.failures == 1
        }
        guard first, let error = error as? RPCError, error.code == .unavailable else { return .warning }
        return .info
    }
}
