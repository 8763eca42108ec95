import AggregatorAPI
import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RPCCore
import StoreAPI

// The parenting tables as records: a parent's or a child's action reads and writes a few
// rows, a few times a day, so they use GRDB's query interface.

/// `time_requests`: a child's request for more time; the truth of it (the store's
/// TimeRequest is its copy).
struct TimeRequestRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "time_requests"

    var family: String
    var id: String
    var child: String
    var deviceId: String
    var minutes: Int64
    var restOfDay: Bool
    var app: String?
    var appName: String?
    var note: String?
    var status: String
    var createdMillis: Int64
    var expiresMillis: Int64
    var whilePaused: Bool
    var answeredMillis: Int64?
    var answeredBy: String?
    var answeredByName: String?
    var grantedMinutes: Int64?
    var reply: String?

    enum CodingKeys: String, CodingKey {
        case family, id, child, minutes, app, note, status, reply
        case deviceId = "device_id", restOfDay = "rest_of_day", appName = "app_name", createdMillis = "created_ms", expiresMillis = "expires_ms"
        case whilePaused = "while_paused", answeredMillis = "answered_ms", answeredBy = "answered_by", answeredByName = "answered_by_name"
        case grantedMinutes = "granted_minutes"
    }

    enum Columns {
        static let family = Column(CodingKeys.family), id = Column(CodingKeys.id), child = Column(CodingKeys.child)
        static let status = Column(CodingKeys.status), createdMillis = Column(CodingKeys.createdMillis), expiresMillis = Column(CodingKeys.expiresMillis)
    }

    static func open(_ family: String) -> QueryInterfaceRequest<TimeRequestRow> {
        Self.filter(Columns.family == family && Columns.status == TimeRequestStatus.open.rawValue)
    }

    /// The store's copy.
    var record: TimeRequest {
        TimeRequest(childRef: .inDefaultZone(self.child), deviceID: self.deviceId, minutes: self.minutes, restOfDay: self.restOfDay ? true : nil,
                    app: self.app, appName: self.appName, note: self.note, status: self.status, createdAt: Millis.date(self.createdMillis),
                    expiresAt: Millis.date(self.expiresMillis), whilePaused: self.whilePaused ? true : nil, answeredAt: self.answeredMillis.map(Millis.date),
                    answeredByParentRef: self.answeredBy.map { .inDefaultZone(ParentingNames.parentRecord($0)) }, answeredBy: self.answeredByName,
                    grantedMinutes: self.grantedMinutes, reply: self.reply)
    }

    /// A copy met in the store's history (a database made again from it).
    init(family: String, id: String, _ record: TimeRequest) {
        self.family = family
        self.id = id
        self.child = record.childRef.recordName
        self.deviceId = record.deviceID
        self.minutes = record.minutes
        self.restOfDay = record.restOfDay ?? false
        self.app = record.app
        self.appName = record.appName
        self.note = record.note
        self.status = record.status
        self.createdMillis = Millis.of(record.createdAt)
        self.expiresMillis = Millis.of(record.expiresAt ?? record.createdAt)
        self.whilePaused = record.whilePaused ?? false
        self.answeredMillis = record.answeredAt.map(Millis.of)
        self.answeredBy = record.answeredByParentRef.map { ParentingNames.parentDevice($0.recordName) }
        self.answeredByName = record.answeredBy
        self.grantedMinutes = record.grantedMinutes
        self.reply = record.reply
    }

    init(family: String, id: String, child: String, deviceId: String, minutes: Int64, restOfDay: Bool, app: String?, appName: String?, note: String?,
         createdMillis: Int64, expiresMillis: Int64, whilePaused: Bool) {
        self.family = family
        self.id = id
        self.child = child
        self.deviceId = deviceId
        self.minutes = minutes
        self.restOfDay = restOfDay
        self.app = app
        self.appName = appName
        self.note = note
        self.status = TimeRequestStatus.open.rawValue
        self.createdMillis = createdMillis
        self.expiresMillis = expiresMillis
        self.whilePaused = whilePaused
    }
}

/// `pauses`: a parent's pause of a child's reward apps (one row per child, kept once ended).
struct PauseRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "pauses"

    var family: String
    var child: String
    var sinceMillis: Int64
    var untilMillis: Int64?
    var endedMillis: Int64?
    var byDevice: String
    var byName: String
    var reason: String?

    enum CodingKeys: String, CodingKey {
        case family, child, reason
        case sinceMillis = "since_ms", untilMillis = "until_ms", endedMillis = "ended_ms", byDevice = "by_device", byName = "by_name"
    }

    enum Columns {
        static let family = Column(CodingKeys.family), child = Column(CodingKeys.child)
        static let untilMillis = Column(CodingKeys.untilMillis), endedMillis = Column(CodingKeys.endedMillis)
    }

    /// Pauses on now (not ended).
    static var on: QueryInterfaceRequest<PauseRow> { Self.filter(Columns.endedMillis == nil) }

    static func on(_ child: EarnedTime.Child) -> QueryInterfaceRequest<PauseRow> {
        Self.on.filter(Columns.family == child.family && Columns.child == child.child)
    }
}

/// `record_outbox`: records to save in the store, in order.
struct RecordOutboxRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "record_outbox"
    var id: Int64?
    var family: String
    var zone: String
    var recordType: String
    var recordName: String
    var fields: String

    enum CodingKeys: String, CodingKey {
        case id, family, zone, fields
        case recordType = "record_type", recordName = "record_name"
    }

    enum Columns {
        static let id = Column(CodingKeys.id)
    }

    /// Queues a typed record's save (every field, as it is now).
    static func queue<F: RecordFields>(_ fields: F, named recordName: String, family: String, zone: String = StoreNames.defaultZone, _ db: Database) throws {
        let wire = try TypedRecord<F>.wireFields(fields)
        let text = try RPCJSON.encodeText(JSONValue.object(wire))
        try RecordOutboxRow(id: nil, family: family, zone: zone, recordType: F.recordType, recordName: recordName, fields: text).insert(db)
    }
}

/// `notify_outbox`: notifications to hand to push, in order.
struct NotifyOutboxRow: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "notify_outbox"
    var id: Int64?
    var family: String
    var params: String

    enum Columns {
        static let id = Column(CodingKeys.id)
    }

    static func queue(_ params: NotifyParams, _ db: Database) throws {
        var params = params
        // Named once, as queued: a retry after a restart (the first may have gone out before
        // its row was deleted) is then recognised by push and not sent twice.
        params.requestId = params.requestId ?? "notify-" + FamilyLog.randomHex()
        let text = try RPCJSON.encodeText(params)
        try NotifyOutboxRow(id: nil, family: params.family, params: text).insert(db)
    }
}

/// Record names the parenting actions use.
enum ParentingNames {
    /// `emma` → `child-emma`.
    static func childRecord(_ childId: String) -> String { "child-\(childId)" }
    /// A parent's ParentProfile: `parent-<deviceId>`.
    static func parentRecord(_ deviceId: String) -> String { "parent-\(deviceId)" }
    static func parentDevice(_ record: String) -> String { record.hasPrefix("parent-") ? String(record.dropFirst(7)) : record }
}
