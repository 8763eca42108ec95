import Synchronization

/// Caps the unary calls one client has in flight: a service refuses requests beyond its
/// own per-connection limit (`limit_exceeded`), so calls past the cap wait here for a
/// reply to free a slot instead. The fast path takes a slot without suspending.
final class CallGate: Sendable {
    private let state: Mutex<(available: Int, waiters: [CheckedContinuation<Void, Never>])>

    init(slots: Int) {
        self.state = Mutex((max(1, slots), []))
    }

    func enter() async {
        let acquired = self.state.withLock { state -> Bool in
            guard state.available > 0 else { return false }
            state.available -= 1
            return true
        }
        if acquired { return }
        await withCheckedContinuation { continuation in
            let acquired = self.state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    /// A slot if one is free now, without waiting.
    func tryEnter() -> Bool {
        self.state.withLock { state in
            guard state.available > 0 else { return false }
            state.available -= 1
            return true
        }
    }

    /// Frees a slot: hands it straight to the oldest waiter, if any.
    func leave() {
        let next = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
