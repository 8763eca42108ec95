import RPCCore
import StoreAPI

/// A query subscription's filters, evaluated on a record's fields in memory, with the
/// store's query semantics: a record without the field does not match.
enum FilterMatch {
    static func matches(_ fields: [String: JSONValue], _ filters: [QueryFilter]) -> Bool {
        filters.allSatisfy { filter in
            guard let value = fields[filter.field], value != .null else { return false }
            switch filter.op {
            case .equal: return same(value, filter.value)
            case .notEqual: return !same(value, filter.value)
            case .less: return order(value, filter.value).map { $0 < 0 } ?? false
            case .lessOrEqual: return order(value, filter.value).map { $0 <= 0 } ?? false
            case .greater: return order(value, filter.value).map { $0 > 0 } ?? false
            case .greaterOrEqual: return order(value, filter.value).map { $0 >= 0 } ?? false
            case .in:
                guard case .array(let candidates) = filter.value else { return false }
                return candidates.contains { same(value, $0) }
            case .beginsWith:
                guard case .string(let text) = value, case .string(let prefix) = filter.value else { return false }
                return text.hasPrefix(prefix)
            case .contains:
                guard case .array(let elements) = value else { return false }
                return elements.contains { same($0, filter.value) }
            }
        }
    }

    /// Equality as the store's index sees it: numbers by value, references by record
    /// name (and zone when the filter names one).
    private static func same(_ value: JSONValue, _ wanted: JSONValue) -> Bool {
        if case .object(let reference) = value, case .object(let target) = wanted {
            guard reference["recordName"] == target["recordName"] else { return false }
            return target["zone"] == nil || reference["zone"] == target["zone"]
        }
        if case .object(let reference) = value, case .string(let name) = wanted {
            return reference["recordName"] == .string(name)
        }
        return order(value, wanted) == 0 || value == wanted
    }

    /// -1, 0, 1; nil when the two cannot be compared.
    private static func order(_ a: JSONValue, _ b: JSONValue) -> Int? {
        switch (number(a), number(b)) {
        case (let x?, let y?): return x < y ? -1 : (x > y ? 1 : 0)
        default: break
        }
        switch (a, b) {
        case (.string(let x), .string(let y)): return x < y ? -1 : (x > y ? 1 : 0)  // dates: uniform RFC 3339 UTC
        case (.bool(let x), .bool(let y)): return x == y ? 0 : (!x ? -1 : 1)
        default: return nil
        }
    }

    private static func number(_ value: JSONValue) -> Double? {
        switch value {
        case .int(let x): Double(x)
        case .double(let x): x
        default: nil
        }
    }
}
