import Foundation

/// A value that writes its own JSON, byte by byte: the hot replies (records, change
/// events) skip even ``StreamEncoding``'s generic containers. What it writes must decode
/// to the same value as its `Encodable` form; the tests check each conforming type
/// against Foundation's `JSONEncoder`.
public protocol JSONWritable {
    func write(to writer: inout JSONWriter) throws
}

/// Writes compact JSON into a byte buffer, as `RPCJSON`'s encoder would: slashes not
/// escaped, dates in RFC 3339 with milliseconds, integral doubles without a fraction.
/// Object members go through ``member(_:)`` and array elements through ``element()``,
/// which place the commas.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false
    /// `/` written as `\/`, as Foundation's encoder does by default (texts an earlier
    /// version stored and compares byte for byte).
    private let escapesSlashes: Bool

    public init(capacity: Int = 256, escapingSlashes: Bool = false) {
        self.bytes.reserveCapacity(capacity)
        self.escapesSlashes = escapingSlashes
    }

    // MARK: Structure

    public mutating func beginObject() {
        self.bytes.append(UInt8(ascii: "{"))
        self.needsComma = false
    }

    public mutating func endObject() {
        self.bytes.append(UInt8(ascii: "}"))
        self.needsComma = true
    }

    public mutating func beginArray() {
        self.bytes.append(UInt8(ascii: "["))
        self.needsComma = false
    }

    public mutating func endArray() {
        self.bytes.append(UInt8(ascii: "]"))
        self.needsComma = true
    }

    /// Starts a member: `,"key":`. Write its value next.
    public mutating func member(_ key: String) {
        self.element()
        self.string(key)
        self.bytes.append(UInt8(ascii: ":"))
        self.needsComma = false
    }

    /// Starts an array element (a comma when it is not the first).
    public mutating func element() {
        if self.needsComma { self.bytes.append(UInt8(ascii: ",")) }
        self.needsComma = false
    }

    // MARK: Values

    public mutating func null() { self.scalar("null") }

    public mutating func bool(_ value: Bool) { self.scalar(value ? "true" : "false") }

    public mutating func int(_ value: Int64) { self.number(String(value)) }

    public mutating func int(_ value: Int) { self.int(Int64(value)) }

    public mutating func double(_ value: Double) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(value) has no JSON form"))
        }
        if value == 0, value.sign == .minus {
            self.number("-0")  // as Foundation's encoder writes it
        } else if value == value.rounded(), abs(value) < 9_007_199_254_740_992 {
            self.int(Int64(value))
        } else {
            self.number("\(value)")
        }
    }

    public mutating func date(_ value: Date) {
        self.bytes.append(UInt8(ascii: "\""))
        RFC3339.append(value, to: &self.bytes)
        self.bytes.append(UInt8(ascii: "\""))
        self.needsComma = true
    }

    public mutating func string(_ value: String) {
        // Read as one contiguous buffer: a String's UTF-8 view, walked byte by byte, was most
        // of what writing a short string cost.
        var value = value
        value.withUTF8 { self.string(utf8: $0) }
    }

    private mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        self.bytes.append(UInt8(ascii: "\""))
        // Most strings (names, ids) need no escape: copied whole.
        let slash: UInt8 = self.escapesSlashes ? UInt8(ascii: "/") : UInt8(ascii: "\"")
        var clean = true
        for byte in utf8 where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == slash {
            clean = false
            break
        }
        if clean {
            self.bytes.append(contentsOf: utf8)
            self.bytes.append(UInt8(ascii: "\""))
            self.needsComma = true
            return
        }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "/") where self.escapesSlashes: self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "/")])
            case 0x0A: self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                self.bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: self.bytes.append(byte)
            }
        }
        self.bytes.append(UInt8(ascii: "\""))
        self.needsComma = true
    }

    public mutating func strings(_ values: [String]) {
        self.beginArray()
        for value in values {
            self.element()
            self.string(value)
        }
        self.endArray()
    }

    /// A value encoded already, copied as it is.
    public mutating func raw(_ json: EncodedJSON) {
        self.bytes.append(contentsOf: json.bytes)
        self.needsComma = true
    }

    /// JSON text written as it is (it must be one complete JSON value; nothing checks it).
    public mutating func raw(text: String) {
        self.bytes.append(contentsOf: text.utf8)
        self.needsComma = true
    }

    /// With `sortedKeys`, object members in key order (a canonical text, for storage).
    public mutating func value(_ value: JSONValue, sortedKeys: Bool = false) throws {
        switch value {
        case .null: self.null()
        case .bool(let flag): self.bool(flag)
        case .int(let number): self.int(number)
        case .double(let number): try self.double(number)
        case .string(let text): self.string(text)
        case .array(let items):
            self.beginArray()
            for item in items {
                self.element()
                try self.value(item, sortedKeys: sortedKeys)
            }
            self.endArray()
        case .object(let members):
            self.beginObject()
            if sortedKeys {
                for key in members.keys.sorted() {
                    self.member(key)
                    try self.value(members[key]!, sortedKeys: true)
                }
            } else {
                for (key, member) in members {
                    self.member(key)
                    try self.value(member)
                }
            }
            self.endObject()
        }
    }

    /// Any value: by hand when it can, else through its `Encodable` form
    /// (``StreamEncoding``, straight into these bytes).
    public mutating func encodable<T: Encodable>(_ value: T) throws {
        if let writable = value as? any JSONWritable {
            try writable.write(to: &self)
        } else {
            try StreamEncoding.encode(value, into: &self)
        }
    }

    /// A number's text, as it is.
    mutating func number(_ text: String) {
        self.bytes.append(contentsOf: text.utf8)
        self.needsComma = true
    }

    private mutating func scalar(_ text: StaticString) {
        self.bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        self.needsComma = true
    }
}

extension JSONValue: JSONWritable {
    public func write(to writer: inout JSONWriter) throws { try writer.value(self) }
}

extension JSONWriter {
    /// Writes `key` and its value, leaving the member out when the value is nil (as the
    /// synthesized `Encodable` does).
    public mutating func member(_ key: String, _ value: String?) {
        guard let value else { return }
        self.member(key)
        self.string(value)
    }

    public mutating func member(_ key: String, _ value: Int64?) {
        guard let value else { return }
        self.member(key)
        self.int(value)
    }

    public mutating func member(_ key: String, _ value: Int?) {
        guard let value else { return }
        self.member(key)
        self.int(value)
    }

    public mutating func member(_ key: String, _ value: Bool?) {
        guard let value else { return }
        self.member(key)
        self.bool(value)
    }

    public mutating func member(_ key: String, _ value: Date?) {
        guard let value else { return }
        self.member(key)
        self.date(value)
    }

    public mutating func member(_ key: String, _ value: [String]?) {
        guard let value else { return }
        self.member(key)
        self.strings(value)
    }

    public mutating func member<T: Encodable>(_ key: String, encodable value: T?) throws {
        guard let value else { return }
        self.member(key)
        try self.encodable(value)
    }
}

extension JSONWriter {
    /// An array of values that write themselves.
    public mutating func array<T: JSONWritable>(_ values: [T]) throws {
        self.beginArray()
        for value in values {
            self.element()
            try value.write(to: &self)
        }
        self.endArray()
    }
}
