import Foundation

/// The JSON coders every service and client use, so dates and keys look the same everywhere.
///
/// Dates are RFC 3339 strings in UTC with milliseconds (`2026-11-22T08:30:00.000Z`);
/// decoding also accepts them without fractional seconds.
///
/// The services and the gateway use ``encode(_:)`` and ``decode(_:from:)-(_,[UInt8])``
/// (the project's own ``StreamEncoding`` and ``JSONParser`` with ``JSONValueDecoding``)
/// for everything they send, receive and store; Foundation's coders (`makeEncoder`,
/// `makeDecoder`) are for what people read (pretty output) and for the clients.
public enum RPCJSON {
    /// `value` as compact JSON.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try StreamEncoding.encode(value)
    }

    /// `value` as compact JSON text (for a database column).
    public static func encodeText<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try StreamEncoding.encode(value), as: UTF8.self)
    }

    /// `value` as canonical JSON: object members in key order at every depth (a text that
    /// is hashed or compared).
    public static func encodeSorted<T: Encodable>(_ value: T, escapingSlashes: Bool = false) throws -> [UInt8] {
        let tree = try JSONParser.parse(bytes: try StreamEncoding.encode(value))
        var writer = JSONWriter(escapingSlashes: escapingSlashes)
        try writer.value(tree, sortedKeys: true)
        return writer.bytes
    }

    /// Decodes untrusted bytes (a body off the network, a file): checked as UTF-8 first.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        guard UTF8Validation.isValid(bytes) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "the JSON text is not valid UTF-8"))
        }
        return try JSONValueDecoding.decode(T.self, from: try JSONParser.parse(bytes: bytes))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try JSONValueDecoding.decode(T.self, from: try JSONParser.parse(text))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try self.decode(T.self, from: [UInt8](data))
    }

    public static func makeEncoder(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.format(date))
        }
        return encoder
    }

    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = RFC3339.parse(text) {
                return date
            }
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "must be an RFC 3339 date such as 2026-11-22T08:30:00Z"
            )
        }
        return decoder
    }
}
