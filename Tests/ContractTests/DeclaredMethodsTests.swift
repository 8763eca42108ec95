import AggregatorAPI
import AggregatorEngine
import Foundation
import PairingAPI
import PairingEngine
import PushAPI
import PushEngine
import RPCClient
import RPCCore
import RPCServer
import RecordStore
import ServiceHarness
import ServiceKit
import StoreAPI
import Testing
import TestSupport

/// Each service's methods are declared once, in its API module's list, with their callers.
/// The running service must serve exactly that list, `rpc.describe` must report it, and
/// docs/protocol.md must document it: adding a method without any of the three fails here.
@Suite("Declared methods: the list, rpc.describe and docs/protocol.md agree")
struct DeclaredMethodsTests {
    struct Declared: Sendable, CustomTestStringConvertible {
        let list: MethodList
        let setup: @Sendable (ServiceEnvironment) async throws -> ServiceSetup
        var testDescription: String { self.list.service }
    }

    static let services: [Declared] = [
        Declared(list: StoreMethods.list) { try await .store(StoreConfiguration(wake: []), environment: $0) },
        Declared(list: PairingMethods.list) { environment in
            try await .pairing(PairingConfiguration(storeSocket: environment.paths.socketPath(for: "store"), serverAddress: "test.invalid"),
                               environment: environment)
        },
        Declared(list: PushMethods.list) { environment in
            try await .push(PushConfiguration(storeSocket: environment.paths.socketPath(for: "store"), version: "0.0.0-test"), environment: environment)
        },
        Declared(list: AggregatorMethods.list) { environment in
            try await .aggregator(AggregatorConfiguration(storeSocket: environment.paths.socketPath(for: "store"),
                                                          pushSocket: environment.paths.socketPath(for: "push")),
                                  environment: environment)
        },
    ]

    @Test("rpc.describe reports the declared methods, in order, with their callers", arguments: Self.services)
    func describeMatchesTheList(_ declared: Declared) async throws {
        let directory = TemporaryDirectory()
        let described = try await withService(declared.list.service, in: directory, setup: declared.setup) { service in
            try await service.client.call(Builtin.describe, DescribeParams())
        }
        let builtins = [Builtin.ping.name, Builtin.describe.name, Builtin.cancel.name, Builtin.metrics.name]
        #expect(described.methods.map(\.name) == builtins + declared.list.names)
        for method in declared.list.methods {
            let reported = try #require(described.methods.first { $0.name == method.name })
            #expect(reported.callers == method.callers.list, "\(method.name)")
        }
        // The service's own codes follow the protocol's, each once.
        #expect(Array(described.errorCodes.prefix(ErrorCode.protocolCodes.count)) == ErrorCode.protocolCodes)
        #expect(Set(described.errorCodes).count == described.errorCodes.count)
        for method in described.methods {
            #expect(Set(method.errors).isSubset(of: Set(described.errorCodes)), "\(method.name) names a code errorCodes lacks")
            #expect(Set(method.errors).count == method.errors.count, "\(method.name) repeats an error code")
        }
    }

    @Test("docs/protocol.md documents every declared method with the same callers, and no other", arguments: Self.services)
    func protocolDocMatchesTheList(_ declared: Declared) throws {
        let documented = try ProtocolDoc.load().callers.filter { $0.key.hasPrefix(declared.list.service + ".") }
        #expect(Set(documented.keys) == Set(declared.list.names))
        for method in declared.list.methods {
            #expect(documented[method.name] == method.callers.list, "\(method.name): docs/protocol.md says \(documented[method.name] ?? [])")
        }
    }

    @Test("a declared method without a handler, a handler for an undeclared one, or two for one: the table does not validate")
    func tableMustBeItsList() throws {
        let list = MethodList(service: "partial", [PushMethods.ack])
        #expect(throws: MethodTableError.self) { try MethodTable(implementing: list).validate() }
        var undeclared = MethodTable(implementing: list)
        undeclared.on(PushMethods.ack) { _, _ in AckResult(acked: 0, pending: 0) }
        undeclared.on(PushMethods.notify) { _, _ in NotifyResult(queued: []) }
        let error = #expect(throws: MethodTableError.self) { try undeclared.validate() }
        #expect(error?.description.contains("push.notify") == true)
        var twice = MethodTable(implementing: list)
        twice.on(PushMethods.ack) { _, _ in AckResult(acked: 0, pending: 0) }
        twice.on(PushMethods.ack) { _, _ in AckResult(acked: 1, pending: 0) }
        #expect(throws: MethodTableError.self) { try twice.validate() }
    }

    @Test("a service whose table is not its list stops before it serves")
    func missingHandlerFailsAtStartUp() async throws {
        let list = MethodList(service: "partial", [PushMethods.ack])
        let error = await #expect(throws: (any Error).self) {
            try await withService("partial", in: TemporaryDirectory(), setup: { _ in ServiceSetup(methods: MethodTable(implementing: list)) }) { _ in }
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("push.ack"))
    }

    @Test("the declared callers are enforced before the service runs anything: a credential on a local-only method is forbidden, none on a device's method unauthorized",
          arguments: Self.services)
    func callersAreEnforced(_ declared: Declared) async throws {
        try await withService(declared.list.service, in: TemporaryDirectory(), setup: declared.setup) { service in
            let device = service.client(auth: Auth(token: "not-a-real-token"))
            for method in declared.list.methods {
                // Params that could never decode: the caller check comes first.
                let probe = MethodSpec<Empty, Empty>(method.name, summary: "", callers: .anyone)
                if method.callers.isDisjoint(with: .devices) {
                    await expectError(.forbidden, containing: method.name) { _ = try await device.call(probe, Empty()) }
                }
                if method.callers.isDisjoint(with: [.local, .unauthenticated]) {
                    await expectError(.unauthorized, containing: method.name) { _ = try await service.client.call(probe, Empty()) }
                }
            }
        }
    }
}

/// The method tables of docs/protocol.md: every row of a table headed
/// `| Method | Callers | …`, as method name → callers.
struct ProtocolDoc {
    var callers: [String: [Caller]] = [:]

    static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/protocol.md").path

    static func load() throws -> ProtocolDoc {
        var doc = ProtocolDoc()
        var inMethodTable = false
        for line in try String(contentsOfFile: Self.path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("|") else { inMethodTable = false; continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.count >= 2, cells[0] == "Method", cells[1] == "Callers" { inMethodTable = true; continue }
            guard inMethodTable, cells.count >= 2, cells[0].hasPrefix("`") else { continue }
            let name = String(cells[0].dropFirst().prefix { $0 != "`" })
            // "parent (admins only)": the note is for people; the callers are the words before it.
            let words = cells[1].prefix { $0 != "(" }.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            doc.callers[name] = try words.map { word in
                guard let caller = Caller(rawValue: word) else { throw TestFailure("protocol.md names an unknown caller \"\(word)\" for \(name)") }
                return caller
            }
        }
        return doc
    }
}
