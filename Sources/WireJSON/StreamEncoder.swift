import Foundation

/// A `Codable` encoder of the project's own that writes straight into a ``JSONWriter``:
/// no tree of boxed values first and no second pass, as Foundation's `JSONEncoder` takes.
/// Every request, reply and stored JSON text of the services goes through it (directly,
/// or for the types without a ``JSONWritable`` form).
///
/// It writes what `RPCJSON`'s Foundation encoder writes: members in the order they are
/// encoded, nil optionals left out (`encodeIfPresent`), dates in RFC 3339 with
/// milliseconds, `Data` in base64, URLs as their text, slashes not escaped, integral
/// doubles without a fraction.
///
/// Containers are written as they are used, so they must be used in order: a container
/// is finished when its parent (or an earlier container) writes again. Synthesized
/// `Encodable` forms and every hand-written one in the tree do so; a container written
/// after it was finished is an `EncodingError`, not wrong JSON.
public enum StreamEncoding {
    public static func encode<T: Encodable>(_ value: T, into writer: inout JSONWriter) throws {
        let sink = EncodingSink(writer: JSONWriter(capacity: 0))
        swap(&writer, &sink.writer)
        defer { swap(&writer, &sink.writer) }
        try sink.encodeValue(value, prefix: .none, level: 0, codingPath: [])
    }

    public static func encode<T: Encodable>(_ value: T, capacity: Int = 256) throws -> [UInt8] {
        var writer = JSONWriter(capacity: capacity)
        try self.encode(value, into: &writer)
        return writer.bytes
    }
}

/// What goes before a value: nothing (the top, or written already), `"key":`, or an
/// array's comma.
enum ValuePrefix {
    case none
    case member(String)
    case element

    func write(to writer: inout JSONWriter) {
        switch self {
        case .none: break
        case .member(let key): writer.member(key)
        case .element: writer.element()
        }
    }
}

/// The writer and the containers open in it, innermost last (each by a serial number, so
/// that a finished container is told from a later one at the same depth).
final class EncodingSink {
    var writer: JSONWriter
    private var open: [(id: Int, isObject: Bool)] = []
    private var nextID = 0
    /// The first misuse seen where the `Encoder` protocol cannot throw (opening a
    /// container); thrown when the value is done.
    var failure: (any Error)?

    init(writer: JSONWriter) { self.writer = writer }

    /// Opens an object or array inside the containers up to `level`; returns its number.
    func push(isObject: Bool) -> Int {
        self.nextID += 1
        self.open.append((self.nextID, isObject))
        if isObject { self.writer.beginObject() } else { self.writer.beginArray() }
        return self.nextID
    }

    /// Finishes every container deeper than `level`.
    func close(above level: Int) {
        while self.open.count > level {
            let last = self.open.removeLast()
            if last.isObject { self.writer.endObject() } else { self.writer.endArray() }
        }
    }

    /// Makes the container `id` at `level` (1-based) the innermost open one, or says that
    /// it was finished already.
    func resume(_ id: Int, at level: Int, codingPath: [any CodingKey]) throws {
        guard self.open.count >= level, self.open[level - 1].id == id else {
            throw EncodingError.invalidValue((), .init(codingPath: codingPath, debugDescription: "a container was written after a later one began; encode containers in order"))
        }
        self.close(above: level)
    }

    func fail(_ error: any Error) {
        if self.failure == nil { self.failure = error }
    }

    /// Writes `prefix` and `value` inside the containers up to `level`.
    func encodeValue<T: Encodable>(_ value: T, prefix: ValuePrefix, level: Int, codingPath: [any CodingKey]) throws {
        // The common leaves first, compared by type (cheaper than a dynamic cast).
        if T.self == String.self {
            prefix.write(to: &self.writer)
            self.writer.string(value as! String)
            return
        }
        if T.self == Int.self || T.self == Int64.self || T.self == Bool.self || T.self == Double.self || T.self == Date.self {
            prefix.write(to: &self.writer)
            try self.writer.scalar(value)
            return
        }
        if let writable = value as? any JSONWritable {
            prefix.write(to: &self.writer)
            try writable.write(to: &self.writer)
            return
        }
        if T.self == Data.self {
            prefix.write(to: &self.writer)
            self.writer.string((value as! Data).base64EncodedString())
            return
        }
        if T.self == URL.self {
            prefix.write(to: &self.writer)
            self.writer.string((value as! URL).absoluteString)
            return
        }
        let encoder = StreamEncoder(sink: self, level: level, prefix: prefix, codingPath: codingPath)
        try value.encode(to: encoder)
        if let failure = self.failure { throw failure }
        if !encoder.began {
            // A value that encoded nothing is an empty object, as with Foundation's encoder.
            try encoder.begin()
            self.writer.beginObject()
            self.writer.endObject()
        }
        self.close(above: level)
    }
}

