/// A small, strict JSON parser straight to ``JSONValue``. It parses untrusted input: every
/// request frame a service reads (its envelope's members checked in one pass, the params
/// read or parsed after) and every reply a client reads, as well as text the services
/// wrote themselves (stored record fields).
/// So it is strict (RFC 8259, UTF-8 checked by the caller), bounded in depth
/// (``maximumDepth``) and never recurses past it; going through `JSONDecoder` and
/// `Codable` instead would cost several times more (each value is probed type by type).
public struct JSONParser {
    public struct Failure: Error, CustomStringConvertible {
        public var offset: Int
        /// The JSON nests arrays and objects deeper than ``JSONParser/maximumDepth``.
        public var tooDeep = false
        public init(offset: Int) { self.offset = offset }
        public var description: String {
            self.tooDeep
                ? "arrays and objects nested deeper than \(JSONParser.maximumDepth) levels at byte \(self.offset)"
                : "invalid JSON at byte \(self.offset)"
        }
    }

    /// The deepest nesting of arrays and objects accepted (the outermost one is level 1):
    /// deeper input is refused rather than parsed on a recursion that could exhaust the stack.
    public static let maximumDepth = 512

    private let bytes: [UInt8]
    private var index: Int
    /// Where the text ends: the end of the range parsed (the whole array's, mostly).
    private let end: Int

    /// Parses one JSON value (with nothing but whitespace after it).
    public static func parse(_ text: String) throws(Failure) -> JSONValue {
        try self.parse(bytes: Array(text.utf8))
    }

    /// Parses one JSON value from UTF-8 bytes. The bytes must be valid UTF-8 (strings are
    /// read without checking); check untrusted input first.
    public static func parse(bytes: [UInt8]) throws(Failure) -> JSONValue {
        try self.parse(bytes: bytes, in: 0..<bytes.count)
    }

    /// The members of one JSON object, in order, each value checked but left as the range
    /// of its bytes: a reply routed by its `id` and its `result` passed on as the service
    /// wrote it, a request's `params` read by the method that wants them, without building
    /// the values first. Values are checked exactly as ``parse(bytes:)`` checks them.
    public static func members(bytes: [UInt8]) throws(Failure) -> [(key: String, value: Range<Int>)] {
        try self.members(bytes: bytes, in: 0..<bytes.count)
    }

    /// The same for the object that is `bytes[range]`.
    public static func members(bytes: [UInt8], in range: Range<Int>) throws(Failure) -> [(key: String, value: Range<Int>)] {
        var members: [(key: String, value: Range<Int>)] = []
        try self.eachMember(bytes: bytes, in: range) { members.append(($0, $1)) }
        return members
    }

    /// The same, each member handed to `body` as it is read, with no array built (a reply
    /// routed by a few known members, by the thousand).
    public static func eachMember(bytes: [UInt8], in range: Range<Int>, _ body: (String, Range<Int>) -> Void) throws(Failure) {
        var parser = JSONParser(bytes: bytes, in: range)
        parser.skipWhitespace()
        guard parser.at(UInt8(ascii: "{")) else { throw parser.failure }
        try parser.eachMember { key, parser throws(Failure) in
            parser.skipWhitespace()
            let start = parser.index
            try parser.skipValue(depth: 1)
            body(key, start..<parser.index)
        }
        try parser.expectEnd()
    }

    /// The elements of the array that is `bytes[range]`, each checked and left as the
    /// range of its bytes.
    public static func elements(bytes: [UInt8], in range: Range<Int>) throws(Failure) -> [Range<Int>] {
        var parser = JSONParser(bytes: bytes, in: range)
        var elements: [Range<Int>] = []
        parser.skipWhitespace()
        guard parser.at(UInt8(ascii: "[")) else { throw parser.failure }
        try parser.eachItem(closing: UInt8(ascii: "]")) { parser throws(Failure) in
            parser.skipWhitespace()
            let start = parser.index
            try parser.skipValue(depth: 1)
            elements.append(start..<parser.index)
        }
        try parser.expectEnd()
        return elements
    }

