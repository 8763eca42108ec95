import Foundation
import RPCCore

/// A service's methods: each declared once by its ``MethodSpec`` or ``StreamSpec`` and
/// its handler. `rpc.describe` is generated from this table.
public struct MethodTable: Sendable {
    var entries: [String: Entry] = [:]
    var order: [String] = []

    public init() {}

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
        precondition(self.entries[description.name] == nil, "method \(description.name) declared twice")
        self.entries[description.name] = Entry(description: description, run: run)
        self.order.append(description.name)
    }

    var descriptions: [MethodDescription] { self.order.compactMap { self.entries[$0]?.description } }

    struct Entry: Sendable {
        /// `params` as parsed with the request's head (nil: absent).
        typealias Run = @Sendable (_ params: JSONValue?, _ context: RequestContext, _ outbound: Outbound) async throws -> Void
        var description: MethodDescription
        var run: Run
        var isStream: Bool { self.description.kind == .stream }
    }
}