extension JSONWriter {
    /// The scalar leaves `EncodingSink` writes without an `Encoder`.
    fileprivate mutating func scalar<T>(_ value: T) throws {
        switch value {
        case let number as Int: self.int(number)
        case let number as Int64: self.int(number)
        case let flag as Bool: self.bool(flag)
        case let number as Double: try self.double(number)
        case let date as Date: self.date(date)
        default: preconditionFailure("not a scalar: \(T.self)")
        }
    }

    fileprivate mutating func integer<I: FixedWidthInteger>(_ value: I) {
        if let small = Int64(exactly: value) { self.int(small) } else { self.number(String(value)) }
    }

    fileprivate mutating func float(_ value: Float) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "\(value) has no JSON form"))
        }
        // Float's own shortest text ("0.1"), not that of the Double it widens to.
        if value == value.rounded(), abs(value) < 16_777_216 { self.int(Int64(value)) } else { self.number(String(value)) }
    }
}

/// The `Encoder` one value is encoded with: it writes the value's prefix when the value
/// begins (a single value, or its first container).
final class StreamEncoder: Encoder {
    let sink: EncodingSink
    /// How many containers are open around this value.
    let level: Int
    let prefix: ValuePrefix
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    private(set) var began = false
    private var container: (id: Int, isObject: Bool)?

    init(sink: EncodingSink, level: Int, prefix: ValuePrefix, codingPath: [any CodingKey]) {
        self.sink = sink
        self.level = level
        self.prefix = prefix
        self.codingPath = codingPath
    }

    /// Finishes what is open deeper than this value and writes its prefix, once.
    func begin() throws {
        guard !self.began else {
            throw EncodingError.invalidValue((), .init(codingPath: self.codingPath, debugDescription: "a value was encoded twice at the same place"))
        }
        self.sink.close(above: self.level)
        self.prefix.write(to: &self.sink.writer)
        self.began = true
    }

    private func openContainer(isObject: Bool) -> Int {
        // Asking again for the container already open (as a superclass's encode does) gets
        // the same one.
        if let container = self.container {
            if container.isObject != isObject { self.sink.fail(self.kindChanged()) }
            return container.id
        }
        do { try self.begin() } catch { self.sink.fail(error) }
        let id = self.sink.push(isObject: isObject)
        self.container = (id, isObject)
        return id
    }

    private func kindChanged() -> EncodingError {
        EncodingError.invalidValue((), .init(codingPath: self.codingPath, debugDescription: "a value asked for an object and an array at the same place"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let id = self.openContainer(isObject: true)
        return KeyedEncodingContainer(KeyedStreamContainer<Key>(sink: self.sink, id: id, level: self.level + 1, codingPath: self.codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let id = self.openContainer(isObject: false)
        return UnkeyedStreamContainer(sink: self.sink, id: id, level: self.level + 1, codingPath: self.codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }
}

extension StreamEncoder: SingleValueEncodingContainer {
    func encodeNil() throws {
        try self.begin()
        self.sink.writer.null()
    }

    func encode(_ value: Bool) throws { try self.begin(); self.sink.writer.bool(value) }
    func encode(_ value: String) throws { try self.begin(); self.sink.writer.string(value) }
    func encode(_ value: Double) throws { try self.begin(); try self.sink.writer.double(value) }
    func encode(_ value: Float) throws { try self.begin(); try self.sink.writer.float(value) }
    func encode(_ value: Int) throws { try self.begin(); self.sink.writer.int(value) }
    func encode(_ value: Int8) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: Int16) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: Int32) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: Int64) throws { try self.begin(); self.sink.writer.int(value) }
    func encode(_ value: UInt) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: UInt8) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: UInt16) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: UInt32) throws { try self.begin(); self.sink.writer.integer(value) }
    func encode(_ value: UInt64) throws { try self.begin(); self.sink.writer.integer(value) }

    func encode<T: Encodable>(_ value: T) throws {
        guard !self.began else { try self.begin(); return }
        // The prefix goes with the value; this encoder has begun once it is written.
        self.began = true
        self.sink.close(above: self.level)
        try self.sink.encodeValue(value, prefix: self.prefix, level: self.level, codingPath: self.codingPath)
    }
}

