import Foundation

/// How long outbound delivery (webhooks, wakes) waits before trying again.
enum Backoff {
    /// `first`, doubling per attempt up to `longest`, with ±20% jitter so that many
    /// deliveries failing together do not retry together.
    static func delay(afterAttempt attempt: Int, first: Duration, longest: Duration) -> Duration {
        let base = first.seconds * pow(2, Double(min(attempt - 1, 30)))
        let capped = min(base, longest.seconds)
        return .milliseconds(Int64(capped * Double.random(in: 0.8...1.2) * 1000))
    }
}
