import Foundation
import NIOCore

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
/// `from`, set by the gateway on what it relays: the network address the request came
/// from, as the limits count it (an IPv6 /64, or an IPv4 address).
public struct RequestHead: Sendable, Hashable {
    public var id: RequestID?
    public var method: String
    public var auth: Auth?
    public var from: String?

    public init(id: RequestID?, method: String, auth: Auth? = nil, from: String? = nil) {
        self.id = id
        self.method = method
        self.auth = auth
        self.from = from
    }

    /// The longest `from` taken (an IPv6 /64 written out is 25 bytes).
    public static let maximumFromLength = 64

    /// A request head that could not be read: the error to send back, and the id to send it
    /// to if the id itself was readable.
    public struct Failure: Error, Sendable {
        public var id: RequestID?
        public var error: RPCError
    }

    /// Reads the head of one request frame's payload.
    public static func parse(_ payload: Data) -> Result<RequestHead, Failure> {
        Self.parseRequest(payload).map(\.head)
    }

    /// Reads one request frame's payload: its head, and its `params` (nil when absent or
    /// null) for ``ParamsDecoding``, from one parse.
    public static func parseRequest(_ payload: Data) -> Result<(head: RequestHead, params: JSONValue?), Failure> {
        self.parseRequest(bytes: [UInt8](payload))
    }

    public static func parseRequest(bytes: [UInt8]) -> Result<(head: RequestHead, params: JSONValue?), Failure> {
        self.parseRequestLeavingParams(bytes: bytes).map { ($0.head, $0.params?.value) }
    }

    /// The same with the params checked but left as their bytes, for the method to read
    /// (``ParamsDecoding``, from a ``RequestParams``): building them as a `JSONValue`
    /// first was most of reading a point fetch's request.
    public static func parseRequestLeavingParams(bytes: [UInt8]) -> Result<(head: RequestHead, params: RequestParams?), Failure> {
        if bytes.isEmpty {
            return .failure(Failure(id: nil, error: RPCError(.invalidFrame, "the frame is empty; a frame carries one JSON object")))
        }
        guard UTF8Validation.isValid(bytes) else {
            return .failure(Failure(id: nil, error: RPCError(.invalidJSON, "the frame is not valid UTF-8")))
        }
        // The envelope's members as they come, each value checked (no dictionary of them:
        // that was a tenth of a ping); a member given twice counts as the last, as in a
        // parsed object.
        let members: [(key: String, value: Range<Int>)]
        do {
            members = try JSONParser.members(bytes: bytes)
        } catch {
            // Not an object, or not JSON: which one is the full parser's to say.
            do {
                _ = try JSONParser.parse(bytes: bytes)
            } catch {
                return .failure(Failure(id: nil, error: RPCError.unreadableJSON(error)))
            }
            return .failure(Failure(id: nil, error: RPCError(.invalidRequest, "a request must be a JSON object with \"method\" and, to get a reply, \"id\"")))
        }
        var (idRange, methodRange, paramsRange, authRange, fromRange): (Range<Int>?, Range<Int>?, Range<Int>?, Range<Int>?, Range<Int>?)
        for (key, range) in members {
            switch key {
            case "id": idRange = range
            case "method": methodRange = range
            case "params": paramsRange = range
            case "auth": authRange = range
            case "from": fromRange = range
            default: break
            }
        }
        // Checked already: parsing a member's value cannot fail.
        func value(_ range: Range<Int>?) -> JSONValue? { range.flatMap { try? JSONParser.parse(bytes: bytes, in: $0) } }
        var id: RequestID?
        if let idRange, let number = ReplyHead.integer(bytes[idRange]) {
            id = .int(number)
        } else {
            switch value(idRange) {
            case nil: break
            case .int(let number)?: id = .int(number)
            case .string(let text)?: id = .string(text)
            case .null?: return .failure(Failure(id: nil, error: RPCError(.invalidRequest, "\"id\" must be a string or an integer; leave it out for a one-way request")))
            default: return .failure(Failure(id: nil, error: RPCError(.invalidRequest, "\"id\" must be a string or an integer")))
            }
        }
        let method: String
        switch value(methodRange) {
        case nil: return .failure(Failure(id: id, error: RPCError(.invalidRequest, "\"method\" is required")))
        case .string(let text)? where !text.isEmpty: method = text
        case .string?: return .failure(Failure(id: id, error: RPCError(.invalidRequest, "\"method\" must not be empty")))
        default: return .failure(Failure(id: id, error: RPCError(.invalidRequest, "\"method\" must be a string")))
        }
        var params: RequestParams?
        if let paramsRange {
            switch bytes[paramsRange.lowerBound] {
            case UInt8(ascii: "{"): params = RequestParams(bytes: bytes, range: paramsRange)
            case UInt8(ascii: "n"): break  // null
            default: return .failure(Failure(id: id, error: RPCError(.invalidRequest, "\"params\" must be a JSON object")))
            }
        }
        var auth: Auth?
        switch value(authRange) {
        case nil, .null?: break
        case .object(let object)? where object["token"]?.stringValue != nil:
            auth = Auth(token: object["token"]!.stringValue!)
        default: return .failure(Failure(id: id, error: RPCError(.invalidRequest, "\"auth\" must be an object with a string \"token\"")))
        }
        var from: String?
        switch value(fromRange) {
        case nil, .null?: break
        case .string(let text)? where !text.isEmpty && text.utf8.count <= RequestHead.maximumFromLength: from = text
        default: return .failure(Failure(id: id, error: RPCError(.invalidRequest, "\"from\" must be a network address of at most \(RequestHead.maximumFromLength) bytes")))
        }
        return .success((RequestHead(id: id, method: method, auth: auth, from: from), params))
    }
}

