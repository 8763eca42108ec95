import Foundation

/// Derives a ``Schema`` from a `Decodable` type by running its `init(from:)` against a
/// decoder that answers every question with a placeholder and writes down what was asked:
/// which keys, of which types, and whether through `decodeIfPresent` (optional) or not.
public enum SchemaRecorder {
    public static func schema<T: Decodable>(for type: T.Type) -> Schema {
        record(type, depth: 0).node.build()
    }

    fileprivate static func record<T: Decodable>(_ type: T.Type, depth: Int) -> (node: Node, value: T?) {
        if let described = type as? any SchemaDescribable.Type {
            return (Node(leaf: described.schema), described.schemaExample as? T)
        }
        if let (schema, value) = primitive(type) {
            return (Node(leaf: schema), value)
        }
        // Recursive types end here rather than recursing forever.
        guard depth < 12 else { return (Node(leaf: .any), nil) }
        let decoder = RecordingDecoder(depth: depth + 1)
        let value = try? T(from: decoder)
        return (decoder.node, value)
    }

    fileprivate static func primitive<T>(_ type: T.Type) -> (Schema, T)? {
        func leaf(_ schema: Schema, _ value: Any) -> (Schema, T)? { (value as? T).map { (schema, $0) } }
        switch type {
        case is String.Type: return leaf(.string, "")
        case is Bool.Type: return leaf(.boolean, false)
        case is Int.Type: return leaf(.integer, 0 as Int)
        case is Int8.Type: return leaf(.integer, 0 as Int8)
        case is Int16.Type: return leaf(.integer, 0 as Int16)
        case is Int32.Type: return leaf(.integer, 0 as Int32)
        case is Int64.Type: return leaf(.integer, 0 as Int64)
        case is UInt.Type: return leaf(.integer, 0 as UInt)
        case is UInt8.Type: return leaf(.integer, 0 as UInt8)
        case is UInt16.Type: return leaf(.integer, 0 as UInt16)
        case is UInt32.Type: return leaf(.integer, 0 as UInt32)
        case is UInt64.Type: return leaf(.integer, 0 as UInt64)
        case is Double.Type: return leaf(.number, 0.0 as Double)
        case is Float.Type: return leaf(.number, 0.0 as Float)
        case is Date.Type: return leaf(.dateTime, Date(timeIntervalSince1970: 0))
        case is Data.Type: return leaf(Schema(type: "string", format: "byte"), Data())
        case is UUID.Type: return leaf(Schema(type: "string", format: "uuid"), UUID())
        case is URL.Type: return leaf(Schema(type: "string", format: "uri"), URL(fileURLWithPath: "/"))
        default: return nil
        }
    }
}

/// What one value turned out to be, filled in while its `init(from:)` runs.
private final class Node {
    enum Kind { case unknown, leaf(Schema), object, array }
    struct Property {
        var name: String
        var node: Node
        var required: Bool
    }

    var kind: Kind = .unknown
    var properties: [Property] = []
    var additional: Node?
    var items: Node?

    init() {}
    init(leaf: Schema) { self.kind = .leaf(leaf) }

    func build() -> Schema {
        switch self.kind {
        case .unknown:
            return .any
        case .leaf(let schema):
            return schema
        case .array:
            return .array(self.items?.build() ?? .any)
        case .object:
            var properties: [String: Schema] = [:]
            for property in self.properties { properties[property.name] = property.node.build() }
            let required = self.properties.filter(\.required).map(\.name)
            return Schema(
                type: "object",
                properties: properties.isEmpty && self.additional != nil ? nil : properties,
                required: required.isEmpty ? nil : required,
                additionalProperties: self.additional?.build()
            )
        }
    }
}

/// The key a dictionary decodes through: any string is a valid key of `[String: V]`,
/// none is of a struct's `CodingKeys`, which is how a map is told from a struct.
private let mapKey = "*"

private final class RecordingDecoder: Decoder {
    let node = Node()
    let depth: Int
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    init(depth: Int) { self.depth = depth }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        self.node.kind = .object
        return KeyedDecodingContainer(RecordingKeyedContainer<Key>(node: self.node, depth: self.depth))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        self.node.kind = .array
        return RecordingUnkeyedContainer(node: self.node, depth: self.depth)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        RecordingSingleValueContainer(node: self.node, depth: self.depth)
    }
}

private struct Placeholder: Error {}

