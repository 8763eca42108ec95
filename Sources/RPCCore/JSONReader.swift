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
    public struct Mismatch: Error {}

    public let members: [String: JSONValue]

    public init?(_ value: JSONValue) {
        guard case .object(let members) = value else { return nil }
        self.members = members
    }

    public func string(_ key: String) throws -> String {
        guard case .string(let text)? = self.members[key] else { throw Mismatch() }
        return text
    }

    public func stringIfPresent(_ key: String) throws -> String? {
        switch self.members[key] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw Mismatch()
        }
    }

    public func int64(_ key: String) throws -> Int64 {
        guard case .int(let number)? = self.members[key] else { throw Mismatch() }
        return number
    }

    public func int64IfPresent(_ key: String) throws -> Int64? {
        switch self.members[key] {
        case nil, .null?: return nil
        case .int(let number)?: return number
        default: throw Mismatch()
        }
    }

    public func boolIfPresent(_ key: String) throws -> Bool? {
        switch self.members[key] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw Mismatch()
        }
    }

    public func date(_ key: String) throws -> Date {
        guard let date = RFC3339.parse(try self.string(key)) else { throw Mismatch() }
        return date
    }

    public func object(_ key: String) throws -> [String: JSONValue] {
        guard case .object(let members)? = self.members[key] else { throw Mismatch() }
        return members
    }

    public func objectIfPresent(_ key: String) throws -> [String: JSONValue]? {
        switch self.members[key] {
        case nil, .null?: return nil
        case .object(let members)?: return members
        default: throw Mismatch()
        }
    }

    /// A string enumeration, by raw value.
    public func enumeration<E: RawRepresentable>(_ key: String, as type: E.Type) throws -> E where E.RawValue == String {
        guard let value = E(rawValue: try self.string(key)) else { throw Mismatch() }
        return value
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
