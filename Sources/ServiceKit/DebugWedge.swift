import Glibc
import Logging
import NIOPosix
import ServiceLifecycle
import UnixSignals

/// `--debug-wedge-on-sigusr2` (hidden): on SIGUSR2, blocks every event loop for good, as a
/// handler that waited on them would. The rest of the process runs on, but answers
/// nothing and stops its watchdog keep-alives, so systemd kills and restarts it: the
/// system tests prove the watchdog with it. Only whoever may signal the process (root or
/// its own user, on the server) can trigger it; nothing on any socket does.
struct DebugWedge: Service {
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sigusr2)
        for await _ in signals.cancelOnGracefulShutdown() {
            for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
                loop.execute {
                    while true { sleep(3600) }
                }
            }
            // Logged once every loop has the blocking job queued: a test that sees this line
            // knows no request that comes after it will be answered.
            self.logger.critical("SIGUSR2 with --debug-wedge-on-sigusr2: blocking every event loop for good")
        }
    }
}
