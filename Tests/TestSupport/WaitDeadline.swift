import Foundation
import Synchronization

/// The deadline of a test's wait, counted in the time the machine could give the work
/// waited for, not in wall time.
///
/// The suites run in parallel, with services in processes of their own, on a machine that
/// may have two cores: a wait for a service is slow because that service got a small share
/// of a core, not because it made no progress. So the clock of a wait runs at the share of
/// a core that one runnable task gets: a second a second on an idle machine, half a second
/// a second when twice as many tasks want to run as there are cores. A wait still fails
/// within `timeout × hangFactor` of wall time, so a real hang ends the test.
///
/// A wait that took more than half its timeout says so on stderr (`slow wait: …`), and
/// `.ci/summary` lists those lines at the end of a CI run.
public struct WaitDeadline: Sendable {
    public let timeout: Duration
    public let started: ContinuousClock.Instant
    private var progressed: Duration = .zero
    private var lastTick: ContinuousClock.Instant

    /// The most wall time a wait takes, in timeouts, however loaded the machine.
    public static let hangFactor = 8

    public init(_ timeout: Duration) {
        self.timeout = timeout
        self.started = .now
        self.lastTick = self.started
    }

    /// Advances the clock to now; true once the wait's time is up.
    public mutating func expired() -> Bool {
        let now = ContinuousClock.now
        self.progressed += (now - self.lastTick) * CPUShare.current()
        self.lastTick = now
        return self.progressed >= self.timeout || now - self.started >= self.timeout * Self.hangFactor
    }

    /// The wall time the wait has taken.
    public var elapsed: Duration { .now - self.started }

    /// Says on stderr that `what` took more than half its timeout, as its clock counts it
    /// (the machine's share of a core), if it did (a wait that ran out did); with the wall
    /// time beside.
    public func noteIfSlow(_ what: String, outcome: String = "done") {
        guard self.progressed * 2 > self.timeout else { return }
        let line = "slow wait: \"\(what)\" \(outcome) after \(Self.seconds(self.progressed)) s counted "
            + "(\(Self.seconds(self.elapsed)) s on the clock; timeout \(Self.seconds(self.timeout)) s)\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}

/// The share of a core one runnable task gets now: the cores over the tasks that want to
/// run (`/proc/loadavg`'s running count, less the one reading it), at most 1. Read at most
/// every 20 ms for the whole test process.
enum CPUShare {
    private static let cores = Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
    private static let sample = Mutex<(at: ContinuousClock.Instant, share: Double)?>(nil)

    static func current() -> Double {
        let now = ContinuousClock.now
        if let last = self.sample.withLock({ $0 }), now - last.at < .milliseconds(20) { return last.share }
        let share = self.read() ?? 1
        self.sample.withLock { $0 = (now, share) }
        return share
    }

    private static func read() -> Double? {
        // "0.52 0.58 0.59 3/467 12345": the fourth field is running/all.
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count >= 4, let running = fields[3].split(separator: "/").first.flatMap({ Double($0) }) else { return nil }
        return min(1, self.cores / max(1, running - 1))
    }
}
