import ServiceLifecycle

/// A background service that runs `body` every `interval` (after waiting the first one)
/// until shutdown; the body logs its own failures.
public struct Periodic: Service {
    public let interval: Duration
    public let body: @Sendable () async -> Void

    public init(every interval: Duration, _ body: @escaping @Sendable () async -> Void) {
        self.interval = interval
        self.body = body
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let interval = self.interval
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) } } catch { return }
            await self.body()
        }
    }
}
