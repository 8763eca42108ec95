import Foundation
import RPCCore

/// A service's methods: each declared once by its ``MethodSpec`` or ``StreamSpec`` (listed
/// in its API module's ``MethodList``) and its handler. `rpc.describe` is generated from
/// this table.
public struct MethodTable: Sendable {
    var entries: [String: Entry] = [:]
    var order: [String] = []
    /// The list this table implements: a handler for a method not on it is a programming
    /// error, and a method on it without a handler stops the server at start-up.
    let declared: MethodList?

    /// A table that implements exactly `list`.
    public init(implementing list: MethodList) {
        self.declared = list
    }

    /// A table with no declared list (the built-ins, test fixtures).
    public init() {
        self.declared = nil
    }

    /// Declared methods that have no handler.
    public var missingHandlers: [String] {
        self.declared?.names.filter { self.entries[$0] == nil } ?? []
    }

    /// Fails unless every declared method has its handler.
    public func validate() throws(MethodTableError) {
        let missing = self.missingHandlers
        guard missing.isEmpty else {
            throw MethodTableError(
                "the \(self.declared?.service ?? "") service declares \(missing.joined(separator: ", ")) but has no handler for \(missing.count == 1 ? "it" : "them")")
        }
    }

    /// Adds every method of `other`, which must not name one this table has.
    mutating func merge(_ other: MethodTable) {
        for name in other.order {
            precondition(self.entries[name] == nil, "method \(name) declared twice")
            self.entries[name] = other.entries[name]
            self.order.append(name)
        }
    }

    /// Adds a unary method.
    public mutating func on<P, R>(_ spec: MethodSpec<P, R>, _ handler: @escaping @Sendable (P, RequestContext) async throws -> R) {
        self.add(spec.describedAs) { rawParams, context, outbound in
            let params = try ParamsDecoding.decode(P.self, params: rawParams)
            let result = try await handler(params, context)
            guard let id = context.requestID else { return }
            await outbound.sendOrDrop(try ReplyEncoding.result(id: id, result))
        }
    }

    /// Adds a streaming method: the handler yields items through the writer and returns the
    /// final result.
    public mutating func on<P, I, E>(_ spec: StreamSpec<P, I, E>, _ handler: @escaping @Sendable (P, StreamWriter<I>, RequestContext) async throws -> E) {
        self.add(spec.describedAs) { rawParams, context, outbound in
            let params = try ParamsDecoding.decode(P.self, params: rawParams)
            let end = try await handler(params, StreamWriter(id: context.requestID, outbound: outbound), context)
            guard let id = context.requestID else { return }
            await outbound.sendOrDrop(try ReplyEncoding.result(id: id, end))
        }
    }

    private mutating func add(_ description: MethodDescription, _ run: @escaping Entry.Run) {
        if let declared = self.declared {
            precondition(declared.method(named: description.name) != nil,
                         "method \(description.name) has a handler but is not in the \(declared.service) service's MethodList")
        }
        precondition(self.entries[description.name] == nil, "method \(description.name) declared twice")
        self.entries[description.name] = Entry(description: description, run: run)
        self.order.append(description.name)
    }

    /// In the declared list's order when there is one, else in the order handlers were added.
    var descriptions: [MethodDescription] {
        (self.declared?.names ?? self.order).compactMap { self.entries[$0]?.description }
    }

    struct Entry: Sendable {
        /// `params` as parsed with the request's head (nil: absent).
        typealias Run = @Sendable (_ params: JSONValue?, _ context: RequestContext, _ outbound: Outbound) async throws -> Void
        var description: MethodDescription
        var run: Run
        var isStream: Bool { self.description.kind == .stream }
    }
}

/// A method table that does not match its declared list.
public struct MethodTableError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
