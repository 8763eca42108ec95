import ServiceKit
import Testing

/// The wake-up the aggregator's and push's writers sleep on between batches.
@Suite("Wakeup: a signal wakes one wait; a wait without one sleeps its time")
struct WakeupTests {
    @Test("after a wait ended by a signal, the next wait sleeps (no signal left pending by the first wait's timer)")
    func noSpuriousSignalAfterAWakeup() async throws {
        let wakeup = Wakeup()
        let waiter = Task { await wakeup.wait(upTo: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(50))
        wakeup.signal()
        await waiter.value
        // Let the first wait's timer see its cancellation.
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        let signalled = await wakeup.wait(upTo: .milliseconds(300))
        #expect(!signalled && ContinuousClock.now - started >= .milliseconds(300), "the second wait returned at once: a busy loop in every writer")
    }

    @Test("a signal sent while nobody waits is kept for the next wait; a cancelled wait returns")
    func pendingSignalAndCancellation() async throws {
        let wakeup = Wakeup()
        wakeup.signal()
        #expect(await wakeup.wait(upTo: .seconds(30)), "the pending signal ends the wait, not its time")
        let cancelled = Task { await wakeup.wait(upTo: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        await cancelled.value
    }
}
