import AggregatorAPI
import Foundation
import PushAPI
import RPCCore
import StoreAPI
import Testing

/// The services write every request, reply and stored JSON text with the project's own
/// encoder (`StreamEncoding`, straight into the outgoing bytes) and read it with its own
/// parser: these tests hold it to what Foundation's encoder writes, and keep Foundation's
/// coders off the services' paths.
@Suite("The project's own encoder writes what Foundation's writes")
struct StreamEncodingTests {
    /// Encodes through the value's `Encodable` form even when it writes itself by hand.
    struct ThroughCodable<T: Encodable>: Encodable {
        let value: T
        func encode(to encoder: any Encoder) throws { try self.value.encode(to: encoder) }
    }

    enum Shade: String, Codable { case light, dark }
    enum Payload: Codable, Equatable {
        case none
        case minutes(Int)
        case named(name: String, tags: [String]?)
    }

    struct Everything: Codable, Equatable {
        var text = "a/b \"quoted\" \\ line\nnext\ttab \u{1} é 😀"
        var int = -42
        var int8: Int8 = -8
        var uint64 = UInt64.max
        var int64 = Int64.min
        var double = 0.1
        var integral = 3.0
        var negativeZero = -0.0
        var large = 1e21
        var float: Float = 0.1
        var flag = true
        var date = Date(timeIntervalSince1970: 1_795_003_200.123)
        var data = Data([0, 1, 254, 255])
        var url = URL(string: "https://example.org/a?b=c")!
        var absent: String? = nil
        var present: String? = "here"
        var shade = Shade.dark
        var payloads: [Payload] = [.none, .minutes(5), .named(name: "x", tags: nil), .named(name: "y", tags: ["a"])]
        var nested: [[Int]] = [[1, 2], [], [3]]
        var byName = ["only": 1]
        var json: JSONValue = ["a": [1, "two", nil, true, 2.5]]
        var empty: [String] = []
        var optionals: [Int?] = [1, nil, 3]
    }

