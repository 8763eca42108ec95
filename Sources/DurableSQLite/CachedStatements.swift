import GRDB

// Hot SQL (the store's, the aggregator's ingest) goes through each connection's statement cache: a statement is compiled
// once per connection, not on every call (compiling, with GRDB's authorizer, cost more than
// running a primary-key lookup). Only fixed SQL belongs here; SQL built per request (IN
// lists, query filters) would grow the cache without bound.

extension Row {
    public static func fetchOne(cached db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try self.fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    public static func fetchAll(cached db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try self.fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}

extension DatabaseValueConvertible where Self: StatementColumnConvertible {
    public static func fetchOne(cached db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> Self? {
        try self.fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    public static func fetchAll(cached db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Self] {
        try self.fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }
}

extension Database {
    /// Runs one fixed statement from the cache.
    public func execute(cached sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try self.cachedStatement(sql: sql).execute(arguments: arguments)
    }
}