/// A request's `params` object as it came: checked JSON, in the frame's bytes. A method
/// whose parameters read themselves (``JSONReadable``) reads them from here; any other
/// parses ``value``.
public struct RequestParams: Sendable {
    public let bytes: [UInt8]
    /// Where the object is in ``bytes`` (it starts with `{`).
    public let range: Range<Int>

    public init(bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        self.range = range
    }

    /// The params, parsed. The bytes were checked when the request was read: this cannot fail.
    public var value: JSONValue { (try? JSONParser.parse(bytes: self.bytes, in: self.range)) ?? .object([:]) }
}

/// Decoding a method's typed parameters from a request frame.
public enum ParamsDecoding {
    /// Decodes `params` as `P`, mapping any failure to `invalid_params` that names the
    /// parameter (`params.zone.name`) and says why.
    public static func decode<P: Decodable>(_ type: P.Type, from payload: Data) throws(RPCError) -> P {
        guard String(validating: payload, as: UTF8.self) != nil else {
            throw RPCError(.invalidJSON, "the frame is not valid UTF-8")
        }
        let request: JSONValue
        do {
            request = try JSONParser.parse(bytes: [UInt8](payload))
        } catch {
            throw RPCError.unreadableJSON(error)
        }
        let params = request["params"]
        return try self.decode(P.self, params: params == .null ? nil : params)
    }

    /// Decodes `params` as the request carried them (nil: absent or null, read as `{}`):
    /// straight from their bytes when `P` reads itself (``JSONReadable``), else parsed.
    public static func decode<P: Decodable>(_ type: P.Type, params: RequestParams?) throws(RPCError) -> P {
        if let params, let readable = P.self as? any JSONReadable.Type,
            let value = readable.read(bytes: params.bytes, range: params.range) as? P {
            return value
        }
        // The hand reader gave up on this shape (or there is none): it would give up on the
        // parsed value too.
        return try self.decodeThroughDecodable(P.self, params: params?.value)
    }

    /// Decodes `params` parsed already by ``RequestHead/parseRequest(_:)`` (nil: absent or
    /// null, read as `{}`).
    public static func decode<P: Decodable>(_ type: P.Type, params: JSONValue?) throws(RPCError) -> P {
        // Parameters that read themselves (JSONReadable: the busiest calls') skip the
        // generic decoder; any other shape goes through it, which refuses or accepts as ever.
        if let params, let readable = P.self as? any JSONReadable.Type, let value = readable.read(params) as? P { return value }
        return try self.decodeThroughDecodable(P.self, params: params)
    }

