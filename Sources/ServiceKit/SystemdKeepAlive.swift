import NIOCore
import NIOPosix
import ServiceLifecycle
import SystemdKit

/// Keeps systemd informed while a service runs: `WATCHDOG=1` at half the unit's
/// `WatchdogSec=`, but only after every event loop has run a task (a hung loop stops the
/// keep-alives and systemd restarts the service), and `STATUS=` with what the service says
/// it is doing. Nothing when systemd does not supervise the process. Every service has
/// one, run by ``ServiceMain`` beside its server.
public struct SystemdKeepAlive: Service {
    let group: any EventLoopGroup
    /// The status line, or nil to leave it (while stopping, say).
    let status: @Sendable () -> String?

    public init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, status: @escaping @Sendable () -> String?) {
        self.group = group
        self.status = status
    }

    public func run() async throws {
        guard ServiceNotifier.isSupervised else { return }
        let watchdog = ServiceNotifier.watchdogInterval()
        let tick = watchdog.map { $0 / 2 } ?? .seconds(5)
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: tick) } } catch { return }
            if watchdog != nil {
                var loopsAlive = true
                for loop in self.group.makeIterator() {
                    if (try? await loop.submit({}).get()) == nil { loopsAlive = false }
                }
                if loopsAlive { ServiceNotifier.watchdog() }
            }
            if let status = self.status() { ServiceNotifier.status(status) }
        }
    }
}
