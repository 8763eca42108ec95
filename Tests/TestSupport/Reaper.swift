import Foundation
import Glibc
import Synchronization

/// Waits for stopped processes on a thread of its own, so that a test's `defer` never holds
/// one of the few threads every test's tasks run on (as many as the machine has cores):
/// with two cores, two tests each waiting a second for a service's graceful stop would
/// stall every other test of the run for that second.
///
/// A process handed over gets SIGKILL when it outlives its grace; any still running when the
/// test process exits are killed and reaped then, so none outlives the run.
final class Reaper: Sendable {
    static let shared = Reaper()

    private struct Held {
        var process: ServiceProcess
        var killAt: ContinuousClock.Instant
        var killed = false
    }

    private let held = Mutex<[Held]>([])
    private let work = Mutex<Bool>(false)

    private init() {
        atexit { Reaper.shared.killAll() }
    }

    /// Takes `process` (already sent SIGTERM): SIGKILL after `grace` if it still runs.
    func take(_ process: ServiceProcess, grace: Duration) {
        self.held.withLock { $0.append(Held(process: process, killAt: .now + grace)) }
        let start = self.work.withLock { running in
            defer { running = true }
            return !running
        }
        if start {
            let thread = Thread { self.loop() }
            thread.name = "test process reaper"
            thread.start()
        }
    }

    private func loop() {
        while true {
            let now = ContinuousClock.now
            let waiting = self.held.withLock { held -> Int in
                held.removeAll { !$0.process.isRunning }
                for index in held.indices where !held[index].killed && now >= held[index].killAt {
                    held[index].process.signal(SIGKILL)
                    held[index].killed = true
                }
                return held.count
            }
            if waiting == 0 {
                // Stop, unless a process came between the check and this.
                let stopped = self.work.withLock { running in
                    guard self.held.withLock({ $0.isEmpty }) else { return false }
                    running = false
                    return true
                }
                if stopped { return }
            }
            usleep(10_000)
        }
    }

    private func killAll() {
        let processes = self.held.withLock { held in
            defer { held = [] }
            return held.map(\.process)
        }
        for process in processes {
            process.signal(SIGKILL)
            while process.isRunning { usleep(1_000) }
        }
    }
}
