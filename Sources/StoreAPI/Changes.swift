import Foundation
import RPCCore

/// `store.zoneChanges`: what changed in a zone since a change token.
public struct ZoneChangesParams: Codable, Sendable, Hashable {
    public var family: String
    public var zone: String
    /// The token of the previous call; none to get everything.
    public var since: String?
    /// Changes per page: default 200, at most 400.
    public var limit: Int?

    public init(family: String, zone: String, since: String? = nil, limit: Int? = nil) {
        self.family = family
        self.zone = zone
        self.since = since
        self.limit = limit
    }
}

public struct ZoneChangesResult: Codable, Sendable, Hashable {
    /// Records saved since the token, as they are now.
    public var records: [Record]
    /// Records deleted since the token.
    public var deletions: [RecordID]
    /// Pass it as `since` next time.
    public var token: String
    /// More changes are waiting: call again with `token` right away.
    public var moreComing: Bool

    public init(records: [Record], deletions: [RecordID], token: String, moreComing: Bool) {
        self.records = records
        self.deletions = deletions
        self.token = token
        self.moreComing = moreComing
    }
}

/// `store.databaseChanges`: which zones of a family changed since a token.
public struct DatabaseChangesParams: Codable, Sendable, Hashable {
    public var family: String
    public var since: String?
    /// Zones per page: default 200, at most 400.
    public var limit: Int?

    public init(family: String, since: String? = nil, limit: Int? = nil) {
        self.family = family
        self.since = since
        self.limit = limit
    }
}

public struct DatabaseChangesResult: Codable, Sendable, Hashable {
    /// Zones created or changed since the token: fetch their `store.zoneChanges`.
    public var changedZones: [String]
    /// Zones deleted since the token: drop them.
    public var deletedZones: [String]
    public var token: String
    public var moreComing: Bool

    public init(changedZones: [String], deletedZones: [String], token: String, moreComing: Bool) {
        self.changedZones = changedZones
        self.deletedZones = deletedZones
        self.token = token
        self.moreComing = moreComing
    }
}

/// `store.watch`: every committed change, in commit order, for the other services.
public struct WatchParams: Codable, Sendable, Hashable {
    /// Start after this sequence number (the `seq` of the last change processed); default
    /// 0, from the beginning of the retained log.
    public var after: Int64?
    /// Only changes to records of these types (zone, share and credential events are then
    /// left out).
    public var recordTypes: [String]?
    /// Only changes of these kinds. Default every kind but `credentialChanged`, which is sent
    /// only when named here (it carries the device's token hash).
    public var kinds: [ChangeKind]?
    /// Only changes in these families.
    public var families: [String]?
    /// Default true: after catching up, wait for new changes. False: end once caught up.
    public var follow: Bool?
    /// Default true: saves carry the record as it is now (omitted when a later change
    /// superseded it; that change follows), deletions the fields the record held.
    public var includeRecords: Bool?
    /// Who is watching (e.g. `push`): while a watcher of that name follows, the store does
    /// not wake its service on commits (see the store's `--wake`).
    public var watcher: String?
    /// End after this many changes (a page), caught up or not; the end's `lastSeq` is where
    /// the next page starts. 1 to 100,000; default no limit.
    public var limit: Int?

    public init(
        after: Int64? = nil, recordTypes: [String]? = nil, kinds: [ChangeKind]? = nil, families: [String]? = nil, follow: Bool? = nil,
        includeRecords: Bool? = nil, watcher: String? = nil, limit: Int? = nil
    ) {
        self.after = after
        self.recordTypes = recordTypes
        self.kinds = kinds
        self.families = families
        self.follow = follow
        self.includeRecords = includeRecords
        self.watcher = watcher
        self.limit = limit
    }

    public static let maximumLimit = 100_000
}

public enum ChangeKind: String, StringEnum {
    case recordSaved
    case recordDeleted
    case zoneCreated
    case zoneDeleted
    case shareChanged
    /// A device credential was recorded, confirmed, revoked or given a new token (its
    /// `zone` is empty). Sent only to a watch that names it in `kinds`.
    case credentialChanged
}

/// One committed change.
public struct ChangeEvent: Codable, Sendable, Hashable {
    /// Increases by commit order, never reused: the resume position.
    public var seq: Int64
    public var family: String
    public var zone: String
    public var kind: ChangeKind
    public var recordType: String?
    public var recordName: String?
    public var changeTag: String?
    /// For `recordSaved`, unless superseded or `includeRecords` is false.
    public var record: Record?
    public var at: Date
    /// For `recordSaved`: true when the save created the record (or brought a deleted one
    /// back), false when it changed an existing one.
    public var created: Bool?
    /// For `recordDeleted` (unless `includeRecords` is false): the fields the record held.
    public var deletedFields: [String: JSONValue]?
    /// For `recordDeleted` (unless `includeRecords` is false, or the record was saved again
    /// since): who deleted it, as `modifiedBy` says who saved (`device:<id>`, `local`).
    public var deletedBy: String?
    /// For `credentialChanged`: the credential as it is now (its `recordName` is the device).
    public var credential: CredentialEntry?

    public init(
        seq: Int64, family: String, zone: String, kind: ChangeKind, recordType: String?, recordName: String?,
        changeTag: String?, record: Record?, at: Date, created: Bool? = nil, deletedFields: [String: JSONValue]? = nil,
        deletedBy: String? = nil, credential: CredentialEntry? = nil
    ) {
        self.deletedBy = deletedBy
        self.credential = credential
        self.seq = seq
        self.family = family
        self.zone = zone
        self.kind = kind
        self.recordType = recordType
        self.recordName = recordName
        self.changeTag = changeTag
        self.record = record
        self.at = at
        self.created = created
        self.deletedFields = deletedFields
    }
}

public struct WatchEnd: Codable, Sendable, Hashable {
    /// The position reached: resume with `after` set to it.
    public var lastSeq: Int64
    public init(lastSeq: Int64) { self.lastSeq = lastSeq }
}
