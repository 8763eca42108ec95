import Foundation

/// Credentials a device presents with a request.
public struct Auth: Codable, Sendable, Hashable {
    public var token: String
    public init(token: String) { self.token = token }
}

/// The parts of a request the runtime needs before it knows the method's parameter type.
///
/// ```
/// {"id": 7, "method": "store.modify", "params": {…}, "auth": {"token": "…"}}
/// ```
/// `id` absent means a one-way request (no reply); `params` absent or null means `{}`.
public struct RequestHead: Sendable, Hashable {
    public var id: RequestID?
    public var method: String
    public var auth: Auth?

    public init(id: RequestID?, method: String, auth: Auth? = nil) {
        self.id = id
        self.method = method
        self.auth = auth
    }

    /// A request head that could not be read: the error to send back, and the id to send it
    /// to if the id itself was readable.
    public struct Failure: Error, Sendable {
        public var id: RequestID?
        public var error: RPCError
    }

    /// Reads the head of one request frame's payload.
    public static func parse(_ payload: Data) -> Result<RequestHead, Failure> {
        if payload.isEmpty {
            return .failure(Failure(id: nil, error: RPCError(.invalidFrame, "the frame is empty; a frame carries one JSON object")))
        }
        let raw: RawHead
        do {
            raw = try sharedDecoder.decode(RawHead.self, from: payload)
        } catch {
            return .failure(Failure(id: nil, error: Self.describeUnreadable(payload, error)))
        }
        if let problem = raw.problem {
            return .failure(Failure(id: raw.id, error: RPCError(.invalidRequest, problem)))
        }
        return .success(RequestHead(id: raw.id, method: raw.method, auth: raw.auth))
    }

    private static func describeUnreadable(_ payload: Data, _ error: any Error) -> RPCError {
        if String(validating: payload, as: UTF8.self) == nil {
            return RPCError(.invalidJSON, "the frame is not valid UTF-8")
        }
        if case DecodingError.dataCorrupted(let context) = error, context.codingPath.isEmpty {
            let detail = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return RPCError(.invalidJSON, "the frame is not valid JSON" + (detail.map { ": \($0)" } ?? ""))
        }
        return RPCError(.invalidJSON, "the frame is not valid JSON: \(error)")
    }
}

/// Decodes the head leniently: every problem is recorded, not thrown, so the id (when it
/// could be read) still reaches the error reply.
private struct RawHead: Decodable {
    var id: RequestID?
    var method = ""
    var auth: Auth?
    var problem: String?

    private enum Key: String, CodingKey { case id, method, params, auth }

    init(from decoder: any Decoder) throws {
        let container: KeyedDecodingContainer<Key>
        do {
            container = try decoder.container(keyedBy: Key.self)
        } catch {
            self.problem = "a request must be a JSON object with \"method\" and, to get a reply, \"id\""
            return
        }
        if container.contains(.id) {
            if (try? container.decodeNil(forKey: .id)) == true {
                self.problem = "\"id\" must be a string or an integer; leave it out for a one-way request"
            } else if let id = try? container.decode(RequestID.self, forKey: .id) {
                self.id = id
            } else {
                self.problem = "\"id\" must be a string or an integer"
            }
        }
        guard self.problem == nil else { return }
        if !container.contains(.method) {
            self.problem = "\"method\" is required"
            return
        }
        guard let method = try? container.decode(String.self, forKey: .method) else {
            self.problem = "\"method\" must be a string"
            return
        }
        guard !method.isEmpty else {
            self.problem = "\"method\" must not be empty"
            return
        }
        self.method = method
        if container.contains(.params), (try? container.decodeNil(forKey: .params)) != true,
            (try? container.nestedContainer(keyedBy: Key.self, forKey: .params)) == nil
        {
            self.problem = "\"params\" must be a JSON object"
            return
        }
        if container.contains(.auth), (try? container.decodeNil(forKey: .auth)) != true {
            guard let auth = try? container.decode(Auth.self, forKey: .auth) else {
                self.problem = "\"auth\" must be an object with a string \"token\""
                return
            }
            self.auth = auth
        }
    }
}

// Shared coders: Sendable, and never reconfigured after this point.
private let sharedDecoder = RPCJSON.makeDecoder()
private let sharedEncoder = RPCJSON.makeEncoder()

/// Decoding a method's typed parameters from a request frame.
public enum ParamsDecoding {
    /// Decodes `params` as `P`, mapping any failure to `invalid_params` that names the
    /// parameter (`params.zone.name`) and says why.
    public static func decode<P: Decodable>(_ type: P.Type, from payload: Data) throws(RPCError) -> P {
        do {
            if let params = try sharedDecoder.decode(ParamsBox<P>.self, from: payload).params {
                return params
            }
            return try sharedDecoder.decode(P.self, from: Data("{}".utf8))
        } catch let error as RPCError {
            throw error
        } catch let error as DecodingError {
            throw Self.describe(error)
        } catch {
            throw RPCError(.invalidParams, "params could not be read: \(error)")
        }
    }

