import Logging
import ArgumentParser
import Foundation
import RPCCore
import RPCServer
import ServiceKit

// A small service for the integration tests: each method exercises one part of the
// runtime (typed params, out-of-order replies, streams, errors, peer credentials, logging).

struct EchoParams: Codable, Sendable {
    var message: String
    var times: Int?
}
struct EchoResult: Codable, Sendable { var message: String }

struct SleepParams: Codable, Sendable {
    var milliseconds: Int
    var tag: String?
}
struct SleepResult: Codable, Sendable {
    var milliseconds: Int
    var tag: String?
}

struct CountParams: Codable, Sendable {
    var count: Int
    var intervalMilliseconds: Int?
}
struct CountItem: Codable, Sendable { var index: Int }
struct CountEnd: Codable, Sendable { var sent: Int }

struct FailParams: Codable, Sendable {
    var code: String
    var message: String
    /// Bytes of padding in the error's `data` (not logged): a large error reply.
    var padding: Int?
}

enum Flavour: String, StringEnum { case sweet, sour }
struct TasteParams: Codable, Sendable {
    var flavour: Flavour
    var tags: [String]?
}

struct WhoAmI: Codable, Sendable {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32
}

struct LogParams: Codable, Sendable {
    var message: String
    var fields: [String: String]?
}

enum TestAPI {
    static let echo = MethodSpec<EchoParams, EchoResult>("test.echo", summary: "Returns the message, repeated `times` times.", callers: .anyone)
    static let sleep = MethodSpec<SleepParams, SleepResult>("test.sleep", summary: "Answers after the given delay.", callers: .anyone)
    static let count = StreamSpec<CountParams, CountItem, CountEnd>("test.count", summary: "Streams 0..<count, then the total.", callers: .anyone)
    static let fail = MethodSpec<FailParams, Empty>("test.fail", summary: "Fails with the given code and message (and `padding` bytes of data).", callers: .anyone)
    static let crash = MethodSpec<Empty, Empty>("test.crash", summary: "Throws an unexpected error (becomes `internal`).", callers: .anyone, errors: [.internal])
    static let taste = MethodSpec<TasteParams, TasteParams>("test.taste", summary: "Returns its params; `flavour` is an enum.", callers: .anyone)
    static let whoami = MethodSpec<Empty, WhoAmI>("test.whoami", summary: "The caller's SO_PEERCRED credentials.", callers: .anyone)
    static let log = MethodSpec<LogParams, Empty>("test.log", summary: "Logs the message at notice with the fields as metadata.", callers: .anyone)
    static let list = MethodList(service: "test", [echo, sleep, count, fail, crash, taste, whoami, log])
}

struct UnexpectedFailure: Error {}

@main
struct TestService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-testd",
        abstract: "A test service for the RPC runtime's integration tests."
    )

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        try await ServiceMain.run(service: "test", identifier: "screentime-testd", version: "0.0.0-test", options: self.options) { _ in
            var methods = MethodTable(implementing: TestAPI.list)
            methods.on(TestAPI.echo) { params, _ in
                EchoResult(message: String(repeating: params.message, count: max(1, params.times ?? 1)))
            }
            methods.on(TestAPI.sleep) { params, context in
                // A test waits for this line to know the request is running.
                context.logger.debug("sleeping", metadata: ["milliseconds": "\(params.milliseconds)"])
                try await Task.sleep(for: .milliseconds(params.milliseconds))
                return SleepResult(milliseconds: params.milliseconds, tag: params.tag)
            }
            methods.on(TestAPI.count) { params, stream, _ in
                guard params.count >= 0 else { throw RPCError.invalidParams("params.count", "must not be negative") }
                for index in 0..<params.count {
                    try await stream.yield(CountItem(index: index))
                    if let interval = params.intervalMilliseconds, interval > 0 {
                        try await Task.sleep(for: .milliseconds(interval))
                    }
                }
                return CountEnd(sent: params.count)
            }
            methods.on(TestAPI.fail) { params, _ in
                let data: JSONValue? = params.padding.map { ["padding": .string(String(repeating: "x", count: $0))] }
                throw RPCError(ErrorCode(params.code), params.message, data: data)
            }
            methods.on(TestAPI.crash) { _, _ in throw UnexpectedFailure() }
            methods.on(TestAPI.taste) { params, _ in params }
            methods.on(TestAPI.whoami) { _, context in
                guard let peer = context.peer else { throw RPCError(.internal, "no peer credentials") }
                return WhoAmI(pid: peer.pid, uid: peer.uid, gid: peer.gid)
            }
            methods.on(TestAPI.log) { params, context in
                var metadata: [String: Logger.MetadataValue] = [:]
                for (key, value) in params.fields ?? [:] { metadata[key] = .string(value) }
                context.logger.notice("\(params.message)", metadata: metadata)
                return Empty()
            }
            return ServiceSetup(methods: methods)
        }
    }
}