    private static func decodeThroughDecodable<P: Decodable>(_ type: P.Type, params: JSONValue?) throws(RPCError) -> P {
        do {
            return try JSONValueDecoding.decode(P.self, from: params ?? .object([:]), codingPath: [EnvelopeKey("params")])
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
        case is RequestID.Type: return "an integer or a string"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array<") || name.hasPrefix("[") && !name.contains(":") { return "an array" }
            return "an object"
        }
    }
}

extension RPCError {
    /// A frame that is UTF-8 but not JSON.
    static func unreadableJSON(_ failure: JSONParser.Failure) -> RPCError {
        RPCError(.invalidJSON, "the frame is not valid JSON (\(failure))")
    }
}

/// A member of the envelope (`params`, `result`) as the root of a coding path.
private struct EnvelopeKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { self.stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Building reply frames' payloads.
///
/// ```
/// {"id": 7, "result": {…}}                      final success
/// {"id": 7, "result": {…}, "continues": true}   one item of a stream
/// {"id": 7, "error": {"code", "message", "data"?}}
/// ```
public enum ReplyEncoding {
    /// Every result is written by the project's own writer: by hand (``JSONWritable``) or
    /// through ``StreamEncoding``, never Foundation's encoder.
    public static func result<R: Encodable>(id: RequestID, _ result: R, continues: Bool = false) throws -> Data {
        Data(try self.resultBytes(id: id, result, continues: continues))
    }

    /// The same reply as bytes, for a writer that takes them as they are.
    public static func resultBytes<R: Encodable>(id: RequestID, _ result: R, continues: Bool = false) throws -> [UInt8] {
        try self.reply(id: id, continues: continues, capacity: 512) { try $0.encodable(result) }
    }

    /// The same reply around a result that writes itself.
    public static func resultBytes(id: RequestID, written result: some JSONWritable) throws -> [UInt8] {
        try self.reply(id: id, continues: false, capacity: 512) { try result.write(to: &$0) }
    }

    /// The same reply around a result encoded already, as bytes: a stream item sent to many
    /// peers goes from here into the socket's buffer with one copy.
    public static func resultBytes(id: RequestID, encoded result: EncodedJSON, continues: Bool = false) -> [UInt8] {
        self.reply(id: id, continues: continues, capacity: result.bytes.count + 48) { $0.raw(result) }
    }

    /// `{"id":…,"result":…[,"continues":true]}`, the result written by `writeResult`.
    private static func reply(id: RequestID, continues: Bool, capacity: Int, _ writeResult: (inout JSONWriter) throws -> Void) rethrows -> [UInt8] {
        var writer = JSONWriter(capacity: capacity)
        writer.beginObject()
        Self.writeID(id, to: &writer)
        writer.member("result")
        try writeResult(&writer)
        if continues {
            writer.member("continues")
            writer.bool(true)
        }
        writer.endObject()
        return writer.bytes
    }