    /// Turns a `DecodingError` into `invalid_params` with the parameter's path.
    public static func describe(_ error: DecodingError) -> RPCError {
        switch error {
        case .keyNotFound(let key, let context):
            return .invalidParams(path(context.codingPath + [key]), "is required")
        case .valueNotFound(_, let context):
            return .invalidParams(path(context.codingPath), "must not be null")
        case .typeMismatch(let type, let context):
            if let rpc = context.underlyingError as? RPCError { return rpc }
            return .invalidParams(path(context.codingPath), "must be \(jsonTypeName(type))")
        case .dataCorrupted(let context):
            if let rpc = context.underlyingError as? RPCError { return rpc }
            return .invalidParams(path(context.codingPath), context.debugDescription)
        @unknown default:
            return RPCError(.invalidParams, "params could not be read: \(error)")
        }
    }

    static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        if !text.hasPrefix("params") { text = text.isEmpty ? "params" : "params.\(text)" }
        return text
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type, is Substring.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is Int16.Type, is Int8.Type,
            is UInt.Type, is UInt64.Type, is UInt32.Type, is UInt16.Type, is UInt8.Type:
            return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array<") || name.hasPrefix("[") && !name.contains(":") { return "an array" }
            return "an object"
        }
    }
}

private struct ParamsBox<P: Decodable>: Decodable {
    var params: P?
}

/// Building reply frames' payloads.
///
/// ```
/// {"id": 7, "result": {…}}                      final success
/// {"id": 7, "result": {…}, "continues": true}   one item of a stream
/// {"id": 7, "error": {"code", "message", "data"?}}
/// ```
public enum ReplyEncoding {
    public static func result<R: Encodable>(id: RequestID, _ result: R, continues: Bool = false) throws -> Data {
        try sharedEncoder.encode(ResultReply(id: id, result: result, continues: continues ? true : nil))
    }

    /// The same reply around a result encoded already.
    public static func result(id: RequestID, encoded result: EncodedJSON, continues: Bool = false) throws -> Data {
        var reply = Data()
        reply.reserveCapacity(result.bytes.count + 48)
        reply.append(contentsOf: #"{"id":"#.utf8)
        switch id {
        case .int(let value): reply.append(contentsOf: String(value).utf8)
        case .string: reply.append(try sharedEncoder.encode(id))
        }
        reply.append(contentsOf: #","result":"#.utf8)
        reply.append(contentsOf: result.bytes)
        reply.append(contentsOf: (continues ? #","continues":true}"# : "}").utf8)
        return reply
    }

    public static func error(id: RequestID?, _ error: RPCError) -> Data {
        // An RPCError always encodes; fall back to a fixed text rather than crash.
        (try? sharedEncoder.encode(ErrorReply(id: id, error: error)))
            ?? Data(#"{"id":null,"error":{"code":"internal","message":"could not encode the error reply"}}"#.utf8)
    }

    public static func request<P: Encodable>(id: RequestID?, method: String, params: P, auth: Auth?) throws -> Data {
        try sharedEncoder.encode(RequestEnvelope(id: id, method: method, params: params, auth: auth))
    }
}

private struct ResultReply<R: Encodable>: Encodable {
    var id: RequestID
    var result: R
    var continues: Bool?
}

private struct ErrorReply: Encodable {
    var id: RequestID?
    var error: RPCError

    enum CodingKeys: CodingKey { case id, error }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.id, forKey: .id)  // null when the id could not be read
        try container.encode(self.error, forKey: .error)
    }
}

private struct RequestEnvelope<P: Encodable>: Encodable {
    var id: RequestID?
    var method: String
    var params: P
    var auth: Auth?
}

/// The parts of a reply a client needs to route it.
public struct ReplyHead: Decodable, Sendable {
    public var id: RequestID?
    public var error: RPCError?
    public var continues: Bool?

    public static func parse(_ payload: Data) throws -> ReplyHead {
        try sharedDecoder.decode(ReplyHead.self, from: payload)
    }
}

/// Decoding the typed `result` of a reply.
public enum ResultDecoding {
    public static func decode<R: Decodable>(_ type: R.Type, from payload: Data) throws -> R {
        try sharedDecoder.decode(ResultBox<R>.self, from: payload).result
    }
}

private struct ResultBox<R: Decodable>: Decodable {
    var result: R
}
