import Foundation
import Logging
import NIOPosix
import RPCClient
import RPCCore
import RPCServer
import ServiceKit
import ServiceLifecycle
import TestSupport

/// A service running in the test's own process, as its executable runs it: its engine's
/// setup, its real ``RPCServer`` on a Unix socket in a temporary directory, its background
/// services, all in one `ServiceGroup`.
public struct InProcessService: Sendable {
    /// A client connected to the service's socket, acting locally (no `auth`).
    public let client: RPCClient
    /// The service's paths and logger, as its setup got them.
    public let environment: ServiceEnvironment
    /// What it logged so far (debug and above).
    public let log: CapturedLog

    /// The service's socket.
    public var socketPath: String { self.environment.paths.socketPath(for: self.environment.service) }

    /// Another client of the service, e.g. acting for a device.
    public func client(auth: Auth? = nil, callTimeout: Duration = .seconds(30)) -> RPCClient {
        RPCClient(configuration: ClientConfiguration(socketPath: self.socketPath, callTimeout: callTimeout, auth: auth))
    }
}

/// Starts `service` in process (in the shape of Hummingbird's test helper): runs its setup
/// with paths under `directory` (runtime in `run/`, state in `state/`), starts its server
/// (the RPC runtime, or a server of its own: the gateway's) and background services in a
/// `ServiceGroup`, waits until the server serves, runs `body` with a client, then shuts
/// the group down gracefully and waits for it.
///
/// Several services may share one directory: each finds the others' sockets in `run/`.
public func withService<T: Sendable>(
    _ service: String,
    in directory: TemporaryDirectory,
    maximumFrameSize: Int = defaultMaximumFrameSize,
    setup: @escaping @Sendable (ServiceEnvironment) async throws -> ServiceSetup,
    _ body: @Sendable (InProcessService) async throws -> T
) async throws -> T {
    let log = CapturedLog()
    let logger = log.logger(label: "test.\(service)")
    let paths = ServicePaths(runtimeDirectory: directory.file("run"), stateDirectory: directory.file("state"), configurationDirectory: directory.file("etc"))
    try FileManager.default.createDirectory(atPath: paths.runtimeDirectory, withIntermediateDirectories: true)
    // As ServiceMain: its state file in run/status, its instruments shared by its engine and
    // its RPC server.
    let runState = RunStateFile(service: service, version: "0.0.0-test", runtimeDirectory: paths.runtimeDirectory)
    runState.write(runState.started)
    let environment = ServiceEnvironment(service: service, paths: paths, logger: logger, runState: runState)
    let prepared: ServiceSetup
    do {
        prepared = try await setup(environment)
    } catch {
        runState.ended(.failed, error: "\(error)")
        throw error
    }
    // The service's own event loop, as in its process: a handler that holds its loop must
    // not hold up the test's clients and the other tests running meanwhile.
    let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    defer { loops.shutdownGracefully { _ in } }
    let server: any PrimaryService
    switch prepared.server {
    case .rpc(let methods):
        try methods.validate()
        server = RPCServer(
            configuration: ServerConfiguration(service: service, version: "0.0.0-test", endpoint: .path(paths.socketPath(for: service), mode: 0o600),
                                               maximumFrameSize: maximumFrameSize, shutdownTimeout: .seconds(5), metrics: environment.metrics),
            methods: methods, logger: logger, eventLoopGroup: loops)
    case .own(let own):
        // The gateway: its own listener (its `client` here connects to no socket).
        server = own
    }
    let group = ServiceGroup(configuration: ServiceGroupConfiguration(
        services: [.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)] + prepared.background.map { .init(service: $0) },
        gracefulShutdownSignals: [], logger: logger))

    return try await withThrowingTaskGroup(of: T?.self) { tasks in
        tasks.addTask {
            do {
                try await group.run()
            } catch {
                runState.ended(.failed, error: "\(error)")
                throw error
            }
            await prepared.afterStop()
            runState.ended(.stopped)
            return nil
        }
        guard await server.waitUntilServing() else {
            // The group failed before serving: its error is what the test needs to see.
            while let _ = try await tasks.next() {}
            throw HarnessError("\(service) stopped before it served")
        }
        let client = RPCClient(configuration: ClientConfiguration(socketPath: paths.socketPath(for: service)))
        let result: T
        do {
            result = try await body(InProcessService(client: client, environment: environment, log: log))
        } catch {
            await client.close()
            await group.triggerGracefulShutdown()
            while let _ = try? await tasks.next() {}
            throw error
        }
        await client.close()
        await group.triggerGracefulShutdown()
        while let _ = try await tasks.next() {}
        return result
    }
}

/// Runs `body`, then `cleanup` whether it returned or threw (`defer` cannot await): the
/// stacks close their clients this way before their services stop.
public func withCleanup<T>(_ body: () async throws -> T, afterwards cleanup: () async -> Void) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        await cleanup()
        throw error
    }
    await cleanup()
    return result
}

public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