    public static func error(id: RequestID?, _ error: RPCError) -> Data {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        Self.writeID(id, to: &writer)  // null when the id could not be read
        writer.member("error")
        do {
            try writer.encodable(error)
        } catch {
            // An RPCError always encodes (its data is JSON already); a fixed text rather than a crash.
            return Data(#"{"id":null,"error":{"code":"internal","message":"could not encode the error reply"}}"#.utf8)
        }
        writer.endObject()
        return Data(writer.bytes)
    }

    /// The replies of one stream's items, whose bytes around the item are the same for
    /// every item: written once for the stream, not once per item and device.
    public struct StreamItems: Sendable {
        /// `{"id":…,"result":`
        private let head: [UInt8]
        private static let tail = Array(#","continues":true}"#.utf8)

        public init(id: RequestID) {
            var writer = JSONWriter(capacity: 32)
            writer.beginObject()
            ReplyEncoding.writeID(id, to: &writer)
            writer.member("result")
            self.head = writer.bytes
        }

        /// The length of the reply carrying `item`.
        public func count(_ item: EncodedJSON) -> Int { self.head.count + item.bytes.count + Self.tail.count }

        /// Appends the reply carrying `item` (as ``resultBytes(id:encoded:continues:)``
        /// writes it with `continues`).
        public func write(_ item: EncodedJSON, to buffer: inout ByteBuffer) {
            buffer.writeBytes(self.head)
            buffer.writeBytes(item.bytes)
            buffer.writeBytes(Self.tail)
        }
    }

    /// `"id":…`, or `"id":null` without one.
    private static func writeID(_ id: RequestID?, to writer: inout JSONWriter) {
        writer.member("id")
        switch id {
        case .int(let value)?: writer.int(value)
        case .string(let value)?: writer.string(value)
        case nil: writer.null()
        }
    }

    public static func request<P: Encodable>(id: RequestID?, method: String, params: P, auth: Auth?, from: String? = nil) throws -> Data {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        switch id {
        case .int(let value)?: writer.member("id", value)
        case .string(let value)?: writer.member("id", value)
        case nil: break
        }
        writer.member("method", method)
        writer.member("params")
        try writer.encodable(params)
        if let auth {
            writer.member("auth")
            writer.beginObject()
            writer.member("token", auth.token)
            writer.endObject()
        }
        if let from { writer.member("from", from) }
        writer.endObject()
        return Data(writer.bytes)
    }
}

/// The parts of a reply a client needs to route it, and its `result` as the service
/// wrote it: checked, but parsed only by whoever needs its values (a relay passes it on
/// as it came).
public struct ReplyHead: Sendable {
    public var id: RequestID?
    public var error: RPCError?
    public var continues: Bool?
    /// The reply's `result`, as it came (valid JSON); nil when the reply has none.
    public var encodedResult: EncodedJSON?

    /// The `result`, parsed; `null` when the reply has none.
    public var result: JSONValue {
        // The bytes were checked when the reply was read: parsing them cannot fail.
        self.encodedResult.flatMap { try? JSONParser.parse(bytes: $0.bytes) } ?? .null
    }

    public static func parse(_ payload: Data) throws -> ReplyHead {
        try self.parse(bytes: [UInt8](payload))
    }

    /// The same from the frame's bytes (a stream's replies are parsed by the thousand: the
    /// usual id, a number, and `continues` are read straight from the bytes).
    public static func parse(bytes: [UInt8]) throws -> ReplyHead {
        var id, error, continues, result: Range<Int>?
        try JSONParser.eachMember(bytes: bytes, in: 0..<bytes.count) { key, range in
            switch key {
            case "id": id = range
            case "error": error = range
            case "continues": continues = range
            case "result": result = range
            default: break
            }
        }
        var head = ReplyHead()
        if let id {
            if let number = Self.integer(bytes[id]) {
                head.id = .int(number)
            } else {
                let value = try JSONParser.parse(bytes: bytes, in: id)
                head.id = value == .null ? nil : try JSONValueDecoding.decode(RequestID.self, from: value)
            }
        }
        if let error {
            let value = try JSONParser.parse(bytes: bytes, in: error)
            head.error = value == .null ? nil : try JSONValueDecoding.decode(RPCError.self, from: value)
        }
        if let continues {
            let literal = bytes[continues]
            if literal.elementsEqual("true".utf8) {
                head.continues = true
            } else if literal.elementsEqual("false".utf8) {
                head.continues = false
            } else {
                head.continues = try JSONParser.parse(bytes: bytes, in: continues).boolValue
            }
        }
        if let result { head.encodedResult = EncodedJSON(Array(bytes[result])) }
        return head
    }
}

extension ReplyHead {
    /// A JSON integer of at most 18 digits (so it fits an `Int64`) written plainly, or nil
    /// for anything else (left to the parser).
    static func integer(_ text: ArraySlice<UInt8>) -> Int64? {
        var digits = text[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 18, digits.count == 1 || digits.first != UInt8(ascii: "0") else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        if negative && value == 0 { return nil }  // "-0": the parser's to judge
        return negative ? -value : value
    }
}

/// Decoding the typed `result` of a reply.
public enum ResultDecoding {
    public static func decode<R: Decodable>(_ type: R.Type, from payload: Data) throws -> R {
        try self.decode(R.self, from: try ReplyHead.parse(payload))
    }

    public static func decode<R: Decodable>(_ type: R.Type, from head: ReplyHead) throws -> R {
        guard let encoded = head.encodedResult else {
            throw DecodingError.keyNotFound(EnvelopeKey("result"), .init(codingPath: [], debugDescription: "the reply has no result"))
        }
        return try self.decode(R.self, from: encoded)
    }

    /// The same from a result as the service wrote it (valid JSON: a reply's, or a relayed
    /// stream's item).
    public static func decode<R: Decodable>(_ type: R.Type, from encoded: EncodedJSON) throws -> R {
        // A readable type reads its members where they are in the text, with no dictionary
        // built for the objects around its values.
        if let readable = R.self as? any JSONReadable.Type,
            let value = readable.read(bytes: encoded.bytes, range: encoded.bytes.indices) as? R
        {
            return value
        }
        return try JSONValueDecoding.decode(R.self, from: try JSONParser.parse(bytes: encoded.bytes), codingPath: [EnvelopeKey("result")])
    }
}