    /// Parses the one JSON value that is `bytes[range]` (a member's or an element's range
    /// from ``members(bytes:in:)`` or ``elements(bytes:in:)``).
    public static func parse(bytes: [UInt8], in range: Range<Int>) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes: bytes, in: range)
        let value = try parser.value(depth: 0)
        try parser.expectEnd()
        return value
    }

    /// Reads the object starting here (at its `{`) through its `}`, `readValue` reading
    /// each member's value.
    private mutating func eachMember(_ readValue: (String, inout JSONParser) throws(Failure) -> Void) throws(Failure) {
        try self.eachItem(closing: UInt8(ascii: "}")) { parser throws(Failure) in
            parser.skipWhitespace()
            let key = try parser.string()
            parser.skipWhitespace()
            try parser.expect(":")
            try readValue(key, &parser)
        }
    }

    /// Reads the object or array starting here (at its opening byte) through its `closing`
    /// byte, `readItem` reading each item (a member, an element).
    private mutating func eachItem(closing: UInt8, _ readItem: (inout JSONParser) throws(Failure) -> Void) throws(Failure) {
        self.index += 1
        self.skipWhitespace()
        if self.at(closing) {
            self.index += 1
        } else {
            while true {
                try readItem(&self)
                self.skipWhitespace()
                guard self.index < self.end else { throw self.failure }
                let next = self.bytes[self.index]
                self.index += 1
                if next == closing { return }
                guard next == UInt8(ascii: ",") else { throw Failure(offset: self.index - 1) }
            }
        }
    }

    /// Nothing but whitespace is left of the text.
    private mutating func expectEnd() throws(Failure) {
        self.skipWhitespace()
        guard self.index == self.end else { throw self.failure }
    }

    private init(bytes: [UInt8], in range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "a range outside the bytes")
        self.bytes = bytes
        self.index = range.lowerBound
        self.end = range.upperBound
    }

    private var failure: Failure { Failure(offset: self.index) }

    private mutating func skipWhitespace() {
        while self.index < self.end {
            switch self.bytes[self.index] {
            case 0x20, 0x0A, 0x0D, 0x09: self.index += 1
            default: return
            }
        }
    }

    private mutating func expect(_ literal: StaticString) throws(Failure) {
        let count = literal.utf8CodeUnitCount
        guard self.index + count <= self.end else { throw self.failure }
        for offset in 0..<count where self.bytes[self.index + offset] != literal.utf8Start[offset] { throw self.failure }
        self.index += count
    }

    /// `depth`: the arrays and objects around the value.
    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        self.skipWhitespace()
        guard self.index < self.end else { throw self.failure }
        switch self.bytes[self.index] {
        case UInt8(ascii: "{") where depth >= Self.maximumDepth, UInt8(ascii: "[") where depth >= Self.maximumDepth:
            var failure = self.failure
            failure.tooDeep = true
            throw failure
        case UInt8(ascii: "{"):
            self.index += 1
            var members: [String: JSONValue] = [:]
            self.skipWhitespace()
            if self.index < self.end, self.bytes[self.index] == UInt8(ascii: "}") {
                self.index += 1
                return .object(members)
            }
            while true {
                self.skipWhitespace()
                let key = try self.string()
                self.skipWhitespace()
                try self.expect(":")
                members[key] = try self.value(depth: depth + 1)
                self.skipWhitespace()
                guard self.index < self.end else { throw self.failure }
                let next = self.bytes[self.index]
                self.index += 1
                if next == UInt8(ascii: "}") { return .object(members) }
                guard next == UInt8(ascii: ",") else { throw Failure(offset: self.index - 1) }
            }
        case UInt8(ascii: "["):
            self.index += 1
            var items: [JSONValue] = []
            self.skipWhitespace()
            if self.index < self.end, self.bytes[self.index] == UInt8(ascii: "]") {
                self.index += 1
                return .array(items)
            }
            while true {
                items.append(try self.value(depth: depth + 1))
                self.skipWhitespace()
                guard self.index < self.end else { throw self.failure }
                let next = self.bytes[self.index]
                self.index += 1
                if next == UInt8(ascii: "]") { return .array(items) }
                guard next == UInt8(ascii: ",") else { throw Failure(offset: self.index - 1) }
            }
        case UInt8(ascii: "\""):
            return .string(try self.string())
        case UInt8(ascii: "t"):
            try self.expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try self.expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try self.expect("null")
            return .null
        default:
            return try self.number()
        }
    }

    /// Checks one value and moves past it, building nothing (see ``members(bytes:)``).
    private mutating func skipValue(depth: Int) throws(Failure) {
        self.skipWhitespace()
        guard self.index < self.end else { throw self.failure }
        let opening = self.bytes[self.index]
        switch opening {
        case UInt8(ascii: "{") where depth >= Self.maximumDepth, UInt8(ascii: "[") where depth >= Self.maximumDepth:
            var failure = self.failure
            failure.tooDeep = true
            throw failure
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let isObject = opening == UInt8(ascii: "{")
            try self.eachItem(closing: isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) { parser throws(Failure) in
                if isObject {
                    parser.skipWhitespace()
                    try parser.skipString()
                    parser.skipWhitespace()
                    try parser.expect(":")
                }
                try parser.skipValue(depth: depth + 1)
            }
        case UInt8(ascii: "\""):
            try self.skipString()
        case UInt8(ascii: "t"):
            try self.expect("true")
        case UInt8(ascii: "f"):
            try self.expect("false")
        case UInt8(ascii: "n"):
            try self.expect("null")
        default:
            // What number() refuses too: a number past a double's range.
            let (start, isInteger) = try self.scanNumber()
            if !isInteger || self.index - start > 18 {
                guard let double = Double(String(decoding: self.bytes[start..<self.index], as: UTF8.self)), double.isFinite else {
                    throw Failure(offset: start)
                }
            }
        }
    }

    private mutating func skipString() throws(Failure) {
        guard self.at(UInt8(ascii: "\"")) else { throw self.failure }
        self.index += 1
        while self.index < self.end {
            let byte = self.bytes[self.index]
            self.index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return
            case UInt8(ascii: "\\"):
                guard self.index < self.end else { throw self.failure }
                let escape = self.bytes[self.index]
                self.index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    // What string() refuses too: half a surrogate pair.
                    let code = try self.hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        try self.expect("\\u")
                        guard (0xDC00..<0xE000).contains(try self.hex4()) else { throw self.failure }
                    } else if (0xDC00..<0xE000).contains(code) {
                        throw self.failure
                    }
                default:
                    throw Failure(offset: self.index - 1)
                }
            default:
                guard byte >= 0x20 else { throw Failure(offset: self.index - 1) }
            }
        }
        throw self.failure
    }

    private mutating func number() throws(Failure) -> JSONValue {
        let (start, isInteger) = try self.scanNumber()
        let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .int(integer) }
        guard let double = Double(text), double.isFinite else { throw Failure(offset: start) }
        return .double(double)
    }

    /// Moves past a number as JSON's grammar has it: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    private mutating func scanNumber() throws(Failure) -> (start: Int, isInteger: Bool) {
        let start = self.index
        var isInteger = true
        if self.at(UInt8(ascii: "-")) { self.index += 1 }
        guard self.atDigit else { throw Failure(offset: start) }
        if self.at(UInt8(ascii: "0")) { self.index += 1 } else { self.skipDigits() }
        if self.at(UInt8(ascii: ".")) {
            isInteger = false
            self.index += 1
            guard self.atDigit else { throw self.failure }
            self.skipDigits()
        }
        if self.at(UInt8(ascii: "e")) || self.at(UInt8(ascii: "E")) {
            isInteger = false
            self.index += 1
            if self.at(UInt8(ascii: "+")) || self.at(UInt8(ascii: "-")) { self.index += 1 }
            guard self.atDigit else { throw self.failure }
            self.skipDigits()
        }
        return (start, isInteger)
    }

    private func at(_ byte: UInt8) -> Bool { self.index < self.end && self.bytes[self.index] == byte }

    private var atDigit: Bool {
        self.index < self.end && self.bytes[self.index] >= UInt8(ascii: "0") && self.bytes[self.index] <= UInt8(ascii: "9")
    }

    private mutating func skipDigits() {
        while self.atDigit { self.index += 1 }
    }

    private mutating func string() throws(Failure) -> String {
        guard self.index < self.end, self.bytes[self.index] == UInt8(ascii: "\"") else { throw self.failure }
        self.index += 1
        let start = self.index
        // Fast path: no escapes.
        while self.index < self.end {
            let byte = self.bytes[self.index]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
                self.index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw self.failure }
            self.index += 1
        }
        var scalars = Array(self.bytes[start..<self.index])
        while self.index < self.end {
            let byte = self.bytes[self.index]
            self.index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: scalars, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard self.index < self.end else { throw self.failure }
                let escape = self.bytes[self.index]
                self.index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try self.hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        try self.expect("\\u")
                        let low = try self.hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw self.failure }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw self.failure }
                    scalars += Array(String(Character(scalar)).utf8)
                default:
                    throw self.failure
                }
            default:
                guard byte >= 0x20 else { throw self.failure }
                scalars.append(byte)
            }
        }
        throw self.failure
    }

    /// Four hexadecimal digits, exactly (no sign, which `UInt32(_:radix:)` would take).
    private mutating func hex4() throws(Failure) -> UInt32 {
        guard self.index + 4 <= self.end else { throw self.failure }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.failure
            }
            code = code << 4 | UInt32(digit)
            self.index += 1
        }
        return code
    }
}