    /// A hand-written form with nested containers, a second request for the same
    /// container and a super encoder.
    struct HandWritten: Encodable {
        enum Keys: String, CodingKey { case head, list, inner, tail }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("h", forKey: .head)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode(1)
            var element = list.nestedContainer(keyedBy: Keys.self)
            try element.encode(true, forKey: .inner)
            try list.encodeNil()
            var inner = container.nestedContainer(keyedBy: Keys.self, forKey: .inner)
            try inner.encode(2.5, forKey: .tail)
            var again = encoder.container(keyedBy: Keys.self)
            try again.encode("t", forKey: .tail)
            try "base".encode(to: container.superEncoder())
        }
    }

    /// Writes into a container after a later one began: refused, never wrong JSON.
    struct OutOfOrder: Encodable {
        enum Keys: CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var first = container.nestedContainer(keyedBy: Keys.self, forKey: .a)
            _ = container.nestedContainer(keyedBy: Keys.self, forKey: .b)
            try first.encode(1, forKey: .a)
        }
    }

    struct Nothing: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    static func foundation<T: Encodable>(_ value: T) throws -> [UInt8] {
        Array(try RPCJSON.makeEncoder().encode(value))
    }

    /// Foundation writes an object's members in no fixed order: objects are compared as
    /// parsed values, leaves byte for byte (``leaves()``).
    @Test("every kind of value")
    func everyKind() throws {
        let value = Everything()
        let ours = try StreamEncoding.encode(value)
        #expect(try JSONParser.parse(bytes: ours) == (try JSONParser.parse(bytes: Self.foundation(value))))
        // And it reads back with the project's own decoder (but for a number beyond Int64,
        // which JSON readers take as a double).
        var back = value
        back.uint64 = 5
        #expect(try RPCJSON.decode(Everything.self, from: try StreamEncoding.encode(back)) == back)
    }

    @Test("containers used by hand: nested, asked for twice, a super encoder")
    func handWritten() throws {
        let ours = try JSONParser.parse(bytes: StreamEncoding.encode(HandWritten()))
        #expect(ours == (try JSONParser.parse(bytes: Self.foundation(HandWritten()))))
    }

    @Test("leaves byte for byte, nil and a value that encodes nothing")
    func leaves() throws {
        let value = Everything()
        #expect(try StreamEncoding.encode(value.text) == Self.foundation(value.text))
        for number in [value.double, value.integral, value.negativeZero, value.large, 123456789.125, 1e-7] {
            #expect(try StreamEncoding.encode(number) == Self.foundation(number), "\(number)")
        }
        #expect(try StreamEncoding.encode([value.float]) == Self.foundation([value.float]))
        #expect(try StreamEncoding.encode([value.uint64]) == Self.foundation([value.uint64]))
        #expect(try StreamEncoding.encode([value.int64, Int64(value.int8)]) == Self.foundation([value.int64, Int64(value.int8)]))
        #expect(try StreamEncoding.encode([value.date]) == Self.foundation([value.date]))
        #expect(try StreamEncoding.encode([value.data]) == Self.foundation([value.data]))
        #expect(try StreamEncoding.encode([value.url]) == Self.foundation([value.url]))
        #expect(try StreamEncoding.encode("x/y") == Self.foundation("x/y"))
        #expect(try StreamEncoding.encode(Optional<Int>.none) == Self.foundation(Optional<Int>.none))
        #expect(try StreamEncoding.encode(7) == Self.foundation(7))
        #expect(String(decoding: try StreamEncoding.encode(Nothing()), as: UTF8.self) == "{}")
        #expect(String(decoding: try StreamEncoding.encode([Nothing()]), as: UTF8.self) == "[{}]")
    }

    @Test("a container written after a later one began is an error", arguments: [false, true])
    func outOfOrder(nestedInArray: Bool) throws {
        #expect(throws: EncodingError.self) {
            if nestedInArray { _ = try StreamEncoding.encode([OutOfOrder()]) } else { _ = try StreamEncoding.encode(OutOfOrder()) }
        }
    }

    @Test("numbers without a JSON form are refused", arguments: [Double.nan, .infinity, -.infinity])
    func nonFinite(value: Double) {
        #expect(throws: EncodingError.self) { _ = try StreamEncoding.encode(["x": value]) }
    }

    @Test("the wire's types through their Codable forms, as Foundation encodes them",
          arguments: HandWrittenJSONTests.examples.map(\.typeName))
    func wireTypes(typeName: String) throws {
        let values = try #require(Self.wireValues[typeName], "no values for \(typeName)")
        for (ours, theirs) in try values() {
            #expect(try JSONParser.parse(bytes: ours) == (try JSONParser.parse(bytes: theirs)), "\(typeName)")
        }
    }

    /// Each example type's values, written by `StreamEncoding` (through `Encodable`) and by
    /// Foundation's encoder.
    static let wireValues: [String: @Sendable () throws -> [([UInt8], [UInt8])]] = {
        func pairs<T: Encodable & Sendable>(_ values: [T]) -> @Sendable () throws -> [([UInt8], [UInt8])] {
            return { try values.map { (try StreamEncoding.encode(ThroughCodable(value: $0)), try foundation($0)) } }
        }
        let h = HandWrittenJSONTests.self
        return [
            "Record": pairs([h.record]),
            "RecordID": pairs([RecordID(zone: "z", recordName: "r", recordType: "T")]),
            "FetchResult": pairs([FetchResult(records: [h.record], missing: ["gone"])]),
            "QueryResult": pairs([QueryResult(records: [h.record], cursor: nil)]),
            "ZoneChangesResult": pairs([ZoneChangesResult(records: [h.record], deletions: [], token: "t", moreComing: false)]),
            "ChangeEvent": pairs([ChangeEvent(seq: 7, family: "f", zone: "z", kind: .recordSaved, recordType: "AppRule", recordName: "r",
                                              changeTag: "7", record: h.record, at: h.at, created: true)]),
            "SaveOutcome": pairs([SaveOutcome(recordName: "s", error: ItemError(code: .conflict, message: "changed", field: "x", serverRecord: h.record))]),
            "DeleteOutcome": pairs([DeleteOutcome(recordName: "d", deleted: true)]),
            "ModifyResult": pairs([ModifyResult(saved: [SaveOutcome(recordName: "r", record: h.record)], deleted: [], cascaded: [], replayed: true)]),
            "RecordSave": pairs([h.save]),
            "RecordDelete": pairs([RecordDelete(recordName: "d", changeTag: "1")]),
            "ModifyParams": pairs([ModifyParams(family: "f", zone: "z", saves: [h.save], requestId: "r", deviceClock: h.at)]),
            "FetchParams": pairs([FetchParams(family: "f", zone: "z", recordNames: ["a"])]),
            "Alert": pairs([Alert(title: "Over the limit", body: "2h")]),
            "PushNotification": pairs([PushNotification(seq: 3, family: "f", reason: .message, alert: Alert(title: "t"), createdAt: h.at, expiresAt: h.at)]),
            "PingResult": pairs([PingResult(service: "store", version: "0.9.1", uptimeSeconds: 12.25, pid: 42)]),
            "AppUsage": pairs(h.apps),
            "ReportRow": pairs(h.rows),
            "Report": pairs([Report(family: "f", child: "c1", deviceId: nil, from: "2026-11-21", to: "2026-11-22", by: .day, timeZone: "UTC",
                                    rows: h.rows, learningSeconds: 1, rewardSeconds: 2, points: 3, topApps: h.apps)]),
        ]
    }()

    @Test("an error reply, as Foundation wrote it")
    func errorReply() throws {
        let error = RPCError(.conflict, "changed by another device", data: ["recordName": "r", "attempts": 2])
        let reply = try JSONParser.parse(bytes: Array(ReplyEncoding.error(id: .int(4), error)))
        #expect(reply["id"] == 4)
        #expect(reply["error"] == (try JSONParser.parse(bytes: Self.foundation(error))))
        #expect(try JSONParser.parse(bytes: Array(ReplyEncoding.error(id: nil, error)))["id"] == .null)
    }
}

