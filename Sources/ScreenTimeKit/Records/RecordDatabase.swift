import Foundation
import RPCCore
import StoreAPI

/// A family's records, as CloudKit's `CKDatabase` offers them: fetch by name, query (an
/// async sequence of pages), modify (three save policies, atomic batches), and the changes
/// of a zone since a change token the kit keeps. Calls go to the server now; to write
/// while offline, use ``SyncQueue`` (``ScreenTimeClient/queue``).
public struct RecordDatabase: Sendable {
    let session: Session
    let store: LocalStore

    /// The family of the device's credential.
    public var family: String {
        get throws(RPCError) { try self.session.requireIdentity().family }
    }

    // MARK: Fetch

    /// Records by name (at most 400); `missing` names those with no live record.
    public func fetch(_ recordNames: [String], in zone: String) async throws(RPCError) -> FetchResult {
        try await self.session.call(StoreMethods.fetch, FetchParams(family: try self.family, zone: zone, recordNames: recordNames))
    }

    /// One record, typed; nil when there is none.
    public func fetch<F: RecordFields>(_ type: F.Type, _ recordName: String, in zone: String) async throws(RPCError) -> TypedRecord<F>? {
        let result = try await self.fetch([recordName], in: zone)
        return try result.records.first.map { record throws(RPCError) in try TypedRecord<F>(record) }
    }

    // MARK: Query

    /// Records of one type matching every filter (on indexed fields), sorted, as pages of
    /// up to `pageSize`, fetched as the caller iterates. Without a zone, every zone of the
    /// family the device may read.
    public func query<F: RecordFields>(
        _ type: F.Type, in zone: String? = nil, where filters: [QueryFilter] = [], sort: QuerySort? = nil, pageSize: Int = QueryParams.defaultLimit
    ) -> RecordPages<F> {
        RecordPages(session: self.session, zone: zone, filters: filters, sort: sort, pageSize: pageSize)
    }

    /// Every matching record (all pages).
    public func queryAll<F: RecordFields>(_ type: F.Type, in zone: String? = nil, where filters: [QueryFilter] = [], sort: QuerySort? = nil) async throws(RPCError) -> [TypedRecord<F>] {
        var all: [TypedRecord<F>] = []
        do {
            for try await page in self.query(F.self, in: zone, where: filters, sort: sort, pageSize: QueryParams.maximumLimit) { all += page }
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError(.internal, "\(error)")
        }
        return all
    }

    // MARK: Modify

    /// Saves and deletes in one zone, now (`CKModifyRecordsOperation`). With `atomic`, all
    /// or nothing. A `requestId` makes a retry safe. Per-item errors are in the result
    /// unless atomic, when the first fails the call.
    public func modify(
        in zone: String, saves: [RecordSave] = [], deletes: [RecordDelete] = [], policy: SavePolicy = .ifServerRecordUnchanged,
        atomic: Bool = true, requestId: String? = nil
    ) async throws(RPCError) -> ModifyResult {
        try await self.session.call(StoreMethods.modify, ModifyParams(
            family: try self.family, zone: zone, saves: saves.isEmpty ? nil : saves, deletes: deletes.isEmpty ? nil : deletes,
            savePolicy: policy, atomic: atomic, requestId: requestId))
    }

    /// Saves one record and returns it as the server stored it (new change tag). With
    /// `ifServerRecordUnchanged` (the default), a record changed on the server since the
    /// caller's copy throws ``SaveConflict`` carrying the server's record.
    @discardableResult
    public func save<F: RecordFields>(_ record: TypedRecord<F>, policy: SavePolicy = .ifServerRecordUnchanged) async throws -> TypedRecord<F> {
        let save = try record.save()
        let result = try await self.modify(in: record.zone, saves: [save], policy: policy, atomic: false)
        guard let outcome = result.saved.first else { throw RPCError(.internal, "the store returned no outcome for \(record.recordName)") }
        if let error = outcome.error {
            if error.code == .conflict, error.field == nil {
                throw SaveConflict(zone: record.zone, attempted: save, serverRecord: error.serverRecord, message: error.message)
            }
            throw RPCError(error.code, error.message, data: error.field.map { ["field": .string($0)] })
        }
        guard let saved = outcome.record else { throw RPCError(.internal, "the store returned no record for \(record.recordName)") }
        return try TypedRecord<F>(saved)
    }