struct KeyedStreamContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let sink: EncodingSink
    let id: Int
    let level: Int
    let codingPath: [any CodingKey]

    /// Makes this object the innermost open container and starts the member `key`.
    private func member(_ key: Key) throws {
        try self.sink.resume(self.id, at: self.level, codingPath: self.codingPath)
        self.sink.writer.member(key.stringValue)
    }

    mutating func encodeNil(forKey key: Key) throws { try self.member(key); self.sink.writer.null() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try self.member(key); self.sink.writer.bool(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { try self.member(key); self.sink.writer.string(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try self.member(key); try self.sink.writer.double(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try self.member(key); try self.sink.writer.float(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try self.member(key); self.sink.writer.int(value) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try self.member(key); self.sink.writer.int(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try self.member(key); self.sink.writer.integer(value) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try self.sink.resume(self.id, at: self.level, codingPath: self.codingPath)
        try self.sink.encodeValue(value, prefix: .member(key.stringValue), level: self.level, codingPath: self.codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        do { try self.member(key) } catch { self.sink.fail(error) }
        let id = self.sink.push(isObject: true)
        return KeyedEncodingContainer(KeyedStreamContainer<NestedKey>(sink: self.sink, id: id, level: self.level + 1, codingPath: self.codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        do { try self.member(key) } catch { self.sink.fail(error) }
        let id = self.sink.push(isObject: false)
        return UnkeyedStreamContainer(sink: self.sink, id: id, level: self.level + 1, codingPath: self.codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { self.superEncoder(named: "super") }

    mutating func superEncoder(forKey key: Key) -> any Encoder { self.superEncoder(named: key.stringValue) }

    private func superEncoder(named name: String) -> any Encoder {
        do { try self.sink.resume(self.id, at: self.level, codingPath: self.codingPath) } catch { self.sink.fail(error) }
        return StreamEncoder(sink: self.sink, level: self.level, prefix: .member(name), codingPath: self.codingPath)
    }
}

struct UnkeyedStreamContainer: UnkeyedEncodingContainer {
    let sink: EncodingSink
    let id: Int
    let level: Int
    let codingPath: [any CodingKey]
    private(set) var count = 0

    init(sink: EncodingSink, id: Int, level: Int, codingPath: [any CodingKey]) {
        self.sink = sink
        self.id = id
        self.level = level
        self.codingPath = codingPath
    }

    private mutating func element() throws {
        try self.sink.resume(self.id, at: self.level, codingPath: self.codingPath)
        self.sink.writer.element()
        self.count += 1
    }

    mutating func encodeNil() throws { try self.element(); self.sink.writer.null() }
    mutating func encode(_ value: Bool) throws { try self.element(); self.sink.writer.bool(value) }
    mutating func encode(_ value: String) throws { try self.element(); self.sink.writer.string(value) }
    mutating func encode(_ value: Double) throws { try self.element(); try self.sink.writer.double(value) }
    mutating func encode(_ value: Float) throws { try self.element(); try self.sink.writer.float(value) }
    mutating func encode(_ value: Int) throws { try self.element(); self.sink.writer.int(value) }
    mutating func encode(_ value: Int8) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: Int16) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: Int32) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: Int64) throws { try self.element(); self.sink.writer.int(value) }
    mutating func encode(_ value: UInt) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt8) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt16) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt32) throws { try self.element(); self.sink.writer.integer(value) }
    mutating func encode(_ value: UInt64) throws { try self.element(); self.sink.writer.integer(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try self.sink.resume(self.id, at: self.level, codingPath: self.codingPath)
        let path = self.codingPath + [IndexKey(self.count)]
        self.count += 1
        try self.sink.encodeValue(value, prefix: .element, level: self.level, codingPath: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        do { try self.element() } catch { self.sink.fail(error) }
        let id = self.sink.push(isObject: true)
        return KeyedEncodingContainer(KeyedStreamContainer<NestedKey>(sink: self.sink, id: id, level: self.level + 1, codingPath: self.codingPath))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        do { try self.element() } catch { self.sink.fail(error) }
        let id = self.sink.push(isObject: false)
        return UnkeyedStreamContainer(sink: self.sink, id: id, level: self.level + 1, codingPath: self.codingPath)
    }

    mutating func superEncoder() -> any Encoder {
        do { try self.sink.resume(self.id, at: self.level, codingPath: self.codingPath) } catch { self.sink.fail(error) }
        self.count += 1
        return StreamEncoder(sink: self.sink, level: self.level, prefix: .element, codingPath: self.codingPath)
    }
}
