import Logging
import RPCCore
import Synchronization

/// How loud to be about a failed call to the store. The first `unavailable` after the
/// store answered is what a restart looks like (systemd stopping it for an upgrade or a
/// `systemctl restart`, or starting it again after a crash; the next try activates it
/// again): `info`. Any other error, and a second failure in a row, is a `warning`.
public final class FailureStreak: Sendable {
    private let failures = Mutex(0)

    public init() {}

    /// The store answered: a streak of failures, if any, is over.
    public func reset() {
        self.failures.withLock { $0 = 0 }
    }

    /// Counts a failure; the level to log it at.
    public func level(after error: any Error) -> Logger.Level {
        let count = self.failures.withLock { count in
            count += 1
            return count
        }
        guard count == 1, let error = error as? RPCError, error.code == .unavailable else { return .warning }
        return .info
    }
}
