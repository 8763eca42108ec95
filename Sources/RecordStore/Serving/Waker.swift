import Foundation
import Logging
import RPCClient
import RPCCore
import ServiceLifecycle
import Synchronization

/// A service to wake.
public struct WakeTarget: Sendable, Hashable {
    /// The `watcher` name the service gives in `store.watch`.
    public var name: String
    public var socketPath: String

    /// `NAME=SOCKET`, as `--wake` takes it.
    public init?(argument: String) {
        let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].hasPrefix("/") else { return nil }
        self.init(name: parts[0], socketPath: parts[1])
    }

    public init(name: String, socketPath: String) {
        self.name = name
        self.socketPath = socketPath
    }
}

/// Wakes the services that follow `store.watch` when there is news and they are not
/// following: connecting to a socket-activated service's socket is what makes systemd
/// start it, and a started service resumes watching from its saved position.
struct Waker: Service {
    let store: RecordStore
    let targets: [WakeTarget]
    let logger: Logger
    /// At most one wake-up per target in this time, however many commits come.
    var spacing: Duration = .seconds(1)

    func run() async throws {
        guard !self.targets.isEmpty else { return }
        let store = self.store
        let (commits, cancel) = store.commits()
        defer { cancel() }
        let lastWake = Mutex<[String: ContinuousClock.Instant]>([:])
        await withDiscardingTaskGroup { group in
            for await _ in commits.cancelOnGracefulShutdown() {
                let now = ContinuousClock.now
                for target in self.targets where !store.isFollowed(by: target.name) {
                    let due = lastWake.withLock { last in
                        guard last[target.name].map({ now - $0 >= self.spacing }) ?? true else { return false }
                        last[target.name] = now
                        return true
                    }
                    guard due, FileManager.default.fileExists(atPath: target.socketPath) else { continue }
                    group.addTask { await self.wake(target) }
                }
            }
            // Shutting down: a wake-up still waiting for its answer is of no use any more.
            group.cancelAll()
        }
    }

    private func wake(_ target: WakeTarget) async {
        // The connection is what starts the service; the ping only confirms it came up.
        let client = RPCClient(configuration: ClientConfiguration(
            socketPath: target.socketPath, callTimeout: .seconds(10), connectTimeout: .seconds(2)))
        do {
            _ = try await client.call(Builtin.ping, Empty())
            self.logger.debug("woke a watcher", metadata: ["watcher": "\(target.name)", "socket": "\(target.socketPath)"])
        } catch {
            self.logger.warning("cannot wake a watcher", metadata: ["watcher": "\(target.name)", "socket": "\(target.socketPath)", "error": "\(error)"])
        }
        await client.close()
    }
}
