import Foundation
import RPCCore

/// How a save treats the server's copy of the record.
public enum SavePolicy: String, StringEnum {
    /// The save's `changeTag` must match the server's (none for a new record); otherwise the
    /// item fails with `conflict` and carries the server's record to rebase onto.
    case ifServerRecordUnchanged
    /// Only the fields sent change; the last writer (by server time) wins per field, and
    /// set-like lists (`deviceIds`, `pairedDeviceIds`) merge by union.
    case changedKeys
    /// The fields sent replace the record's, whatever its change tag.
    case allKeys
}

/// `store.modify`: saves and deletes in one zone, at most 400 items.
public struct ModifyParams: Codable, Sendable, Hashable {
    public var family: String
    public var zone: String
    public var saves: [RecordSave]?
    public var deletes: [RecordDelete]?
    /// Default `ifServerRecordUnchanged`.
    public var savePolicy: SavePolicy?
    /// All-or-nothing: any failing item fails the whole call (nothing is applied) with the
    /// first item's error code and `data.failures`. Default false: per-item results.
    public var atomic: Bool?
    /// Makes a retry safe: a second call with the same request id (same caller, same family)
    /// returns the first call's result without applying anything again.
    public var requestId: String?
    /// The writer's clock when it sent this call (set again on each retry): how far a
    /// device's clock is off, for record types whose dates the server checks (UsageRecord).
    public var deviceClock: Date?

    public init(
        family: String, zone: String, saves: [RecordSave]? = nil, deletes: [RecordDelete]? = nil,
        savePolicy: SavePolicy? = nil, atomic: Bool? = nil, requestId: String? = nil, deviceClock: Date? = nil
    ) {
        self.family = family
        self.zone = zone
        self.saves = saves
        self.deletes = deletes
        self.savePolicy = savePolicy
        self.atomic = atomic
        self.requestId = requestId
        self.deviceClock = deviceClock
    }

    public static let maximumItems = 400
}

/// The outcome of one save: the saved record, or why it failed.
public struct SaveOutcome: Codable, Sendable, Hashable {
    public var recordName: String
    public var record: Record?
    public var error: ItemError?

    public init(recordName: String, record: Record? = nil, error: ItemError? = nil) {
        self.recordName = recordName
        self.record = record
        self.error = error
    }
}

/// The outcome of one delete.
public struct DeleteOutcome: Codable, Sendable, Hashable {
    public var recordName: String
    /// True when the record was deleted by this call; false when it already was.
    public var deleted: Bool?
    public var error: ItemError?

    public init(recordName: String, deleted: Bool? = nil, error: ItemError? = nil) {
        self.recordName = recordName
        self.deleted = deleted
        self.error = error
    }
}

public struct ModifyResult: Codable, Sendable, Hashable {
    /// One outcome per save, in request order.
    public var saved: [SaveOutcome]
    /// One outcome per delete, in request order.
    public var deleted: [DeleteOutcome]
    /// Records deleted because they referenced a deleted record with `deleteSelf`.
    public var cascaded: [RecordID]
    /// True when this is the stored result of an earlier call with the same `requestId`.
    public var replayed: Bool

    public init(saved: [SaveOutcome], deleted: [DeleteOutcome], cascaded: [RecordID], replayed: Bool) {
        self.saved = saved
        self.deleted = deleted
        self.cascaded = cascaded
        self.replayed = replayed
    }

    /// True when every item succeeded.
    public var allSucceeded: Bool {
        self.saved.allSatisfy { $0.error == nil } && self.deleted.allSatisfy { $0.error == nil }
    }
}

/// One failing item of an atomic batch, in the error's `data.failures`.
public struct ItemFailure: Codable, Sendable, Hashable {
    /// `save` or `delete`.
    public var kind: String
    /// Position in `saves` or `deletes`.
    public var index: Int
    public var recordName: String
    public var error: ItemError

    public init(kind: String, index: Int, recordName: String, error: ItemError) {
        self.kind = kind
        self.index = index
        self.recordName = recordName
        self.error = error
    }
}

/// `store.fetch`: records by name.
public struct FetchParams: Codable, Sendable, Hashable {
    public var family: String
    public var zone: String
    /// At most 400.
    public var recordNames: [String]

    public init(family: String, zone: String, recordNames: [String]) {
        self.family = family
        self.zone = zone
        self.recordNames = recordNames
    }
}

public struct FetchResult: Codable, Sendable, Hashable {
    public var records: [Record]
    /// Names with no live record (never saved, or deleted).
    public var missing: [String]

    public init(records: [Record], missing: [String]) {
        self.records = records
        self.missing = missing
    }
}
