import DurableSQLite
import Foundation
import GRDB
import RPCCore
import StoreAPI

/// Checks field values against their definitions, puts them in canonical form, and
/// derives what goes into the field index.
enum FieldValues {
    /// The canonical form of an incoming value, or an `invalid_params` item error naming
    /// the field. References without a zone get `zone` (the referring record's zone).
    static func normalize(_ value: JSONValue, as field: FieldDefinition, zone: String) throws(ItemError) -> JSONValue {
        func wrong(_ expected: String) -> ItemError {
            ItemError(code: .invalidParams, message: "field \(field.name) must be \(expected), not \(describe(value))", field: field.name)
        }
        switch field.type {
        case .string:
            guard case .string(let text) = value else { throw wrong("a string") }
            if let allowed = field.allowedValues, !allowed.contains(text) {
                throw ItemError(
                    code: .invalidParams,
                    message: "field \(field.name) must be one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", ")), not \"\(text)\"",
                    field: field.name)
            }
            return value
        case .int64:
            guard case .int(let number) = value else { throw wrong("an integer") }
            try checkMinimum(number, field)
            return value
        case .double:
            switch value {
            case .int(let number): return .double(Double(number))
            case .double: return value
            default: throw wrong("a number")
            }
        case .bool:
            guard case .bool = value else { throw wrong("true or false") }
            return value
        case .date:
            let example = "an RFC 3339 date such as \"2026-11-22T08:30:00Z\""
            guard case .string(let text) = value else { throw wrong(example) }
            guard let date = StoreDates.parse(text) else {
                throw ItemError(code: .invalidParams, message: "field \(field.name) must be \(example), not \(quote(text))", field: field.name)
            }
            // The canonical text has one width only in these years, and the store compares
            // dates as that text (a query's filters read from the record's fields).
            guard Self.canonicalDates.contains(Millis.of(date)) else {
                throw ItemError(code: .invalidParams, message: "field \(field.name) must be a date in the years 0000 to 9999 (in UTC), not \(quote(text))",
                                field: field.name)
            }
            return .string(StoreDates.format(date))
        case .reference:
            guard case .object(let members) = value, case .string(let name)? = members["recordName"], !name.isEmpty,
                members.keys.allSatisfy({ $0 == "recordName" || $0 == "zone" })
            else { throw wrong("a reference {\"recordName\": …, \"zone\": …}") }
            var target = zone
            if let given = members["zone"] {
                guard case .string(let text) = given, Names.isValidZone(text) else {
                    let got = if case .string(let text) = given { quote(text) } else { describe(given) }
                    throw ItemError(code: .invalidParams,
                        message: "field \(field.name) is a reference whose zone must be a zone name (1 to 255 letters, digits, '-', '_' or '.'), not \(got)",
                        field: field.name)
                }
                target = text
            }
            return .reference(name, zone: target)
        case .stringList:
            guard case .array(let items) = value, items.allSatisfy({ $0.stringValue != nil }) else { throw wrong("a list of strings") }
            return value
        case .intList:
            guard case .array(let items) = value, items.allSatisfy({ $0.intValue != nil }) else { throw wrong("a list of integers") }
            return value
        case .json:
            guard case .string(let text) = value else { throw wrong("a string holding JSON text") }
            guard (try? JSONParser.parse(text)) != nil else {
                throw ItemError(code: .invalidParams, message: "field \(field.name) must hold valid JSON text", field: field.name)
            }
            return value
        }
    }

    /// 0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z, in milliseconds.
    static let canonicalDates: ClosedRange<Int64> = -62_167_219_200_000...253_402_300_799_999

    private static func checkMinimum(_ number: Int64, _ field: FieldDefinition) throws(ItemError) {
        if let minimum = field.minimum, number < minimum {
            throw ItemError(code: .invalidParams, message: "field \(field.name) must be at least \(minimum), not \(number)", field: field.name)
        }
    }

    /// The values a field contributes to the index: one for a scalar, one per distinct
    /// element for a list. Dates index as milliseconds, references as `zone/recordName`.
    static func indexValues(_ value: JSONValue, type: FieldType) -> [DatabaseValue] {
        switch (type, value) {
        case (.stringList, .array(let items)), (.intList, .array(let items)):
            var seen = Set<JSONValue>()
            return items.filter { seen.insert($0).inserted }.compactMap { scalarIndexValue($0, type: type == .stringList ? .string : .int64) }
        default:
            return scalarIndexValue(value, type: type).map { [$0] } ?? []
        }
    }

    static func scalarIndexValue(_ value: JSONValue, type: FieldType) -> DatabaseValue? {
        switch (type, value) {
        case (.date, .string(let text)):
            return StoreDates.parse(text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()).databaseValue }
        case (.reference, .object(let members)):
            guard let name = members["recordName"]?.stringValue, let zone = members["zone"]?.stringValue else { return nil }
            return "\(zone)/\(name)".databaseValue
        case (_, .string(let text)): return text.databaseValue
        case (_, .int(let number)): return number.databaseValue
        case (_, .double(let number)): return number.databaseValue
        case (_, .bool(let flag)): return (flag ? 1 : 0).databaseValue
        default: return nil
        }
    }

    /// Text the caller sent, quoted for a message (the first 64 characters).
    static func quote(_ text: String) -> String {
        text.count <= 64 ? "\"\(text)\"" : "\"\(text.prefix(64))…\""
    }

    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "an integer"
        case .double: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "an object"
        }
    }
}

/// The rules for names on the wire (in StoreAPI, shared with the store's clients).
typealias Names = StoreNames
