import Foundation
import GRDB

/// A row of the kit's `outbox`: one `store.modify` batch, replayed in `seq` order with its
/// own request id. Times are seconds since 1970, as the table has always held them.
struct OutboxRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "outbox"

    enum Columns {
        static let seq = Column(CodingKeys.seq), requestId = Column(CodingKeys.requestId), params = Column(CodingKeys.params)
        static let attempts = Column(CodingKeys.attempts), lastAttemptAt = Column(CodingKeys.lastAttemptAt), status = Column(CodingKeys.status)
        static let lastErrorCode = Column(CodingKeys.lastErrorCode), lastErrorMessage = Column(CodingKeys.lastErrorMessage)
    }

    /// Given by SQLite on insert.
    var seq: Int64?
    var requestId: String
    var family: String
    var zone: String
    /// The batch's `ModifyParams` as JSON.
    var params: String
    var label: String?
    var createdAt: Double
    var attempts = 0
    var lastAttemptAt: Double?
    var lastErrorCode: String?
    var lastErrorMessage: String?
    /// `queued` or `failed`.
    var status = "queued"

    static func batch(_ requestId: String) -> QueryInterfaceRequest<OutboxRow> {
        Self.filter(Columns.requestId == requestId)
    }
}
