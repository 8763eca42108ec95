import Foundation
import RPCCore

extension Array {
    /// The elements in consecutive slices of at most `size`.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: self.count, by: size).map { self[$0..<Swift.min($0 + size, self.count)] }
    }
}

/// JSON for the rows' bodies, in the wire's encoding (dates and all).
enum Coding {
    static func encode<T: Encodable>(_ value: T) throws -> String {
        var writer = JSONWriter()
        try writer.encodable(value)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONValueDecoding.decode(type, from: try JSONParser.parse(text))
    }
}
