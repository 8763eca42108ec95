import Foundation

/// A value that reads itself from a parsed `JSONValue`: the hot streams (change events,
/// notifications) skip the generic `Decoder`, whose containers cost more than the work.
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
}

/// The members of a JSON object, read by type. Absent and `null` are the same for the
/// optional readers, as for `decodeIfPresent`.
public struct JSONObjectReader {
    public struct Mismatch: Error {
        public init() {}
    }

    public let members: [String: JSONValue]

    public init?(_ value: JSONValue) {
        guard case .object(let members) = value else { return nil }
        self.members = members
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
        guard let value = self.members[key].flatMap(extract) else { throw Mismatch() }
        return value
    }

    private func optional<T>(_ key: String, _ extract: (JSONValue) -> T?) throws -> T? {
        switch self.members[key] {
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
        guard let items = self.members[key]?.arrayValue else { throw Mismatch() }
        return try Self.readAll(items, as: T.self)
    }

    /// An array of readable objects, if present.
    public func readIfPresent<T: JSONReadable>(_ key: String, asArrayOf type: T.Type) throws -> [T]? {
        switch self.members[key] {
        case nil, .null?: return nil
        case .array(let items)?: return try Self.readAll(items, as: T.self)
        case _?: throw Mismatch()
        }
    }

    private static func readAll<T: JSONReadable>(_ items: [JSONValue], as type: T.Type) throws -> [T] {
        try items.map { item in
            guard let object = JSONObjectReader(item) else { throw Mismatch() }
            return try T(reading: object)
        }
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
        switch self.members[key] {
        case nil, .null?: return nil
        case let value?:
            guard let object = JSONObjectReader(value) else { throw Mismatch() }
            return try T(reading: object)
        }
    }
}
