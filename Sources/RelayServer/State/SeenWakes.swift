import Crypto
import Foundation
import RelayCore
import Synchronization

/// What the wakes taken in the last `2 × WakeSignature.maximumAge` signed (older ones are
/// refused for their time anyway), by digest: a replayed wake is refused. Kept in the order
/// taken, so the expired ones leave from the front, a few at each insert: no insert ever
/// scans them all. It holds at most `capacity`: past that a wake is refused (busy), never
/// kept at the cost of more memory.
final class SeenWakes: Sendable {
    enum Outcome: Equatable { case new, seenBefore, full }

    /// A SHA-256 digest as four words: a small key, hashed fast.
    struct Key: Hashable, Sendable {
        let words: (UInt64, UInt64, UInt64, UInt64)
        init(_ digest: SHA256.Digest) {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            digest.withUnsafeBytes { raw in
                withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.prefix(32))) }
            }
            self.words = words
        }
        static func == (a: Key, b: Key) -> Bool { a.words == b.words }
        func hash(into hasher: inout Hasher) {
            hasher.combine(self.words.0)
            hasher.combine(self.words.1)
            hasher.combine(self.words.2)
            hasher.combine(self.words.3)
        }
    }

    private struct State {
        var seen: Set<Key> = []
        var order: [(key: Key, at: Date)] = []
        var head = 0
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    var count: Int { self.state.withLock { $0.seen.count } }

    func insert(_ digest: SHA256.Digest, now: Date) -> Outcome {
        let key = Key(digest)
        return self.state.withLock { state in
            while state.head < state.order.count, now.timeIntervalSince(state.order[state.head].at) > 2 * WakeSignature.maximumAge {
                state.seen.remove(state.order[state.head].key)
                state.head += 1
            }
            if state.head > 4096, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
            guard !state.seen.contains(key) else { return .seenBefore }
            guard state.seen.count < self.capacity else { return .full }
            state.seen.insert(key)
            state.order.append((key, now))
            return .new
        }
    }
}
