import Foundation
import RPCCore
import Testing

@Suite("Writing and decoding JSON without JSONEncoder and JSONDecoder")
struct JSONWireTests {
    static let sample: JSONValue = [
        "text": "a \"quoted\" line\nwith \\ slashes / tabs\t, returns\r, é, 😀 and \u{1}\u{1f}",
        "int": 9_007_199_254_740_993, "negative": -42, "double": 2.5, "small": 1e-7, "big": 1e300,
        "integral": 100.0, "flags": [true, false, nil], "nested": ["empty": [:], "list": []],
    ]

    @Test("JSONWriter writes what decodes to the same value as JSONEncoder's text")
    func writerMatchesEncoder() throws {
        var writer = JSONWriter()
        try writer.value(Self.sample)
        let written = try JSONDecoder().decode(JSONValue.self, from: Data(writer.bytes))
        let encoded = try JSONDecoder().decode(JSONValue.self, from: RPCJSON.makeEncoder().encode(Self.sample))
        #expect(written == encoded)
        #expect(try JSONParser.parse(bytes: writer.bytes) == JSONParser.parse(bytes: Array(try RPCJSON.makeEncoder().encode(Self.sample))))
    }

    @Test("slashes are not escaped and control characters are")
    func escaping() throws {
        var writer = JSONWriter()
        writer.string("a/b\u{0}\"\\")
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #""a/b\u0000\"\\""#)
    }

    @Test("a value without a JSON form is refused")
    func nonFinite() {
        var writer = JSONWriter()
        #expect(throws: EncodingError.self) { try writer.double(.nan) }
        #expect(throws: EncodingError.self) { try writer.double(.infinity) }
    }

    @Test("dates: RFC 3339 to the nearest millisecond, and read back", arguments: [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (1_795_000_000.123, "2026-11-18T11:06:40.123Z"),  // Foundation's format style says .122: it truncates
        (1_795_000_000.9996, "2026-11-18T11:06:41.000Z"),
        (86_399.9996, "1970-01-02T00:00:00.000Z"),  // rounded into the next day
        (-0.0004, "1970-01-01T00:00:00.000Z"),
        (-86_400.5, "1969-12-30T23:59:59.500Z"),
        (951_782_400.0, "2000-02-29T00:00:00.000Z"),
        (4_102_444_799.999, "2099-12-31T23:59:59.999Z"),
    ])
    func dates(_ seconds: Double, _ text: String) throws {
        #expect(RFC3339.format(Date(timeIntervalSince1970: seconds)) == text)
        let millis = (seconds * 1000).rounded() / 1000
        #expect(RFC3339.parse(text) == Date(timeIntervalSince1970: millis))
    }

    @Test("dates over four hundred years and more are written as Foundation writes them")
    func datesAgreeWithFoundation() {
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        // A day every 97 days from 1583 to 9999, at a time of day that moves with it.
        for day in stride(from: -141_427, through: 2_932_896, by: 97) {
            let date = Date(timeIntervalSince1970: Double(day) * 86_400 + Double(day.magnitude % 86_400))
            #expect(RFC3339.format(date) == date.formatted(style), "day \(day)")
        }
    }

    @Test("dates are read with or without fractions, with Z or an offset")
    func dateForms() {
        let moment = Date(timeIntervalSince1970: 1_795_000_000)
        #expect(RFC3339.format(moment) == "2026-11-18T11:06:40.000Z")
        #expect(RFC3339.parse("2026-11-18T11:06:40Z") == moment)
        #expect(RFC3339.parse("2026-11-18T12:06:40.000+01:00") == moment)
        #expect(RFC3339.parse("2026-11-18T11:06:40.25Z") == moment.addingTimeInterval(0.25))
        for bad in ["", "2026-11-18", "2026-11-18T11:06:40", "2026-02-30T00:00:00Z", "2026-11-18T25:00:00Z", "2026-11-18T11:06:40Zjunk", "2026-11-18T11:06:40.Z"] {
            #expect(RFC3339.parse(bad) == nil, "\(bad)")
        }
    }

    struct Shape: Codable, Equatable {
        enum Kind: String, Codable { case round, square }
        var name: String
        var kind: Kind
        var sides: Int?
        var at: Date
        var tags: [String]
        var extra: [String: JSONValue]
        var nested: [Shape]?
        var ratio: Double
        var small: UInt8
    }

    @Test("JSONValueDecoding decodes what JSONDecoder decodes")
    func decoderMatches() throws {
        let shape = Shape(
            name: "a", kind: .square, sides: 4, at: Date(timeIntervalSince1970: 1_795_003_200.5), tags: ["x", "y"],
            extra: ["ref": ["recordName": "r"], "list": [1, "two"], "n": 3], nested: [Shape(
                name: "b", kind: .round, sides: nil, at: Date(timeIntervalSince1970: 0), tags: [], extra: [:], nested: nil, ratio: 3, small: 0)],
            ratio: 0.5, small: 255)
        let data = try RPCJSON.makeEncoder().encode(shape)
        let parsed = try JSONParser.parse(bytes: Array(data))
        #expect(try JSONValueDecoding.decode(Shape.self, from: parsed) == RPCJSON.makeDecoder().decode(Shape.self, from: data))
        #expect(try JSONValueDecoding.decode(Shape.self, from: parsed) == shape)
    }

    struct Counted: Codable, Sendable { var name: String; var count: UInt8?; var items: [Int]? }

    @Test("its errors name the path as JSONDecoder's do")
    func decoderErrors() throws {
        func message(_ params: JSONValue?) -> String? {
            let result = Result { () throws(RPCError) in try ParamsDecoding.decode(Counted.self, params: params) }
            if case .failure(let error) = result { return error.message }
            return nil
        }
        #expect(message(["name": "n"]) == nil)
        #expect(message(nil) == "params.name is required")
        #expect(message(["name": nil]) == "params.name must not be null")
        #expect(message(["name": ["nested": 1]]) == "params.name must be a string")
        #expect(message(["name": "n", "items": "x"]) == "params.items must be an array")
        #expect(message(["name": "n", "items": [1, 2.5]])?.hasPrefix("params.items[1] ") == true)
        #expect(message(["name": "n", "count": 256])?.hasPrefix("params.count ") == true)
        #expect(message(["name": "n", "count": 200.0]) == nil)
        #expect(message(["name": "n", "count": nil]) == nil)
    }
}
