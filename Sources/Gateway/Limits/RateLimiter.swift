import EdgeLimits
import Synchronization

/// A token bucket per IP address for what costs the gateway work with no credential behind
/// it: the pairing steps, `/v1/info`, `/healthz`, and failed authentications. On top of the
/// pairing service's own lockouts, which count wrong secrets; this counts attempts.
final class RateLimiter: Sendable {
    private let capacity: Double
    private let perSecond: Double
    private let buckets = Mutex<[String: (tokens: Double, updated: ContinuousClock.Instant)]>([:])

    init(perMinute: Int, burst: Int) {
        self.capacity = Double(max(1, burst))
        self.perSecond = Double(max(1, perMinute)) / 60
    }

    /// Takes one token for `address` (an IPv6 address's /64: ``AddressKey``); false when
    /// its bucket is empty.
    func allow(_ address: String) -> Bool {
        let address = AddressKey.of(address)
        let now = ContinuousClock.now
        return self.buckets.withLock { buckets in
            if buckets.count > 10_000 {
                // Forget full buckets: they would be full again anyway.
                buckets = buckets.filter { self.refilled($0.value, now) < self.capacity }
            }
            var tokens = buckets[address].map { self.refilled($0, now) } ?? self.capacity
            guard tokens >= 1 else {
                buckets[address] = (tokens, now)
                return false
            }
            tokens -= 1
            buckets[address] = (tokens, now)
            return true
        }
    }

    private func refilled(_ bucket: (tokens: Double, updated: ContinuousClock.Instant), _ now: ContinuousClock.Instant) -> Double {
        let elapsed = now - bucket.updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return min(self.capacity, bucket.tokens + seconds * self.perSecond)
    }
}
