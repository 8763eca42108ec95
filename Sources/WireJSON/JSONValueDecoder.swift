import Foundation

/// Decodes a `Decodable` from a parsed ``JSONValue``: requests and replies are parsed once
/// by ``JSONParser`` (the envelope and the payload from the same parse) and decoded from
/// the tree, without `JSONDecoder`'s second pass, and a `JSONValue` field (record fields)
/// is taken as it is instead of probed type by type.
///
/// It reports problems as `JSONDecoder` does (`DecodingError` with the coding path), so
/// ``ParamsDecoding`` names the parameter the same way. Dates are RFC 3339 strings.
public enum JSONValueDecoding {
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue, codingPath: [any CodingKey] = []) throws -> T {
        try ValueDecoder(value: value, codingPath: codingPath).decodeValue(T.self)
    }
}

struct ValueDecoder: Decoder {
    let value: JSONValue
    /// The path to the container this value is in, and its key there: the full path is
    /// built only when asked for (an error, a nested container), not for every member.
    let parentPath: [any CodingKey]
    let key: (any CodingKey)?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(value: JSONValue, codingPath: [any CodingKey]) {
        self.value = value
        self.parentPath = codingPath
        self.key = nil
    }

    init(value: JSONValue, in parentPath: [any CodingKey], at key: any CodingKey) {
        self.value = value
        self.parentPath = parentPath
        self.key = key
    }

    var codingPath: [any CodingKey] { self.key.map { self.parentPath + [$0] } ?? self.parentPath }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = self.value else {
            throw self.mismatch([String: Any].self, "a JSON object")
        }
        return KeyedDecodingContainer(KeyedValueContainer<Key>(members: members, codingPath: self.codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = self.value else {
            throw self.mismatch([Any].self, "a JSON array")
        }
        return UnkeyedValueContainer(items: items, codingPath: self.codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: self.codingPath, debugDescription: "expected \(expected), found \(self.value.kindName)"))
    }

    /// The value as `T`: the types with a direct form first, then `T`'s own `init(from:)`.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self { return self.value as! T }
        if T.self == String.self { return try self.decode(String.self) as! T }
        if T.self == Int64.self { return try self.decode(Int64.self) as! T }
        if T.self == Int.self { return try self.decode(Int.self) as! T }
        if T.self == Bool.self { return try self.decode(Bool.self) as! T }
        if T.self == Double.self { return try self.decode(Double.self) as! T }
        if T.self == Date.self {
            let text = try self.decode(String.self)
            guard let date = RFC3339.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: self.codingPath, debugDescription: "must be an RFC 3339 date such as 2026-11-22T08:30:00Z"))
            }
            return date as! T
        }
        // As Foundation's coders write them: Data in base64, a URL as its text.
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try self.decode(String.self)) else {
                throw DecodingError.dataCorrupted(.init(codingPath: self.codingPath, debugDescription: "must be base64"))
            }
            return data as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try self.decode(String.self)) else {
                throw DecodingError.dataCorrupted(.init(codingPath: self.codingPath, debugDescription: "must be a URL"))
            }
            return url as! T
        }
        return try T(from: self)
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        switch self.value {
        case .int(let number):
            if let exact = I(exactly: number) { return exact }
        case .double(let number):
            if let exact = I(exactly: number) { return exact }
        case .null:
            throw DecodingError.valueNotFound(I.self, .init(codingPath: self.codingPath, debugDescription: "expected a number, found null"))
        default:
            throw self.mismatch(I.self, "a number")
        }
        throw DecodingError.dataCorrupted(.init(codingPath: self.codingPath, debugDescription: "\(self.value) does not fit in \(I.self)"))
    }
}

