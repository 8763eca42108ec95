import Synchronization

/// Things that arrive over time (notifications, webhook posts), and waiting for them
/// without polling: a waiter is resumed by the arrival that completes its count.
public final class Arrivals<Element: Sendable>: Sendable {
    private struct Waiter {
        let count: Int
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var items: [Element] = []
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
        /// Waits that are over: a waiter that registers after this does not wait.
        var released: Set<UInt64> = []
    }

    private let state = Mutex(State())

    public init() {}

    public var all: [Element] { self.state.withLock { $0.items } }
    public var count: Int { self.state.withLock { $0.items.count } }

    public func append(_ item: Element) {
        let ready: [CheckedContinuation<Void, Never>] = self.state.withLock { state in
            state.items.append(item)
            let done = state.waiters.filter { $0.value.count <= state.items.count }
            for key in done.keys { state.waiters[key] = nil }
            return done.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume() }
    }

    /// Waits until at least `count` have arrived; returns them all. Fails after `timeout` (a
    /// ``WaitDeadline``) with `describe` of what did arrive.
    @discardableResult
    public func wait(for count: Int, timeout: Duration = .seconds(10), _ what: String = "arrivals",
                     describe: @Sendable ([Element]) -> String = { "\($0)" }) async throws -> [Element] {
        let id = self.state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        let deadline = WaitDeadline(timeout)
        let arrived = await withTaskGroup(of: Bool.self) { [deadline] group in
            group.addTask { await self.arrival(of: count, id: id); return true }
            group.addTask {
                var clock = deadline
                while !clock.expired() {
                    do { try await Task.sleep(for: .milliseconds(50)) } catch { return false }
                }
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            // If the time ran out, the arrival waiter is still suspended: resume it.
            self.release(id)
            return first
        }
        let items = self.all
        deadline.noteIfSlow("\(count) \(what)", outcome: arrived || items.count >= count ? "done" : "failed")
        guard arrived || items.count >= count else {
            throw TestFailure("expected \(count) \(what) within \(timeout), got \(items.count): \(describe(items))")
        }
        return items
    }

    private func arrival(of count: Int, id: UInt64) async {
        await withCheckedContinuation { continuation in
            let ready: Bool = self.state.withLock { state in
                if state.items.count >= count || state.released.contains(id) { return true }
                state.waiters[id] = Waiter(count: count, continuation: continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Ends waiter `id`'s wait, whether or not it has started waiting yet.
    private func release(_ id: UInt64) {
        let waiter: Waiter? = self.state.withLock { state in
            state.released.insert(id)
            return state.waiters.removeValue(forKey: id)
        }
        waiter?.continuation.resume()
    }
}
