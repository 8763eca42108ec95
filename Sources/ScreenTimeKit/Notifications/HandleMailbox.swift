import Foundation
import Synchronization

/// Where the handles the wake relay pushes to this device wait for ``Notifications/enableWakes``:
/// the app hands each remote notification to the kit, and a handle in one is posted here.
final class HandleMailbox: Sendable {
    private enum Waiter {
        case waiting(CheckedContinuation<Void, Never>)
        /// Its time ran out (or it was cancelled) before it began to wait.
        case released
    }

    private struct State {
        var received = 0
        var latest: String?
        var waiters: [Int: Waiter] = [:]
        var nextId = 0
    }

    private let state = Mutex(State())

    /// How many handles arrived so far: a waiter wants one after this.
    var received: Int { self.state.withLock { $0.received } }

    func post(_ handle: String) {
        let waiting = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.received += 1
            state.latest = handle
            let waiting = state.waiters.values.compactMap { if case .waiting(let continuation) = $0 { continuation } else { nil } }
            state.waiters = [:]
            return waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// The latest handle once one arrived after `count` had, or nil if none did within `limit`.
    func handle(after count: Int, within limit: Duration) async -> String? {
        let id = self.state.withLock { state in
            defer { state.nextId += 1 }
            return state.nextId
        }
        let timer = Task {
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            self.release(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = self.state.withLock { state -> Bool in
                    if state.received > count { return true }
                    if case .released = state.waiters[id] { return true }
                    state.waiters[id] = .waiting(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.release(id)
        }
        return self.state.withLock { state in
            state.waiters[id] = nil
            return state.received > count ? state.latest : nil
        }
    }

    private func release(_ id: Int) {
        let continuation = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            switch state.waiters[id] {
            case .waiting(let continuation):
                state.waiters[id] = nil
                return continuation
            case .released:
                return nil
            case nil:
                state.waiters[id] = .released
                return nil
            }
        }
        continuation?.resume()
    }
}
