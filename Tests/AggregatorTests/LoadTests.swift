import AggregatorAPI
import Foundation
import RPCClient
import RPCCore
import StoreAPI
import Synchronization
import Testing
import TestSupport

@Suite("Aggregator under mixed load: no database wait holds an event loop", .serialized)
struct LoadTests {
    /// Once, reports read the database synchronously on the event loops while a
    /// recompute's asynchronous read held a reader it could only give back on those loops:
    /// the aggregator hung for good in the first round.
    @Test("recomputes while parents ask for reports (8 connections × 30 pipelined requests, 3 reports per recompute), 3 rounds: every request is answered, and rpc.ping throughout")
    func recomputeWhileReporting() async throws {
        try await AggregatorStack.inProcess { stack in
            try await ReportTests.week(stack)
            let parent = Auth(token: stack.family.parentCredential.token)
            let socket = stack.aggregatorSocket

            // A ping every 20 ms on a connection of its own; each must come back within 10 s.
            let pings = Mutex<(answered: Int, failures: [String])>((0, []))
            let pinger = Task {
                let client = RPCClient(configuration: ClientConfiguration(socketPath: socket, callTimeout: .seconds(10), connectTimeout: .seconds(10)))
                while !Task.isCancelled {
                    do {
                        _ = try await client.call(Builtin.ping, Empty())
                        pings.withLock { $0.answered += 1 }
                    } catch {
                        pings.withLock { $0.failures.append("\(error)") }
                        return
                    }
                    try? await Task.sleep(for: .milliseconds(20))
                }
                await client.close()
            }

            for round in 0..<3 {
                let failures = await withTaskGroup(of: [String].self) { connections in
                    for _ in 0..<8 {
                        connections.addTask {
                            let client = RPCClient(configuration: ClientConfiguration(socketPath: socket, callTimeout: .seconds(20), connectTimeout: .seconds(10)))
                            defer { Task { await client.close() } }
                            return await withTaskGroup(of: String?.self) { requests in
                                for index in 0..<30 {
                                    requests.addTask {
                                        do {
                                            if index % 4 == 3 {
                                                _ = try await client.call(AggregatorMethods.recompute, RecomputeParams(family: "smith", child: "emma"))
                                            } else {
                                                let report = try await client.call(AggregatorMethods.report,
                                                                                   ReportParams(child: "emma", from: "2026-11-15", to: "2026-11-29", by: .week), actingFor: parent)
                                                guard report.learningSeconds == 7200 else { return "report: \(report.learningSeconds) s of learning" }
                                            }
                                            return nil
                                        } catch {
                                            return "\(error)"
                                        }
                                    }
                                }
                                var failures: [String] = []
                                for await failure in requests { if let failure { failures.append(failure) } }
                                return failures
                            }
                        }
                    }
                    var all: [String] = []
                    for await failures in connections { all += failures }
                    return all
                }
                #expect(failures.count == 0, "round \(round): \(failures.count) of 240 requests failed: \(failures.prefix(3))")
                #expect(pings.withLock { $0.failures }.isEmpty, "round \(round): rpc.ping went unanswered: \(pings.withLock { $0.failures })")
                if !failures.isEmpty { break }
            }
            pinger.cancel()
            _ = await pinger.value
            #expect(pings.withLock { $0.answered } > 0)
            // And the service still does its work: a new session is summarised.
            try await stack.session("after", from: stack.at("2026-11-25 08:00"), to: stack.at("2026-11-25 08:05"))
            try await stack.waitForSummary("2026-11-25") { $0?.learning == 300 }
        }
    }
}
