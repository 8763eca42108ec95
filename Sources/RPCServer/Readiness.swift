import Synchronization

/// Tells whoever waits when a server starts serving, or that it ended without serving (the
/// RPC runtime's, and the gateway's).
public final class Readiness: Sendable {
    private enum Phase {
        case starting([CheckedContinuation<Bool, Never>])
        case serving
        case ended
    }

    private let phase = Mutex(Phase.starting([]))

    public init() {}

    /// The listeners are open and the server answers.
    public func serving() {
        self.settle(.serving, serving: true)
    }

    /// The server stopped (or never started); waiters that are still waiting get false.
    public func ended() {
        self.settle(.ended, serving: false)
    }

    /// True once the server serves; false if it ended first.
    public func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let answer: Bool? = self.phase.withLock { phase in
                switch phase {
                case .starting(var waiters):
                    waiters.append(continuation)
                    phase = .starting(waiters)
                    return nil
                case .serving: return true
                case .ended: return false
                }
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    private func settle(_ next: Phase, serving: Bool) {
        let waiters: [CheckedContinuation<Bool, Never>] = self.phase.withLock { phase in
            guard case .starting(let waiters) = phase else {
                if case .serving = phase, case .ended = next { phase = .ended }
                return []
            }
            phase = next
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: serving) }
    }
}
