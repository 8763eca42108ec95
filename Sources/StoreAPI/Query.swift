import Foundation
import RPCCore

public enum FilterOperator: String, StringEnum {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
    /// `value` is an array; matches any of its elements.
    case `in`
    /// Strings only: the field starts with `value`.
    case beginsWith
    /// Lists only: the list holds `value`.
    case contains
}

/// One condition on an indexed field.
public struct QueryFilter: Codable, Sendable, Hashable {
    public var field: String
    public var op: FilterOperator
    public var value: JSONValue

    public init(_ field: String, _ op: FilterOperator, _ value: JSONValue) {
        self.field = field
        self.op = op
        self.value = value
    }
}

public struct QuerySort: Codable, Sendable, Hashable {
    public var field: String
    public var descending: Bool?

    public init(_ field: String, descending: Bool? = nil) {
        self.field = field
        self.descending = descending
    }

    /// A sort on a typed record's field (`QuerySort(AuditEntry.Field.timestamp, descending: true)`).
    public init<K: CodingKey>(_ field: K, descending: Bool? = nil) {
        self.init(field.stringValue, descending: descending)
    }
}

/// `store.query`: records of one type matching every filter.
public struct QueryParams: Codable, Sendable, Hashable {
    public var family: String
    /// One zone; without it, every zone of the family the caller may read.
    public var zone: String?
    public var recordType: String
    public var filters: [QueryFilter]?
    /// One indexed field. Without it, records come in the order they were first saved.
    public var sort: QuerySort?
    /// Default 100, at most 400.
    public var limit: Int?
    /// The `cursor` of the previous page, to continue the same query.
    public var cursor: String?

    public init(
        family: String, zone: String? = nil, recordType: String, filters: [QueryFilter]? = nil, sort: QuerySort? = nil,
        limit: Int? = nil, cursor: String? = nil
    ) {
        self.family = family
        self.zone = zone
        self.recordType = recordType
        self.filters = filters
        self.sort = sort
        self.limit = limit
        self.cursor = cursor
    }

    public static let defaultLimit = 100
    public static let maximumLimit = 400

    /// Every record the query finds, page after page (its cursor followed), until none is
    /// left or `atMost` have come; `page` asks the store for one page (`store.query`).
    public func allRecords<E: Error>(atMost: Int = .max, _ page: (QueryParams) async throws(E) -> QueryResult) async throws(E) -> [Record] {
        var params = self
        var records: [Record] = []
        repeat {
            let result = try await page(params)
            records += result.records
            params.cursor = result.cursor
        } while params.cursor != nil && records.count < atMost
        return records
    }
}

public struct QueryResult: Codable, Sendable, Hashable {
    public var records: [Record]
    /// Present when more records match: pass it back as `cursor` for the next page.
    public var cursor: String?

    public init(records: [Record], cursor: String?) {
        self.records = records
        self.cursor = cursor
    }
}
