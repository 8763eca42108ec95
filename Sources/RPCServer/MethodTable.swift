import Foundation
import RPCCore

/// A service's methods: each declared once by its ``MethodSpec`` or ``StreamSpec`` (listed
/// in its API module's ``MethodList``) and its handler. `rpc.describe` is generated from
/// this table.
public struct MethodTable: Sendable {
    var entries: [String: Entry] = [:]
    var order: [String] = []
    /// The list this table implements: a method on it without a handler, a handler for a
    /// method not on it, or one added twice, stops the service before it starts.
    let declared: MethodList?
    /// What ``validate()`` reports: handlers added for undeclared methods, or twice.
    private var problems: [String] = []
    /// Runs around the serving of the frames of one read from a connection (its argument),
    /// on the connection's event loop: what the requests answered there share may be taken
    /// once for all of them (``LoopReaders``' snapshot). Every one of those frames was in
    /// the process before it runs, so what was written before any of them was sent is
    /// there for all of them.
    public var aroundRead: (@Sendable (() -> Void) -> Void)?

    /// A table that implements exactly `list`.
    public init(implementing list: MethodList) {
        self.declared = list
    }

    /// The built-ins' table, which has no list of its own.
    init() {
        self.declared = nil
    }

    /// Declared methods that have no handler.
    public var missingHandlers: [String] {
        self.declared?.names.filter { self.entries[$0] == nil } ?? []
    }

    /// Fails unless the table is exactly its declared list: ServiceMain and the test harness
    /// call it before anything of the service starts.
    public func validate() throws(MethodTableError) {
        var problems = self.problems
        let missing = self.missingHandlers
        if !missing.isEmpty {
            problems.append("declares \(missing.joined(separator: ", ")) but has no handler for \(missing.count == 1 ? "it" : "them")")
        }
        guard problems.isEmpty else {
            throw MethodTableError("the \(self.declared?.service ?? "") service " + problems.joined(separator: "; "))
        }
    }

    /// Adds every method of `other`; a name this table has already is a problem for
    /// ``validate()`` (a service method named like a built-in).
    mutating func merge(_ other: MethodTable) {
        self.problems += other.problems
        self.aroundRead = self.aroundRead ?? other.aroundRead
        for name in other.order {
            guard self.entries[name] == nil else {
                self.problems.append("has a method \(name) that is already declared")
                continue
            }
            self.entries[name] = other.entries[name]
            self.order.append(name)
        }
    }

    /// Adds a unary method.
    public mutating func on<P, R>(_ spec: MethodSpec<P, R>, _ handler: @escaping @Sendable (P, RequestContext) async throws -> R) {
        self.add(spec.name, isStream: false, callers: spec.callers.list, describe: { spec.describedAs }, immediate: nil, Self.unary(handler))
    }

    /// Adds a unary method answered on the connection's event loop when it can be, with no
    /// task of its own: `immediately` runs there as the request is read and returns the
    /// result, or nil when the request must wait for something (then `handler` runs as an
    /// ordinary request). For what never waits: a built-in's answer, a point read on the
    /// loop's own database connection.
    public mutating func on<P, R>(_ spec: MethodSpec<P, R>, immediately: @escaping @Sendable (P, RequestContext) throws -> R?,
                                  otherwise handler: @escaping @Sendable (P, RequestContext) async throws -> R) {
        self.add(spec, immediately, encode: { id, result in try ReplyEncoding.resultBytes(id: id, result) }, otherwise: handler)
    }

    /// The same, with the answer given on the loop written by `W`, which must write the
    /// JSON of an `R` (for a result made of parts stored as JSON text already: a fetched
    /// record's fields go out as the store has them).
    public mutating func on<P, R, W: JSONWritable>(_ spec: MethodSpec<P, R>, immediatelyWritten immediately: @escaping @Sendable (P, RequestContext) throws -> W?,
                                                   otherwise handler: @escaping @Sendable (P, RequestContext) async throws -> R) {
        self.add(spec, immediately, encode: { id, result in try ReplyEncoding.resultBytes(id: id, written: result) }, otherwise: handler)
    }

    private mutating func add<P, R, A>(_ spec: MethodSpec<P, R>, _ immediately: @escaping @Sendable (P, RequestContext) throws -> A?,
                                       encode: @escaping @Sendable (RequestID, A) throws -> [UInt8],
                                       otherwise handler: @escaping @Sendable (P, RequestContext) async throws -> R) {
        let immediate: Entry.Immediate = { rawParams, context in
            let params = try ParamsDecoding.decode(P.self, params: rawParams)
            guard let result = try immediately(params, context) else { return .deferred }
            guard let id = context.requestID else { return .answered(nil) }
            return .answered(try encode(id, result))
        }
        self.add(spec.name, isStream: false, callers: spec.callers.list, describe: { spec.describedAs }, immediate: immediate, Self.unary(handler))
    }