private struct RecordingKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let node: Node
    let depth: Int
    var codingPath: [any CodingKey] = []
    /// Keys asked about with `contains` before being decoded: the default `decodeIfPresent`
    /// does exactly that, so such keys are optional.
    private let optionalKeys = KeySet()

    init(node: Node, depth: Int) {
        self.node = node
        self.depth = depth
    }

    var allKeys: [Key] {
        Key(stringValue: mapKey).map { [$0] } ?? []
    }

    func contains(_ key: Key) -> Bool {
        self.optionalKeys.names.insert(key.stringValue)
        return true
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        // A key checked for null before it is decoded may be null: optional.
        self.optionalKeys.names.insert(key.stringValue)
        return false
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let (child, value) = SchemaRecorder.record(type, depth: self.depth)
        self.attach(child, to: key)
        guard let value else { throw Placeholder() }
        return value
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try self.decode(type as Bool.Type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try self.decode(type as String.Type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try self.decode(type as Double.Type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try self.decode(type as Float.Type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try self.decode(type as Int.Type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try self.decode(type as Int8.Type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try self.decode(type as Int16.Type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try self.decode(type as Int32.Type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try self.decode(type as Int64.Type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try self.decode(type as UInt.Type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try self.decode(type as UInt8.Type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try self.decode(type as UInt16.Type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try self.decode(type as UInt32.Type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try self.decode(type as UInt64.Type, key) }

    private func decode<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        try self.decode(type, forKey: key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let child = Node()
        child.kind = .object
        self.attach(child, to: key)
        return KeyedDecodingContainer(RecordingKeyedContainer<NestedKey>(node: child, depth: self.depth))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let child = Node()
        child.kind = .array
        self.attach(child, to: key)
        return RecordingUnkeyedContainer(node: child, depth: self.depth)
    }

    func superDecoder() throws -> any Decoder { RecordingDecoder(depth: self.depth) }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        let decoder = RecordingDecoder(depth: self.depth)
        self.attach(decoder.node, to: key)
        return decoder
    }

    private func attach(_ child: Node, to key: Key) {
        if key.stringValue == mapKey, Key(stringValue: mapKey) != nil, key.intValue == nil {
            self.node.additional = child
            return
        }
        let required = !self.optionalKeys.names.contains(key.stringValue)
        if let index = self.node.properties.firstIndex(where: { $0.name == key.stringValue }) {
            self.node.properties[index].node = child
        } else {
            self.node.properties.append(.init(name: key.stringValue, node: child, required: required))
        }
    }
}

private final class KeySet {
    var names: Set<String> = []
}

private struct RecordingUnkeyedContainer: UnkeyedDecodingContainer {
    let node: Node
    let depth: Int
    var codingPath: [any CodingKey] = []
    var count: Int? { 1 }
    var currentIndex = 0
    var isAtEnd: Bool { self.currentIndex > 0 }

    init(node: Node, depth: Int) {
        self.node = node
        self.depth = depth
    }

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try self.decodeAny(type) }
    mutating func decode(_ type: String.Type) throws -> String { try self.decodeAny(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try self.decodeAny(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try self.decodeAny(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try self.decodeAny(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try self.decodeAny(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try self.decodeAny(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try self.decodeAny(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try self.decodeAny(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try self.decodeAny(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try self.decodeAny(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try self.decodeAny(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try self.decodeAny(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try self.decodeAny(type) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try self.decodeAny(type) }

    private mutating func decodeAny<T: Decodable>(_ type: T.Type) throws -> T {
        self.currentIndex += 1
        let (child, value) = SchemaRecorder.record(type, depth: self.depth)
        self.node.items = child
        guard let value else { throw Placeholder() }
        return value
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        self.currentIndex += 1
        let child = Node()
        child.kind = .object
        self.node.items = child
        return KeyedDecodingContainer(RecordingKeyedContainer<NestedKey>(node: child, depth: self.depth))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        self.currentIndex += 1
        let child = Node()
        child.kind = .array
        self.node.items = child
        return RecordingUnkeyedContainer(node: child, depth: self.depth)
    }

    mutating func superDecoder() throws -> any Decoder { RecordingDecoder(depth: self.depth) }
}

private struct RecordingSingleValueContainer: SingleValueDecodingContainer {
    let node: Node
    let depth: Int
    var codingPath: [any CodingKey] = []

    func decodeNil() -> Bool { false }

    func decode(_ type: Bool.Type) throws -> Bool { try self.decodeAny(type) }
    func decode(_ type: String.Type) throws -> String { try self.decodeAny(type) }
    func decode(_ type: Double.Type) throws -> Double { try self.decodeAny(type) }
    func decode(_ type: Float.Type) throws -> Float { try self.decodeAny(type) }
    func decode(_ type: Int.Type) throws -> Int { try self.decodeAny(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try self.decodeAny(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try self.decodeAny(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try self.decodeAny(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try self.decodeAny(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try self.decodeAny(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try self.decodeAny(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try self.decodeAny(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try self.decodeAny(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try self.decodeAny(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try self.decodeAny(type) }

    private func decodeAny<T: Decodable>(_ type: T.Type) throws -> T {
        let (child, value) = SchemaRecorder.record(type, depth: self.depth)
        self.node.kind = child.kind
        self.node.properties = child.properties
        self.node.items = child.items
        self.node.additional = child.additional
        guard let value else { throw Placeholder() }
        return value
    }
}
