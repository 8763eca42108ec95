import Foundation
import RPCServer
import ServiceKit
import Synchronization
import TestSupport

/// A service in the test's process (as ``withService(_:in:maximumFrameSize:setup:_:)``
/// runs it) that the test can stop gracefully and start again on the same directory and
/// state: a restart in the middle of a simulated day, while the services beside it go on.
/// Clients of its socket connect again on their next call.
public final class RestartableService: Sendable {
    private struct Running {
        var task: Task<Void, any Error>
        var stop: AsyncStream<Void>.Continuation
    }

    public let service: String
    private let directory: TemporaryDirectory
    private let setup: @Sendable (ServiceEnvironment) async throws -> ServiceSetup
    private let running = Mutex<Running?>(nil)
    private let logs = Mutex<[CapturedLog]>([])
    private let socket = Mutex<String?>(nil)

    /// Starts it; returns once it serves.
    public init(_ service: String, in directory: TemporaryDirectory, setup: @escaping @Sendable (ServiceEnvironment) async throws -> ServiceSetup) async throws {
        self.service = service
        self.directory = directory
        self.setup = setup
        try await self.start()
    }

    /// Its socket.
    public var socketPath: String { self.socket.withLock { $0! } }

    /// What every run of it logged so far.
    public var log: String { self.logs.withLock { $0.map(\.text).joined(separator: "\n") } }

    /// How many times it was started.
    public var runs: Int { self.logs.withLock { $0.count } }

    public func start() async throws {
        let (stopSignal, stop) = AsyncStream<Void>.makeStream()
        let (ready, serving) = AsyncThrowingStream<InProcessService, any Error>.makeStream()
        let (service, directory, setup) = (self.service, self.directory, self.setup)
        let task = Task {
            do {
                try await withService(service, in: directory, setup: setup) { started in
                    serving.yield(started)
                    for await _ in stopSignal { break }
                }
                serving.finish()
            } catch {
                serving.finish(throwing: error)
                throw error
            }
        }
        var started: InProcessService?
        for try await service in ready {
            started = service
            break
        }
        guard let started else { throw HarnessError("\(service) stopped before it served") }
        self.logs.withLock { $0.append(started.log) }
        self.socket.withLock { $0 = started.socketPath }
        self.running.withLock { $0 = Running(task: task, stop: stop) }
    }

    /// Stops it gracefully and waits until it has stopped; nothing when it is not running.
    public func stop() async throws {
        guard let running = self.running.withLock({ state in defer { state = nil }; return state }) else { return }
        running.stop.yield()
        running.stop.finish()
        try await running.task.value
    }

    public func restart() async throws {
        try await self.stop()
        try await self.start()
    }
}
