import Foundation
import Synchronization

/// At most `limit` events per key in any `window` (a sliding window, counted as the current
/// fixed window plus the previous one weighted by how much of it the sliding window still
/// covers). Its cost per event does not grow with the number of keys: a new window starts
/// with the previous one's counts as they are, and the one before is dropped whole.
///
/// It holds at most `capacity` keys a window: a key it has no room for is refused
/// (``Verdict/full``), so a flood of addresses costs bounded memory and is refused rather
/// than growing it.
public final class WindowLimiter: Sendable {
    public enum Verdict: Sendable, Equatable {
        case allowed
        /// Over the limit; a try succeeds again in about this many seconds.
        case limited(retryAfterSeconds: Int)
        /// No room for another key in this window.
        case full(retryAfterSeconds: Int)
    }

    public let limit: Int
    public let window: TimeInterval
    public let capacity: Int

    private struct State {
        var index: Int64 = .min
        var current: [String: Int] = [:]
        var previous: [String: Int] = [:]
    }

    private let state = Mutex(State())

    public init(limit: Int, window: TimeInterval = 60, capacity: Int = 1_000_000) {
        self.limit = max(1, limit)
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// Counts one event for `key` at `now` if the key is under its limit.
    public func take(_ key: String, now: Date = Date()) -> Verdict {
        let position = now.timeIntervalSince1970 / self.window
        let index = Int64(position.rounded(.down))
        let elapsed = position - Double(index)
        let untilNext = max(1, Int((Double(index + 1) * self.window - now.timeIntervalSince1970).rounded(.up)))
        return self.state.withLock { state -> Verdict in
            if index != state.index {
                state.previous = index == state.index + 1 ? state.current : [:]
                state.current = [:]
                state.index = index
            }
            let counted = Double(state.current[key] ?? 0) + Double(state.previous[key] ?? 0) * (1 - elapsed)
            guard counted + 1 <= Double(self.limit) else { return .limited(retryAfterSeconds: untilNext) }
            if state.current[key] == nil, state.current.count >= self.capacity { return .full(retryAfterSeconds: untilNext) }
            state.current[key, default: 0] += 1
            return .allowed
        }
    }

    /// How many keys it holds now (both windows).
    public var keys: Int { self.state.withLock { $0.current.count + $0.previous.count } }
}
