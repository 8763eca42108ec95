/// A unary method: one request, one reply. Declared once, in a module both the service and
/// its clients import, so the name and the types cannot disagree.
///
/// Any unary method may also be called one-way (a request without `id`): it runs, and no
/// reply is sent.
public struct MethodSpec<Params: Codable & Sendable, Result: Codable & Sendable>: DeclaredMethod {
    public let name: String
    public let summary: String
    /// Who may call it.
    public let callers: Callers
    /// The errors this method itself may return, beyond the protocol's own.
    public let errors: [ErrorCode]

    public init(_ name: String, summary: String, callers: Callers, errors: [ErrorCode] = []) {
        self.name = name
        self.summary = summary
        self.callers = callers
        self.errors = errors
    }

    public var kind: MethodDescription.Kind { .unary }

    public var describedAs: MethodDescription {
        MethodDescription(
            name: self.name,
            summary: self.summary,
            kind: .unary,
            callers: self.callers.list,
            params: SchemaRecorder.schema(for: Params.self),
            result: SchemaRecorder.schema(for: Result.self),
            item: nil,
            errors: MethodDescription.errors(MethodDescription.commonErrors + self.errors)
        )
    }
    public func decodeParams(_ params: RequestParams?) throws(RPCError) -> any Codable & Sendable {
        try ParamsDecoding.decode(Params.self, params: params)
    }

    public func decodeParams(_ params: JSONValue?) throws(RPCError) -> any Codable & Sendable {
        try ParamsDecoding.decode(Params.self, params: params)
    }
}

/// A streaming method: one request, many replies with `"continues": true`, then a final
/// reply carrying `End` (or an error). The client may cancel it with `rpc.cancel`.
public struct StreamSpec<Params: Codable & Sendable, Item: Codable & Sendable, End: Codable & Sendable>: DeclaredMethod {
    public let name: String
    public let summary: String
    public let callers: Callers
    public let errors: [ErrorCode]

    public init(_ name: String, summary: String, callers: Callers, errors: [ErrorCode] = []) {
        self.name = name
        self.summary = summary
        self.callers = callers
        self.errors = errors
    }

    public var kind: MethodDescription.Kind { .stream }

    public var describedAs: MethodDescription {
        MethodDescription(
            name: self.name,
            summary: self.summary,
            kind: .stream,
            callers: self.callers.list,
            params: SchemaRecorder.schema(for: Params.self),
            result: SchemaRecorder.schema(for: End.self),
            item: SchemaRecorder.schema(for: Item.self),
            errors: MethodDescription.errors(MethodDescription.commonErrors + [.cancelled] + self.errors)
        )
    }
    public func decodeParams(_ params: RequestParams?) throws(RPCError) -> any Codable & Sendable {
        try ParamsDecoding.decode(Params.self, params: params)
    }

    public func decodeParams(_ params: JSONValue?) throws(RPCError) -> any Codable & Sendable {
        try ParamsDecoding.decode(Params.self, params: params)
    }
}

/// One method as `rpc.describe` reports it.
public struct MethodDescription: Codable, Sendable, Hashable {
    public enum Kind: String, StringEnum {
        case unary
        case stream
    }

    public var name: String
    public var summary: String
    public var kind: Kind
    /// Who may call it: `local`, `parent`, `child`, `unauthenticated`.
    public var callers: [Caller]
    /// The shape of `params`.
    public var params: Schema
    /// The shape of the final reply's `result`.
    public var result: Schema
    /// For streams: the shape of each `"continues": true` reply's `result`.
    public var item: Schema?
    /// Every error code the method may return.
    public var errors: [ErrorCode]

    /// Errors any method can return, whatever it does.
    public static let commonErrors: [ErrorCode] = [.invalidParams, .limitExceeded, .unavailable, .internal]

    /// The codes in the order first named, each once.
    public static func errors(_ codes: [ErrorCode]) -> [ErrorCode] {
        var seen = Set<ErrorCode>()
        return codes.filter { seen.insert($0).inserted }
    }
}

/// An empty parameter list or result: `{}`.
public struct Empty: Codable, Sendable, Hashable {
    public init() {}
}
