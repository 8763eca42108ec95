import Foundation
import RPCCore

/// Reconnect and retry delays: exponential, capped, with full jitter (each delay a random
/// point between half of the step and the step), so many devices that lost the server at
/// once do not all come back in the same instant.
public struct Backoff: Sendable, Hashable {
    public var initial: Duration
    public var maximum: Duration
    public var multiplier: Double
    /// Consecutive failed attempts after which a transport reports `offline` rather than
    /// `reconnecting`.
    public var attemptsBeforeOffline: Int

    public init(initial: Duration = .milliseconds(100), maximum: Duration = .seconds(30), multiplier: Double = 2, attemptsBeforeOffline: Int = 3) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.attemptsBeforeOffline = attemptsBeforeOffline
    }

    /// The step before jitter for the `attempt`-th retry (0 first).
    public func step(attempt: Int) -> Duration {
        let factor = pow(self.multiplier, Double(min(attempt, 62)))
        let seconds = min(self.initial.seconds * factor, self.maximum.seconds)
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// The delay before the `attempt`-th retry: the step, jittered down to no less than half.
    public func delay<G: RandomNumberGenerator>(attempt: Int, using generator: inout G) -> Duration {
        let step = self.step(attempt: attempt).seconds
        let jittered = Double.random(in: (step / 2)...max(step, step / 2 + 0.000_001), using: &generator)
        return .milliseconds(Int64((jittered * 1000).rounded()))
    }

    public func delay(attempt: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return self.delay(attempt: attempt, using: &generator)
    }
}
