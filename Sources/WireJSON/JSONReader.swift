import Foundation

/// A value that reads itself from a parsed `JSONValue`, or from checked JSON text: the hot
/// streams (change events, notifications) and the busiest requests' parameters skip the
/// generic `Decoder`, whose containers cost more than the work.
///
/// The reading is a fast path only. It gives up (throws ``JSONObjectReader/Mismatch``) on
/// anything but the exact shape its `Encodable` form writes, and ``ResultDecoding`` then
/// decodes the value through `Decodable`, which either accepts it or throws the precise
/// error. So the two agree by construction on what is valid; the tests check each
/// conforming type reads back what it writes.
public protocol JSONReadable: Decodable {
    init(reading object: JSONObjectReader) throws
}

extension JSONReadable {
    /// The value, or nil when the fast path gives up.
    public static func read(_ value: JSONValue) -> Self? {
        guard let object = JSONObjectReader(value) else { return nil }
        return try? Self(reading: object)
    }

    /// The same from the object that is `bytes[range]`, JSON checked already (by
    /// ``JSONParser/members(bytes:)``, say): its members are parsed only as they are read.
    public static func read(bytes: [UInt8], range: Range<Int>) -> Self? {
        guard let object = JSONObjectReader(bytes: bytes, range: range) else { return nil }
        return try? Self(reading: object)
    }
}

/// The members of a JSON object, read by type. Absent and `null` are the same for the
/// optional readers, as for `decodeIfPresent`.
public struct JSONObjectReader {
    public struct Mismatch: Error {
        public init() {}
    }

    private enum Members {
        case parsed([String: JSONValue])
        /// Checked JSON text and where each member's value is in it, in order.
        case text([UInt8], [(key: String, value: Range<Int>)])
    }

    private let members: Members

    public init?(_ value: JSONValue) {
        guard case .object(let members) = value else { return nil }
        self.members = .parsed(members)
    }

    /// The object that is `bytes[range]` (checked JSON); nil when it is not an object.
    public init?(bytes: [UInt8], range: Range<Int>) {
        guard let members = try? JSONParser.members(bytes: bytes, in: range) else { return nil }
        self.members = .text(bytes, members)
    }

    /// A member's value (nil: absent); a key given twice is the last, as in a parsed object.
    public func value(_ key: String) -> JSONValue? {
        switch self.members {
        case .parsed(let members):
            return members[key]
        case .text(let bytes, let members):
            guard let member = members.last(where: { $0.key == key }) else { return nil }
            return try? JSONParser.parse(bytes: bytes, in: member.value)
        }
    }

    /// Where a member's value is in the text; nil when it is absent or null (only `null`
    /// starts with an "n").
    private static func place(of key: String, in members: [(key: String, value: Range<Int>)], _ bytes: [UInt8]) -> Range<Int>? {
        guard let member = members.last(where: { $0.key == key }), bytes[member.value.lowerBound] != UInt8(ascii: "n") else { return nil }
        return member.value
    }

    /// The readers of an array member's objects, each read where it is; nil when the
    /// member is absent or null.
    private func objectReaders(_ key: String) throws -> [JSONObjectReader]? {
        switch self.members {
        case .parsed(let members):
            switch members[key] {
            case nil, .null?: return nil
            case .array(let items)?: return try items.map { item in try JSONObjectReader(item).orMismatch() }
            case _?: throw Mismatch()
            }
        case .text(let bytes, let members):
            guard let place = Self.place(of: key, in: members, bytes) else { return nil }
            guard let elements = try? JSONParser.elements(bytes: bytes, in: place) else { throw Mismatch() }
            return try elements.map { element in try JSONObjectReader(bytes: bytes, range: element).orMismatch() }
        }
    }