extension ValueDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { self.value == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        if case .bool(let flag) = self.value { return flag }
        throw self.valueError(Bool.self, "a boolean")
    }

    func decode(_ type: String.Type) throws -> String {
        if case .string(let text) = self.value { return text }
        throw self.valueError(String.self, "a string")
    }

    func decode(_ type: Double.Type) throws -> Double {
        switch self.value {
        case .double(let number): return number
        case .int(let number): return Double(number)
        default: throw self.valueError(Double.self, "a number")
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try self.decode(Double.self)) }
    func decode(_ type: Int.Type) throws -> Int { try self.integer(Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try self.integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try self.integer(Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try self.integer(Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try self.integer(Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try self.integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try self.integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try self.integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try self.integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try self.integer(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try self.decodeValue(T.self) }

    /// `valueNotFound` for null (as `JSONDecoder` says it), else a type mismatch.
    private func valueError(_ type: Any.Type, _ expected: String) -> DecodingError {
        if self.value == .null {
            return DecodingError.valueNotFound(type, .init(codingPath: self.codingPath, debugDescription: "expected \(expected), found null"))
        }
        return self.mismatch(type, expected)
    }
}

private struct KeyedValueContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { self.members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { self.members[key.stringValue] != nil }

    private func member(_ key: Key) throws -> ValueDecoder {
        guard let value = self.members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: self.codingPath, debugDescription: "no value for \"\(key.stringValue)\""))
        }
        return ValueDecoder(value: value, in: self.codingPath, at: key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try self.member(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try self.member(key).decode(Bool.self) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try self.member(key).decode(String.self) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try self.member(key).decode(Double.self) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try self.member(key).decode(Float.self) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try self.member(key).decode(Int.self) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try self.member(key).decode(Int8.self) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try self.member(key).decode(Int16.self) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try self.member(key).decode(Int32.self) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try self.member(key).decode(Int64.self) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try self.member(key).decode(UInt.self) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try self.member(key).decode(UInt8.self) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try self.member(key).decode(UInt16.self) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try self.member(key).decode(UInt32.self) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try self.member(key).decode(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try self.member(key).decodeValue(T.self) }

    // Absent and null are both nil, as with JSONDecoder.
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = self.members[key.stringValue], value != .null else { return nil }
        return try ValueDecoder(value: value, in: self.codingPath, at: key).decodeValue(T.self)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try self.member(key).container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try self.member(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: .object(self.members), codingPath: self.codingPath)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: self.members[key.stringValue] ?? .null, in: self.codingPath, at: key)
    }
}

private struct UnkeyedValueContainer: UnkeyedDecodingContainer {
    let items: [JSONValue]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(items: [JSONValue], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    var count: Int? { self.items.count }
    var isAtEnd: Bool { self.currentIndex >= self.items.count }

    private mutating func next<T>(_ type: T.Type) throws -> ValueDecoder {
        guard !self.isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: self.codingPath + [IndexKey(self.currentIndex)], debugDescription: "the array has no more elements"))
        }
        defer { self.currentIndex += 1 }
        return ValueDecoder(value: self.items[self.currentIndex], in: self.codingPath, at: IndexKey(self.currentIndex))
    }

    mutating func decodeNil() throws -> Bool {
        guard !self.isAtEnd, self.items[self.currentIndex] == .null else { return false }
        self.currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try self.next(type).decode(Bool.self) }
    mutating func decode(_ type: String.Type) throws -> String { try self.next(type).decode(String.self) }
    mutating func decode(_ type: Double.Type) throws -> Double { try self.next(type).decode(Double.self) }
    mutating func decode(_ type: Float.Type) throws -> Float { try self.next(type).decode(Float.self) }
    mutating func decode(_ type: Int.Type) throws -> Int { try self.next(type).decode(Int.self) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try self.next(type).decode(Int8.self) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try self.next(type).decode(Int16.self) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try self.next(type).decode(Int32.self) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try self.next(type).decode(Int64.self) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try self.next(type).decode(UInt.self) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try self.next(type).decode(UInt8.self) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try self.next(type).decode(UInt16.self) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try self.next(type).decode(UInt32.self) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try self.next(type).decode(UInt64.self) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try self.next(type).decodeValue(T.self) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try self.next([String: Any].self).container(keyedBy: NestedKey.self)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try self.next([Any].self).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { try self.next(Any.self) }
}

/// An array index in a coding path (`params.items[1]`).
struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(self.intValue ?? 0)" }
    init(_ index: Int) { self.intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

extension JSONValue {
    /// What kind of value it is, for error messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
