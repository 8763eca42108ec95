import Synchronization

/// Wakes one waiting task: a signal sent while nobody waits is kept for the next wait.
public final class Wakeup: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public init() {}

    public func signal() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns on a signal, after `timeout`, or when the task is cancelled: false when the
    /// time ran out.
    @discardableResult
    public func wait(upTo timeout: Duration) async -> Bool {
        let over = WaitOver()
        let timer = WaitOver()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Cancelled because the wait is over: nothing to do. (Signalling then would
                // leave a signal pending, so the next wait would return at once, and its own
                // timer would do the same: a busy loop.) Cancelled from outside, or timed
                // out: end the wait.
                let timedOut = (try? await Task.sleep(for: timeout)) != nil
                if timedOut { timer.set() }
                if timedOut || !over.isSet { self.signal() }
            }
            await withCheckedContinuation { continuation in
                let now = self.state.withLock { state -> Bool in
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
            over.set()
            group.cancelAll()
        }
        return !timer.isSet
    }
}

/// Set once: a wait has returned (read by its timer), or its time ran out (read by the wait).
private final class WaitOver: Sendable {
    private let value = Mutex(false)
    func set() { self.value.withLock { $0 = true } }
    var isSet: Bool { self.value.withLock { $0 } }
}
