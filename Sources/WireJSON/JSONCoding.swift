import Foundation

/// The JSON coders every service and client use, so dates and keys look the same everywhere.
///
/// Dates are RFC 3339 strings in UTC with milliseconds (`2026-11-22T08:30:00.000Z`);
/// decoding also accepts them without fractional seconds.
public enum RPCJSON {
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
