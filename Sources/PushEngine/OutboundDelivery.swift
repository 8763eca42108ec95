import Foundation
import Logging
import ServiceKit
import ServiceLifecycle

/// What outbound delivery (webhook posts, wakes) shares: the loop that sends what falls
/// due, and how long a failure waits before the next try.
enum OutboundDelivery {
    /// Until a graceful shutdown: takes what is `due` (up to four times `concurrency`),
    /// sends it `concurrency` at a time, gives what came of the batch to `record`, and
    /// sleeps until `nextDue` (at most a minute) or until `wakeup` is signalled. A failure
    /// to read or record is logged as `what` failing and tried again in a minute.
    static func run<Item: Sendable, Done: Sendable>(
        concurrency: Int, wakeup: Wakeup, logger: Logger, what: String,
        due: @escaping @Sendable (_ limit: Int) async throws -> [Item], nextDue: @escaping @Sendable () async throws -> Date?,
        send: @escaping @Sendable (Item) async -> Done?, record: @escaping @Sendable ([Done]) async throws -> Void = { _ in }
    ) async {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let items = try await due(concurrency * 4)
                    if items.isEmpty {
                        let next = try await nextDue().map { max(0, $0.timeIntervalSinceNow) } ?? 60
                        await wakeup.wait(upTo: .milliseconds(Int64(min(next, 60) * 1000) + 1))
                        continue
                    }
                    let done = await withTaskGroup(of: Done?.self) { group in
                        var done: [Done] = []
                        for (index, item) in items.enumerated() {
                            if index >= concurrency, let finished = await group.next(), let finished { done.append(finished) }
                            group.addTask { await send(item) }
                        }
                        for await finished in group { if let finished { done.append(finished) } }
                        return done
                    }
                    try await record(done)
                } catch {
                    logger.error("\(what) failed; trying again in a minute", metadata: ["error": "\(error)"])
                    await wakeup.wait(upTo: .seconds(60))
                }
            }
        }
    }

    /// `first`, doubling per attempt up to `longest`, with ±20% jitter so that many
    /// deliveries failing together do not retry together.
    static func backoff(afterAttempt attempt: Int, first: Duration, longest: Duration) -> Duration {
        let base = first.seconds * pow(2, Double(min(attempt - 1, 30)))
        let capped = min(base, longest.seconds)
        return .milliseconds(Int64(capped * Double.random(in: 0.8...1.2) * 1000))
    }
}
