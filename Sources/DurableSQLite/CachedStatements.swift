import GRDB
import GRDBSQLite

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

/// A row's columns read by number: a GRDB `Row`, or a ``StatementRow`` straight from
/// SQLite, so that one reader of a row type serves both.
public protocol ColumnReading {
    func isNull(_ column: Int) -> Bool
    func int64(_ column: Int) -> Int64
    /// The column's text ("" for NULL).
    func text(_ column: Int) -> String
}

extension ColumnReading {
    public func bool(_ column: Int) -> Bool { self.int64(column) != 0 }
    public func optionalText(_ column: Int) -> String? { self.isNull(column) ? nil : self.text(column) }
}

extension Row: ColumnReading {
    public func isNull(_ column: Int) -> Bool { self.hasNull(atIndex: column) }
    public func int64(_ column: Int) -> Int64 { self[column] }
    public func text(_ column: Int) -> String { self[column] ?? "" }
}

/// The current row of a cached statement, read by column number straight from SQLite.
/// GRDB's `Row` for a fetch builds a dictionary of the statement's lowercased column names
/// first: for the reads every request makes (a zone, a record, a credential) that was a
/// fifth of a point fetch's CPU. Valid only inside the `read` of ``Database/firstRow(cached:arguments:_:)``
/// or ``Database/firstRow(cached:texts:_:)``.
public struct StatementRow: ColumnReading {
    let statement: SQLiteStatement

    public func isNull(_ column: Int) -> Bool { sqlite3_column_type(self.statement, Int32(column)) == SQLITE_NULL }
    public func int64(_ column: Int) -> Int64 { sqlite3_column_int64(self.statement, Int32(column)) }

    public func text(_ column: Int) -> String {
        guard let bytes = sqlite3_column_text(self.statement, Int32(column)) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(self.statement, Int32(column)))), as: UTF8.self)
    }
}

extension Database {
    /// The first row of a fixed statement from the cache, read by `read` (``StatementRow``);
    /// nil when there is none.
    public func firstRow<T>(cached sql: String, arguments: StatementArguments, _ read: (StatementRow) throws -> T) throws -> T? {
        let statement = try self.cachedStatement(sql: sql)
        try statement.setArguments(arguments)
        return try self.firstRow(of: statement, sql: sql, read)
    }

    /// The same for a statement whose arguments are all text, bound straight to SQLite:
    /// `StatementArguments` (an array of existentials, cast back one by one) cost as much as
    /// a point read's B-tree walk.
    public func firstRow<T>(cached sql: String, texts: [String], _ read: (StatementRow) throws -> T) throws -> T? {
        let statement = try self.cachedStatement(sql: sql)
        let raw = statement.sqliteStatement
        guard sqlite3_bind_parameter_count(raw) == Int32(texts.count) else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "\(texts.count) arguments for \(sqlite3_bind_parameter_count(raw)) parameters", sql: sql)
        }
        sqlite3_reset(raw)
        for (index, text) in texts.enumerated() {
            var text = text
            let code = text.withUTF8 { utf8 in
                // An empty buffer may have no address, which SQLite would bind as NULL.
                guard let start = utf8.baseAddress, !utf8.isEmpty else { return sqlite3_bind_text(raw, Int32(index + 1), "", 0, Self.transient) }
                return sqlite3_bind_text(raw, Int32(index + 1), start, Int32(utf8.count), Self.transient)
            }
            guard code == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(self.sqliteConnection)), sql: sql)
            }
        }
        return try self.firstRow(of: statement, sql: sql, read)
    }

    /// SQLite copies the bytes it is given (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private func firstRow<T>(of statement: Statement, sql: String, _ read: (StatementRow) throws -> T) throws -> T? {
        let raw = statement.sqliteStatement
        defer { sqlite3_reset(raw) }
        switch sqlite3_step(raw) {
        case SQLITE_ROW:
            return try read(StatementRow(statement: raw))
        case SQLITE_DONE:
            return nil
        case let code:
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(self.sqliteConnection)), sql: sql)
        }
    }
}
