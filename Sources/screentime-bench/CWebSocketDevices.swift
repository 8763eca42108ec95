import Foundation
import Synchronization

/// Devices listening over TLS WebSockets, as the C program Benchmarks/floor/wsclients.c
/// (OpenSSL, epoll, one thread): on the benchmark's machine the devices share the two
/// cores with the servers they measure, and a phone spends its own CPU, so the devices
/// should cost as little as a client can (as pgbench is PostgreSQL's C client). One
/// process per group of sockets; each reports a round's arrival times once all its
/// sockets have the round, and they go to `arrivals`.
final class CWebSocketDevices: Sendable {
    let process: Process
    let count: Int
    private let input: FileHandle
    private let stopped = Atomic<Bool>(false)
    private let ready = Mutex<(done: Bool, failed: String?, waiter: CheckedContinuation<Void, any Error>?)>((false, nil, nil))

    /// The compiled client (once per work directory).
    static func binary(workDirectory: String) throws -> String {
        try CFloor.compile("wsclients", into: workDirectory, libraries: ["-lssl", "-lcrypto"])
    }

    /// Connects `tokens.count` sockets (or `count` without tokens) to `127.0.0.1:port` on
    /// `path`; each sends `call` and waits for its reply, then sends `send`. Returns once
    /// all are listening.
    static func start(binary: String, port: Int, path: String, tokens: [String]?, count: Int, work: String,
                      call: String? = nil, send: String? = nil, arrivals: Arrivals) async throws -> CWebSocketDevices {
        var tokenFile = "-"
        if let tokens {
            tokenFile = work + "/wsclients-tokens-\(UUID().uuidString)"
            try (tokens.joined(separator: "\n") + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["\(port)", path, tokenFile, "\(tokens?.count ?? count)"] + [call, send].compactMap { $0 }
        // A write to clients that have exited fails rather than killing the benchmark.
        signal(SIGPIPE, SIG_IGN)
        let output = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        let devices = CWebSocketDevices(process: process, count: tokens?.count ?? count, input: input.fileHandleForWriting)
        devices.read(output.fileHandleForReading, into: arrivals)
        arrivals.follow { round in devices.expect(round: round) }
        try await devices.waitUntilReady()
        return devices
    }

    private init(process: Process, count: Int, input: FileHandle) {
        self.process = process
        self.count = count
        self.input = input
    }

    /// Tells the clients to time round `round`.
    func expect(round: Int64) {
        guard !self.stopped.load(ordering: .acquiring) else { return }
        try? self.input.write(contentsOf: Data("expect \(round)\n".utf8))
    }

    /// Closes their input: the clients exit, closing their sockets.
    func stop() {
        guard !self.stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try? self.input.close()
        self.process.waitUntilExit()
    }

    private func waitUntilReady() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome: Result<Void, any Error>? = self.ready.withLock { state in
                if state.done { return .success(()) }
                if let failed = state.failed { return .failure(BenchError(failed)) }
                state.waiter = continuation
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    private func settled(_ failure: String?) {
        let waiter = self.ready.withLock { state in
            guard !state.done, state.failed == nil else { return nil as CheckedContinuation<Void, any Error>? }
            if let failure { state.failed = failure } else { state.done = true }
            defer { state.waiter = nil }
            return state.waiter
        }
        if let failure { waiter?.resume(throwing: BenchError(failure)) } else { waiter?.resume() }
    }

    /// Reads the clients' lines on a thread of its own (the reads block).
    private func read(_ output: FileHandle, into arrivals: Arrivals) {
        let descriptor = output.fileDescriptor
        let count = self.count
        let thread = Thread { [self] in
            // A descriptor of its own: the pipe's FileHandle closes the one it has.
            guard let stream = fdopen(dup(descriptor), "r") else { return self.settled("cannot read the C clients' output") }
            defer { fclose(stream) }
            var line: UnsafeMutablePointer<CChar>?
            var capacity = 0
            while getline(&line, &capacity, stream) > 0, let text = line {
                if strncmp(text, "ready", 5) == 0 {
                    self.settled(nil)
                } else if strncmp(text, "round ", 6) == 0 {
                    var cursor: UnsafeMutablePointer<CChar>? = text + 6
                    let round = Int64(strtoll(cursor!, &cursor, 10))
                    var batch: [(round: Int64, time: UInt64)] = []
                    batch.reserveCapacity(count)
                    for _ in 0..<count { batch.append((round, UInt64(strtoull(cursor!, &cursor, 10)))) }
                    arrivals.arrived(batch)
                }
            }
            free(line)
            self.settled("the C WebSocket clients exited before they were all listening (see their message above)")
        }
        thread.start()
    }
}
