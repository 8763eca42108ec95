import Foundation
import RPCCore

/// `store.backup`: a consistent online copy of the database, taken while writes go on.
public struct BackupParams: Codable, Sendable, Hashable {
    /// The copy's file name in `<state-dir>/backups/` (a plain name: no `/`, not `.` or
    /// `..`); default `store-<UTC time>.sqlite`. The file must not exist yet.
    public var path: String?

    public init(path: String? = nil) { self.path = path }
}

public struct BackupResult: Codable, Sendable, Hashable {
    public var path: String
    public var bytes: Int64
    /// Every change up to this sequence number is in the copy.
    public var lastSeq: Int64
    public var milliseconds: Double

    public init(path: String, bytes: Int64, lastSeq: Int64, milliseconds: Double) {
        self.path = path
        self.bytes = bytes
        self.lastSeq = lastSeq
        self.milliseconds = milliseconds
    }
}

/// `store.purge`: removes tombstones, deleted zones, change-log entries and idempotency
/// records older than the grace period (runs by itself every hour).
public struct PurgeParams: Codable, Sendable, Hashable {
    /// Default: the service's `--tombstone-grace`.
    public var olderThanSeconds: Double?
    public init(olderThanSeconds: Double? = nil) { self.olderThanSeconds = olderThanSeconds }
}

public struct PurgeResult: Codable, Sendable, Hashable {
    public var tombstones: Int
    public var zones: Int
    public var changes: Int
    /// `store.watch` positions below this are now expired.
    public var watchHorizon: Int64

    public init(tombstones: Int, zones: Int, changes: Int, watchHorizon: Int64) {
        self.tombstones = tombstones
        self.zones = zones
        self.changes = changes
        self.watchHorizon = watchHorizon
    }
}

/// `store.stats`: what the store has done since it started.
public struct StatsResult: Codable, Sendable, Hashable {
    /// When this process started.
    public var startedAt: Date
    /// Writes committed (one per `store.modify`, zone, share or credential change).
    public var writes: Int64
    /// Transactions committed: each is one fsync, shared by the writes of its batch.
    public var commits: Int64
    /// Writes per commit on average: how many saves share an fsync (group commit).
    public var writesPerCommit: Double
    /// The newest change's sequence number.
    public var head: Int64

    public init(startedAt: Date, writes: Int64, commits: Int64, writesPerCommit: Double, head: Int64) {
        self.startedAt = startedAt
        self.writes = writes
        self.commits = commits
        self.writesPerCommit = writesPerCommit
        self.head = head
    }
}

public enum FieldType: String, StringEnum {
    case string
    case int64
    case double
    case bool
    case date
    case reference
    case stringList
    case intList
    case json
}

public enum ReferenceAction: String, StringEnum {
    case none
    /// Deleting the referenced record deletes the referring one.
    case deleteSelf
}

/// What a child device may do with records of a type (in zones shared with it read-write).
public enum ChildAccess: String, StringEnum {
    /// Read only.
    case none
    /// Create, update and delete.
    case write
    /// Update the fields listed in `childWritableFields` of existing records only.
    case updateFields
}

public struct FieldInfo: Codable, Sendable, Hashable {
    public var name: String
    public var type: FieldType
    public var required: Bool
    /// Queryable: a query may filter and sort on it.
    public var indexed: Bool
    /// Queryable, but the store keeps no index entries for it: a query with nothing else to
    /// start from reads the records one by one, at most 10,000 a page. Absent: false.
    public var readFromRecords: Bool?
    public var allowedValues: [String]?
    public var minimum: Int64?
    /// For lists: merged by union under `changedKeys`.
    public var mergeAsSet: Bool?
    public var referenceAction: ReferenceAction?
    public var defaultValue: JSONValue?

    public init(
        name: String, type: FieldType, required: Bool, indexed: Bool, readFromRecords: Bool? = nil, allowedValues: [String]? = nil,
        minimum: Int64? = nil, mergeAsSet: Bool? = nil, referenceAction: ReferenceAction? = nil, defaultValue: JSONValue? = nil
    ) {
        self.name = name
        self.type = type
        self.required = required
        self.indexed = indexed
        self.readFromRecords = readFromRecords
        self.allowedValues = allowedValues
        self.minimum = minimum
        self.mergeAsSet = mergeAsSet
        self.referenceAction = referenceAction
        self.defaultValue = defaultValue
    }
}

public struct RecordTypeInfo: Codable, Sendable, Hashable {
    public var name: String
    public var summary: String
    public var fields: [FieldInfo]
    /// Each entry is one uniqueness constraint over these fields, within a family.
    public var unique: [[String]]
    public var childAccess: ChildAccess
    public var childWritableFields: [String]?
    /// For child writers: this field must hold the writing device's id.
    public var ownerField: String?
    /// Records of the type are never changed once written, and only the server's own
    /// services delete them (the points ledger); absent: false.
    public var appendOnly: Bool?
    /// A date field a save may not set after the server's time.
    public var notInFuture: NotInFutureInfo?
    /// Per field, values only the server's own services may write (a device gets `forbidden`).
    public var serverOnlyValues: [String: [String]]?

    public init(
        name: String, summary: String, fields: [FieldInfo], unique: [[String]], childAccess: ChildAccess,
        childWritableFields: [String]? = nil, ownerField: String? = nil, appendOnly: Bool? = nil, notInFuture: NotInFutureInfo? = nil,
        serverOnlyValues: [String: [String]]? = nil
    ) {
        self.name = name
        self.summary = summary
        self.fields = fields
        self.unique = unique
        self.childAccess = childAccess
        self.childWritableFields = childWritableFields
        self.ownerField = ownerField
        self.appendOnly = appendOnly
        self.notInFuture = notInFuture
        self.serverOnlyValues = serverOnlyValues
    }
}

/// `field` may not be later than the server's time plus `toleranceSeconds`, read by the
/// writer's clock: the store sets `offsetField` to how far the writer's clock
/// (`ModifyParams.deviceClock`) was ahead of the server's (seconds, whole minutes; absent
/// when the call has no clock) and moves `field` back by it before it judges.
public struct NotInFutureInfo: Codable, Sendable, Hashable {
    public var field: String
    public var offsetField: String
    public var toleranceSeconds: Int

    public init(field: String, offsetField: String, toleranceSeconds: Int) {
        self.field = field
        self.offsetField = offsetField
        self.toleranceSeconds = toleranceSeconds
    }
}

/// `store.schema`: the record types in force, after every migration applied.
public struct SchemaResult: Codable, Sendable, Hashable {
    public var version: Int
    public var recordTypes: [RecordTypeInfo]
    public init(version: Int, recordTypes: [RecordTypeInfo]) {
        self.version = version
        self.recordTypes = recordTypes
    }
}
