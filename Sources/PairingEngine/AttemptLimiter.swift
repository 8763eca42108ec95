import Foundation
import RPCCore
import Synchronization

/// Counts wrong pairing secrets in a sliding window, per family and in total, and refuses
/// further attempts (`limit_exceeded`) while either is over its limit. In memory: a
/// restart forgets the window, while each invitation's own count (5 wrong, then locked) is
/// kept in the store.
final class AttemptLimiter: Sendable {
    struct Limits: Sendable {
        var perFamily: Int
        var total: Int
        var window: Duration
    }

    private let limits: Limits
    private let failures = Mutex<(total: [ContinuousClock.Instant], families: [String: [ContinuousClock.Instant]])>(([], [:]))

    init(_ limits: Limits) {
        self.limits = limits
    }

    /// Throws `limit_exceeded` if the family (or everyone) has failed too often lately.
    func check(family: String) throws(RPCError) {
        let now = ContinuousClock.now
        let wait: Duration? = self.failures.withLock { state in
            let cutoff = now - self.limits.window
            state.total.removeAll { $0 < cutoff }
            state.families[family]?.removeAll { $0 < cutoff }
            let familyFailures = state.families[family] ?? []
            if familyFailures.count >= self.limits.perFamily, let oldest = familyFailures.first { return oldest + self.limits.window - now }
            if state.total.count >= self.limits.total, let oldest = state.total.first { return oldest + self.limits.window - now }
            return nil
        }
        if let wait {
            throw RPCError(.limitExceeded, "too many wrong pairing attempts; try again in \(max(1, wait.components.seconds + 1)) seconds")
        }
    }

    func fail(family: String) {
        let now = ContinuousClock.now
        self.failures.withLock { state in
            state.total.append(now)
            state.families[family, default: []].append(now)
            // Forget families with no failure left in the window, so guessed family names
            // do not pile up.
            let cutoff = now - self.limits.window
            state.families = state.families.filter { $0.value.last.map { $0 >= cutoff } ?? false }
        }
    }
}