@Suite("Foundation's JSON coders stay off the services' paths")
struct NoFoundationCodersTests {
    /// Modules a person or a client runs, not a service: they may print pretty JSON.
    static let outside: Set<String> = [
        "AdminCommands", "ScreenTimeKit", "screentime-bench", "screentimectl", "screentime-dev", "DevStack",
        "APNsStandIn", "SystemdContainer", "ProcessSpawn",
    ]
    /// Where Foundation's coders are made, for those modules.
    static let definition = "WireJSON/JSONCoding.swift"

    @Test("no service, gateway or relay source reaches JSONEncoder, JSONDecoder or JSONSerialization")
    func noFoundationCoders() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let forbidden = /\b(JSONEncoder|JSONDecoder|JSONSerialization|makeEncoder|makeDecoder)\b/
        var scanned = 0
        var found: [String] = []
        let files = try #require(FileManager.default.enumerator(atPath: sources.path))
        for case let file as String in files where file.hasSuffix(".swift") && file != Self.definition {
            guard let module = file.split(separator: "/").first, !Self.outside.contains(String(module)) else { continue }
            scanned += 1
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                if code.contains(forbidden) { found.append("\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))") }
            }
        }
        #expect(scanned > 200, "the scan read too few files (\(scanned)): is Sources/ where it was?")
        #expect(found.isEmpty, "use RPCJSON.encode/decode (the project's own coders) instead:\n\(found.joined(separator: "\n"))")
    }
}

@Suite("Names checked byte by byte say what Unicode says")
struct NameCheckTests {
    @Test("an identifier holds no control character (Unicode's Cc), whatever else it holds", arguments: [
        ("device-1", true), ("Ana's iPad é 😀", true), ("a\u{0}b", false), ("tab\there", false), ("del\u{7F}", false),
        ("next\u{85}line", false), ("c1 \u{9F}", false), ("\u{A0}nbsp", true), ("\u{C2}\u{A9}", true), ("", false),
        (String(repeating: "x", count: 256), false),
    ])
    func identifiers(name: String, valid: Bool) {
        #expect(StoreNames.isValidIdentifier(name) == valid)
        if !name.isEmpty && name.utf8.count <= 255 {
            #expect(StoreNames.isValidIdentifier(name) == !name.unicodeScalars.contains { $0.properties.generalCategory == .control })
        }
    }

    @Test("a zone name is ASCII letters, digits, '-', '_' and '.'", arguments: [
        ("default", true), ("ChildMonitoring-c1", true), ("_pairing", true), ("a.b_c-9", true), ("é", false), ("a b", false), ("a/b", false), ("", false),
    ])
    func zones(name: String, valid: Bool) {
        #expect(StoreNames.isValidZone(name) == valid)
    }
}