    /// A unary handler run as a task: its params decoded, its result sent as the reply.
    private static func unary<P: Decodable, R: Encodable>(_ handler: @escaping @Sendable (P, RequestContext) async throws -> R) -> Entry.Run {
        { rawParams, context, outbound in
            let params = try ParamsDecoding.decode(P.self, params: rawParams)
            let result = try await handler(params, context)
            guard let id = context.requestID else { return }
            await outbound.sendOrDrop(try ReplyEncoding.result(id: id, result))
        }
    }

    /// Adds a streaming method: the handler yields items through the writer and returns the
    /// final result.
    public mutating func on<P, I, E>(_ spec: StreamSpec<P, I, E>, _ handler: @escaping @Sendable (P, StreamWriter<I>, RequestContext) async throws -> E) {
        self.add(spec.name, isStream: true, callers: spec.callers.list, describe: { spec.describedAs }, immediate: nil) { rawParams, context, outbound in
            let params = try ParamsDecoding.decode(P.self, params: rawParams)
            let end = try await handler(params, StreamWriter(id: context.requestID, outbound: outbound), context)
            guard let id = context.requestID else { return }
            await outbound.sendOrDrop(try ReplyEncoding.result(id: id, end))
        }
    }

    /// `describe` is called only when `rpc.describe` is first asked: reading every method's
    /// schemas off its Codable types was a sixth of what a service did to start.
    private mutating func add(_ name: String, isStream: Bool, callers declaredCallers: [Caller],
                              describe: @escaping @Sendable () -> MethodDescription, immediate: Entry.Immediate?, _ run: @escaping Entry.Run) {
        if let declared = self.declared, declared.method(named: name) == nil {
            self.problems.append("has a handler for \(name), which its MethodList does not declare")
            return
        }
        guard self.entries[name] == nil else {
            self.problems.append("has two handlers for \(name)")
            return
        }
        let callers = Callers(declaredCallers)
        let guarded: Entry.Run = { rawParams, context, outbound in
            try CallerCheck.admit(context.auth, to: name, callers: callers)
            try await run(rawParams, context, outbound)
        }
        var guardedImmediate: Entry.Immediate?
        if let immediate {
            guardedImmediate = { rawParams, context throws -> ImmediateOutcome in
                try CallerCheck.admit(context.auth, to: name, callers: callers)
                return try immediate(rawParams, context)
            }
        }
        self.entries[name] = Entry(describe: describe, isStream: isStream, run: guarded, immediate: guardedImmediate)
        self.order.append(name)
    }

    /// In the declared list's order when there is one, else in the order handlers were added.
    var descriptions: [MethodDescription] {
        (self.declared?.names ?? self.order).compactMap { self.entries[$0]?.describe() }
    }

    struct Entry: Sendable {
        /// `params` as the request carried them, checked with its head (nil: absent).
        typealias Run = @Sendable (_ params: RequestParams?, _ context: RequestContext, _ outbound: Outbound) async throws -> Void
        /// Answers on the event loop, or says the request must run as a task.
        typealias Immediate = @Sendable (_ params: RequestParams?, _ context: RequestContext) throws -> ImmediateOutcome
        var describe: @Sendable () -> MethodDescription
        var isStream: Bool
        var run: Run
        var immediate: Immediate?
    }

    enum ImmediateOutcome {
        /// The reply (nil for a one-way request).
        case answered([UInt8]?)
        case deferred
    }
}

/// A method table that does not match its declared list.
public struct MethodTableError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The coarse check of a request's caller against the method's declared callers, before
/// its params are even decoded: a device's credential on a local-only method, or none on
/// a method that acts for a device. The service then checks the caller's rights itself
/// (a parent of another family, a child where only parents may).
enum CallerCheck {
    static func admit(_ auth: Auth?, to method: String, callers: Callers) throws(RPCError) {
        if auth != nil, callers.isDisjoint(with: .devices) {
            throw RPCError(.forbidden, "\(method) is local administration: for the server's administrator and local services (a call on the server without auth), not for a device",
                           data: ["method": .string(method)])
        }
        if auth == nil, callers.isDisjoint(with: [.local, .unauthenticated]) {
            throw RPCError(.unauthorized, "\(method) acts for a device: send its credential as auth.token",
                           data: ["method": .string(method)])
        }
    }
}
