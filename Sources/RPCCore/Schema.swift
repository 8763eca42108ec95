/// A machine-readable description of a JSON value's shape: a subset of JSON Schema
/// (`type`, `format`, `enum`, `items`, `properties`, `required`, `additionalProperties`).
///
/// Derived from the Codable types a method is declared with (see ``SchemaRecorder``), so
/// `rpc.describe` can never drift from what the handler actually decodes.
public final class Schema: Codable, Sendable, Hashable {
    public let type: String?
    public let format: String?
    public let `enum`: [String]?
    public let items: Schema?
    public let properties: [String: Schema]?
    public let required: [String]?
    public let additionalProperties: Schema?
    public let description: String?

    public init(
        type: String? = nil,
        format: String? = nil,
        enum values: [String]? = nil,
        items: Schema? = nil,
        properties: [String: Schema]? = nil,
        required: [String]? = nil,
        additionalProperties: Schema? = nil,
        description: String? = nil
    ) {
        self.type = type
        self.format = format
        self.enum = values
        self.items = items
        self.properties = properties
        self.required = required
        self.additionalProperties = additionalProperties
        self.description = description
    }

    public static let any = Schema()
    public static let string = Schema(type: "string")
    public static let integer = Schema(type: "integer")
    public static let number = Schema(type: "number")
    public static let boolean = Schema(type: "boolean")
    public static let dateTime = Schema(type: "string", format: "date-time")
    public static func array(_ items: Schema) -> Schema { Schema(type: "array", items: items) }
    public static func oneOf(_ values: [String]) -> Schema { Schema(type: "string", enum: values) }

    public static func == (lhs: Schema, rhs: Schema) -> Bool {
        lhs.type == rhs.type && lhs.format == rhs.format && lhs.enum == rhs.enum && lhs.items == rhs.items
            && lhs.properties == rhs.properties && lhs.required == rhs.required
            && lhs.additionalProperties == rhs.additionalProperties && lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.type)
        hasher.combine(self.format)
        hasher.combine(self.enum)
        hasher.combine(self.properties?.keys.sorted())
    }
}

/// A type that states its own schema instead of having it recorded from `init(from:)`:
/// leaf types (identifiers, enums) and types whose decoding validates its input.
public protocol SchemaDescribable {
    static var schema: Schema { get }
    /// Any valid value, used to keep recording the enclosing type.
    static var schemaExample: Self { get }
}

/// A string enum on the wire: its schema lists the allowed values, and a wrong value is
/// refused with a message that lists them too.
public protocol StringEnum: RawRepresentable, CaseIterable, Codable, Sendable, SchemaDescribable
where RawValue == String {}

extension StringEnum {
    public static var schema: Schema { .oneOf(Self.allCases.map(\.rawValue)) }
    public static var schemaExample: Self { Self.allCases.first! }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(rawValue: text) else {
            let allowed = Self.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "must be one of \(allowed), not \"\(text)\""
            )
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.rawValue)
    }
}

extension JSONValue: SchemaDescribable {
    public static var schema: Schema { .any }
    public static var schemaExample: JSONValue { .null }
}

extension RequestID: SchemaDescribable {
    public static var schema: Schema { Schema(description: "a string or an integer") }
    public static var schemaExample: RequestID { .int(0) }
}

extension ErrorCode: SchemaDescribable {
    public static var schema: Schema { .string }
    public static var schemaExample: ErrorCode { .internal }
}