    /// The reader of an object member; nil when the member is absent or null.
    private func objectReader(_ key: String) throws -> JSONObjectReader? {
        switch self.members {
        case .parsed(let members):
            switch members[key] {
            case nil, .null?: return nil
            case let value?: return try JSONObjectReader(value).orMismatch()
            }
        case .text(let bytes, let members):
            guard let place = Self.place(of: key, in: members, bytes) else { return nil }
            return try JSONObjectReader(bytes: bytes, range: place).orMismatch()
        }
    }

    public func string(_ key: String) throws -> String { try self.required(key) { $0.stringValue } }
    public func stringIfPresent(_ key: String) throws -> String? { try self.optional(key) { $0.stringValue } }
    public func int64(_ key: String) throws -> Int64 { try self.required(key) { $0.intValue } }
    public func int64IfPresent(_ key: String) throws -> Int64? { try self.optional(key) { $0.intValue } }
    public func bool(_ key: String) throws -> Bool { try self.required(key) { $0.boolValue } }
    public func boolIfPresent(_ key: String) throws -> Bool? { try self.optional(key) { $0.boolValue } }
    public func object(_ key: String) throws -> [String: JSONValue] { try self.required(key) { $0.objectValue } }
    public func objectIfPresent(_ key: String) throws -> [String: JSONValue]? { try self.optional(key) { $0.objectValue } }
    public func strings(_ key: String) throws -> [String] {
        try self.required(key) { value in value.arrayValue.flatMap { items in Self.all(items) { $0.stringValue } } }
    }

    public func date(_ key: String) throws -> Date {
        guard let date = RFC3339.parse(try self.string(key)) else { throw Mismatch() }
        return date
    }

    public func dateIfPresent(_ key: String) throws -> Date? {
        guard let text = try self.stringIfPresent(key) else { return nil }
        guard let date = RFC3339.parse(text) else { throw Mismatch() }
        return date
    }

    private func required<T>(_ key: String, _ extract: (JSONValue) -> T?) throws -> T {
        guard let value = self.value(key).flatMap(extract) else { throw Mismatch() }
        return value
    }

    private func optional<T>(_ key: String, _ extract: (JSONValue) -> T?) throws -> T? {
        switch self.value(key) {
        case nil, .null?: return nil
        case let value?:
            guard let extracted = extract(value) else { throw Mismatch() }
            return extracted
        }
    }

    /// A string enumeration, by raw value.
    public func enumeration<E: RawRepresentable>(_ key: String, as type: E.Type) throws -> E where E.RawValue == String {
        guard let value = E(rawValue: try self.string(key)) else { throw Mismatch() }
        return value
    }

    /// A string enumeration, by raw value, if present.
    public func enumerationIfPresent<E: RawRepresentable>(_ key: String, as type: E.Type) throws -> E? where E.RawValue == String {
        guard let text = try self.stringIfPresent(key) else { return nil }
        guard let value = E(rawValue: text) else { throw Mismatch() }
        return value
    }

    /// An array of readable objects.
    public func read<T: JSONReadable>(_ key: String, asArrayOf type: T.Type) throws -> [T] {
        guard let readers = try self.objectReaders(key) else { throw Mismatch() }
        return try readers.map { try T(reading: $0) }
    }

    /// An array of readable objects, if present.
    public func readIfPresent<T: JSONReadable>(_ key: String, asArrayOf type: T.Type) throws -> [T]? {
        try self.objectReaders(key)?.map { try T(reading: $0) }
    }

    private static func all<T>(_ items: [JSONValue], _ extract: (JSONValue) -> T?) -> [T]? {
        var values: [T] = []
        values.reserveCapacity(items.count)
        for item in items {
            guard let value = extract(item) else { return nil }
            values.append(value)
        }
        return values
    }

    /// A nested readable value, if present.
    public func readIfPresent<T: JSONReadable>(_ key: String, as type: T.Type) throws -> T? {
        try self.objectReader(key).map { try T(reading: $0) }
    }
}

extension Optional where Wrapped == JSONObjectReader {
    fileprivate func orMismatch() throws -> JSONObjectReader {
        guard let self else { throw JSONObjectReader.Mismatch() }
        return self
    }
}
