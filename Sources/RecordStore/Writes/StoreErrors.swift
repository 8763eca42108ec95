import GRDB
import RPCCore

enum StoreErrors {
    /// A storage failure, as the caller sees it; the details go to the journal.
    static func storage(_ error: any Error) -> RPCError {
        if let rpc = error as? RPCError { return rpc }
        if let database = error as? DatabaseError {
            switch database.resultCode {
            case .SQLITE_FULL:
                return RPCError(.unavailable, "the disk holding the store's database is full; nothing was written")
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return RPCError(.unavailable, "the database is busy; retry")
            case .SQLITE_READONLY:
                return RPCError(.unavailable, "the database is read-only; check the permissions of the state directory")
            default:
                return RPCError(.internal, "the database failed (\(database.resultCode)); the store's journal has details")
            }
        }
        return RPCError(.internal, "unexpected storage error; the store's journal has details")
    }
}