    /// Saves a record edited from `base` (the copy the caller read), rebasing on the
    /// server's record as often as it changed meanwhile: fields the caller
    /// changed win, the others keep the server's value, set-like lists merge by union.
    @discardableResult
    public func save<F: RecordFields>(_ record: TypedRecord<F>, rebasingFrom base: TypedRecord<F>?, attempts: Int = 5) async throws -> TypedRecord<F> {
        var attempt = record
        for _ in 0..<max(1, attempts) {
            do {
                return try await self.save(attempt, policy: .ifServerRecordUnchanged)
            } catch let conflict as SaveConflict {
                guard let server = try conflict.server(as: F.self) else {
                    // Deleted on the server meanwhile: saving creates it again.
                    attempt.changeTag = nil
                    continue
                }
                attempt = try Rebase.merge(base: base, mine: record, server: server)
            }
        }
        throw RPCError(.conflict, "\(F.recordType) \(record.recordName) kept changing on the server; \(attempts) attempts to rebase failed")
    }

    /// Deletes records by name.
    public func delete(_ recordNames: [String], in zone: String) async throws(RPCError) -> ModifyResult {
        try await self.modify(in: zone, deletes: recordNames.map { RecordDelete(recordName: $0) }, atomic: false)
    }

    // MARK: Changes

    /// What changed in a zone since the last call (`CKFetchRecordZoneChangesOperation`):
    /// `handle` gets each page of changes; the kit keeps the change token and moves it
    /// forward only after `handle` returns, so a crash in the handler means the same
    /// changes come again, never that some are skipped. An expired token starts over from
    /// everything (`reset` is true on that first page). Returns the number of pages.
    @discardableResult
    public func fetchChanges(in zone: String, _ handle: (ZoneChanges) async throws -> Void) async throws -> Int {
        let family = try self.family
        let key = "token:\(family)/\(zone)"
        var since = try self.store.value(key)
        var reset = false
        var pages = 0
        while true {
            let result: ZoneChangesResult
            do {
                result = try await self.session.call(StoreMethods.zoneChanges, ZoneChangesParams(family: family, zone: zone, since: since))
            } catch {
                guard error.code == .changeTokenExpired else { throw error }
                try self.store.setValue(nil, for: key)
                since = nil
                reset = true
                continue
            }
            try await handle(ZoneChanges(zone: zone, records: result.records, deletions: result.deletions, reset: reset, moreComing: result.moreComing))
            try self.store.setValue(result.token, for: key)
            since = result.token
            reset = false
            pages += 1
            if !result.moreComing { return pages }
        }
    }

    /// Forgets a zone's change token: the next ``fetchChanges(in:_:)`` starts from everything.
    public func resetChangeToken(in zone: String) throws(RPCError) {
        try self.store.setValue(nil, for: "token:\(try self.family)/\(zone)")
    }
}

/// One page of a zone's changes.
public struct ZoneChanges: Sendable {
    public var zone: String
    /// Records saved since the token, as they are now.
    public var records: [Record]
    public var deletions: [RecordID]
    /// The token had expired: this starts over from everything; drop what you had cached.
    public var reset: Bool
    public var moreComing: Bool

    /// The saved records of one type, typed (others left out).
    public func records<F: RecordFields>(_ type: F.Type) throws(RPCError) -> [TypedRecord<F>] {
        var typed: [TypedRecord<F>] = []
        for record in self.records where record.recordType == F.recordType { typed.append(try TypedRecord<F>(record)) }
        return typed
    }
}

/// A query's results, page by page (`CKQueryOperation` with its cursor).
public struct RecordPages<F: RecordFields>: AsyncSequence, Sendable {
    public typealias Element = [TypedRecord<F>]
    let session: Session
    let zone: String?
    let filters: [QueryFilter]
    let sort: QuerySort?
    let pageSize: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let pages: RecordPages<F>
        var cursor: String?
        var done = false

        public mutating func next() async throws -> [TypedRecord<F>]? {
            if self.done { return nil }
            let family = try self.pages.session.requireIdentity().family
            var result: QueryResult
            // A page may come back empty with a cursor (the server read all it reads for one
            // page and found none): the next one is asked for rather than an empty page given.
            repeat {
                try Task.checkCancellation()
                result = try await self.pages.session.call(StoreMethods.query, QueryParams(
                    family: family, zone: self.pages.zone, recordType: F.recordType, filters: self.pages.filters.isEmpty ? nil : self.pages.filters,
                    sort: self.pages.sort, limit: self.pages.pageSize, cursor: self.cursor))
                self.cursor = result.cursor
                self.done = result.cursor == nil
            } while result.records.isEmpty && !self.done
            if result.records.isEmpty { return nil }
            var page: [TypedRecord<F>] = []
            for record in result.records { page.append(try TypedRecord<F>(record)) }
            return page
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pages: self) }
}
