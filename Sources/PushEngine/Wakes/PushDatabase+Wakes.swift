import DurableSQLite
import Foundation
import GRDB
import PushAPI
import RelayCore

/// A wake is the relay's `background` (silent) or `alert` (content-free, visible) push.
typealias WakeKind = WakeRequest.Kind

extension WakeRequest.Kind {
    /// What kind of wake a notification asks for: low-priority ones wake nobody; one with
    /// an alert asks for an alert.
    static func of(_ notification: PushNotification) -> WakeKind? {
        if notification.priority == .low { return nil }
        return notification.alert == nil ? .background : .alert
    }
}

/// Wake registrations and their pending wakes: at most one per device, raised (never
/// duplicated) by each notification queued for it and cleared by its acknowledgement.
extension PushDatabase {
    /// A wake due to be sent.
    struct DueWake: Sendable {
        var family: String
        var deviceId: String
        var handle: String
        /// The last notification it is for.
        var seq: Int64
        var kind: WakeKind
        var expiresAt: Date
        /// Attempts made already.
        var attempts: Int
        /// Background wakes sent in the last hour.
        var recent: [Int64]
    }

    static let hour: Int64 = 3_600_000
    /// After a background wake, how long the device has to wake and fetch before what came
    /// meanwhile wakes it again (iOS gives a woken app about 30 s).
    static let settle: Int64 = 30_000

    func registerWake(family: String, deviceId: String, handle: String, relay: String, now: Date) async throws -> WakeInfo {
        try await self.pool.write { db in
            // A new registration keeps the hour's count: registering again does not reset the cap.
            try db.execute(sql: """
                INSERT INTO wakes(family, device_id, handle, relay, status, registered_at) VALUES (?, ?, ?, ?, 'active', ?)
                ON CONFLICT(family, device_id) DO UPDATE SET handle = excluded.handle, relay = excluded.relay, status = 'active',
                    registered_at = excluded.registered_at, attempts = 0, last_error = NULL
                """, arguments: [family, deviceId, handle, relay, Millis.of(now)])
            return try Self.wakeInfos(family: family, deviceId: deviceId, now: now, db)[0]
        }
    }

    func wakeInfo(family: String, deviceId: String, now: Date) async throws -> WakeInfo? {
        try await self.pool.read { db in try Self.wakeInfos(family: family, deviceId: deviceId, now: now, db).first }
    }

    func wakeInfos(family: String, now: Date) async throws -> [WakeInfo] {
        try await self.pool.read { db in try Self.wakeInfos(family: family, deviceId: nil, now: now, db) }
    }

    /// False when there was none.
    func removeWake(family: String, deviceId: String) async throws -> Bool {
        try await self.pool.write { db in try Self.deleteWake(family: family, deviceId: deviceId, db) }
    }

    static func deleteWake(family: String, deviceId: String, _ db: Database) throws -> Bool {
        try WakeEntry.of(family: family, deviceId: deviceId).deleteAll(db) > 0
    }

    /// The devices whose registration is active.
    func activeWakes() async throws -> [(family: String, deviceId: String)] {
        try await self.pool.read { db in
            try WakeEntry.select(WakeEntry.Columns.family, WakeEntry.Columns.deviceId).filter(WakeEntry.Columns.status == WakeStatus.active.rawValue)
                .asRequest(of: Row.self).fetchAll(db).map { ($0[WakeEntry.Columns.family], $0[WakeEntry.Columns.deviceId]) }
        }
    }

    /// Each device's notifications of the batch ask for one wake: the earliest due, the
    /// strongest kind, the last notification, the latest expiry.
    static func scheduleWakes(_ queued: [Queued], _ db: Database) throws {
        struct Pending {
            var due: Int64
            var seq: Int64
            var kind: WakeKind
            var expires: Int64
            /// The last of them that asked for an alert.
            var alertSeq: Int64?
        }
        var byDevice: [DeviceKey: Pending] = [:]
        let now = Millis.now()
        for item in queued {
            guard let wake = item.wake else { continue }
            let due = now + Int64(wake.after.seconds * 1000)
            let key = DeviceKey(family: item.family, deviceId: item.deviceId)
            var pending = byDevice[key] ?? Pending(due: due, seq: item.seq, kind: wake.kind, expires: Millis.of(item.expiresAt))
            pending.due = min(pending.due, due)
            pending.seq = max(pending.seq, item.seq)
            if wake.kind == .alert {
                pending.kind = .alert
                pending.alertSeq = max(pending.alertSeq ?? 0, item.seq)
            }
            pending.expires = max(pending.expires, Millis.of(item.expiresAt))
            byDevice[key] = pending
        }
        for (key, pending) in byDevice {
            try db.cachedStatement(sql: """
                UPDATE wakes SET due_ms = CASE WHEN due_ms IS NULL OR due_ms > ?1 THEN ?1 ELSE due_ms END,
                    due_seq = max(coalesce(due_seq, 0), ?2),
                    due_kind = CASE WHEN ?3 = 'alert' OR due_kind = 'alert' THEN 'alert' ELSE 'background' END,
                    due_expires_ms = max(coalesce(due_expires_ms, 0), ?4),
                    due_alert_seq = CASE WHEN ?7 IS NULL THEN due_alert_seq ELSE max(coalesce(due_alert_seq, 0), ?7) END
                WHERE family = ?5 AND device_id = ?6 AND status = 'active'
                """).execute(arguments: [pending.due, pending.seq, pending.kind.rawValue, pending.expires, key.family, key.deviceId, pending.alertSeq])
        }
    }

    /// The device acknowledged up to `upTo`: a wake for no more than that is not needed.
    static func cancelWake(family: String, deviceId: String, upTo: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: """
            UPDATE wakes SET due_ms = NULL, due_seq = NULL, due_kind = NULL, due_expires_ms = NULL, due_alert_seq = NULL, attempts = 0
            WHERE family = ? AND device_id = ? AND due_seq <= ?
            """).execute(arguments: [family, deviceId, upTo])
    }

    /// Up to `limit` wakes due by `now`, earliest first. A wake whose notifications were
    /// all acknowledged or expired meanwhile is dropped on the way; a background wake for a
    /// device woken in the last `settle` that has not yet acknowledged what that wake was
    /// for waits until then (the woken app fetches this too; an alert never waits).
    func dueWakes(now: Date, limit: Int) async throws -> [DueWake] {
        try await self.pool.write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT w.family, w.device_id, w.handle, w.due_seq, w.due_kind, w.due_expires_ms, w.attempts, w.recent,
                    w.last_outcome, w.last_wake_at, w.last_wake_seq, coalesce(d.acked, 0) AS acked
                FROM wakes w LEFT JOIN devices d ON d.family = w.family AND d.device_id = w.device_id
                WHERE w.due_ms IS NOT NULL AND w.due_ms <= ? AND w.status = 'active' ORDER BY w.due_ms LIMIT ?
                """, arguments: [Millis.of(now), limit])
            var due: [DueWake] = []
            for row in rows {
                let family: String = row["family"], deviceId: String = row["device_id"]
                let seq: Int64 = row["due_seq"] ?? 0, acked: Int64 = row["acked"], expires: Int64 = row["due_expires_ms"] ?? 0
                guard seq > acked, expires > Millis.of(now) else {
                    try Self.clearWake(family: family, deviceId: deviceId, db)
                    continue
                }
                let kind = WakeKind(rawValue: row["due_kind"] ?? "") ?? .background
                let lastWake: Int64? = row["last_wake_at"], lastWakeSeq: Int64 = row["last_wake_seq"] ?? 0, lastOutcome: String? = row["last_outcome"]
                if kind == .background, lastOutcome == WakeOutcome.sent.rawValue, lastWakeSeq > acked,
                   let lastWake, lastWake + Self.settle > Millis.of(now) {
                    try WakeEntry.of(family: family, deviceId: deviceId).updateAll(db, WakeEntry.Columns.dueMs.set(to: lastWake + Self.settle))
                    continue
                }
                due.append(DueWake(
                    family: family, deviceId: deviceId, handle: row["handle"], seq: seq, kind: kind, expiresAt: Millis.date(expires),
                    attempts: row["attempts"], recent: Self.recent(row["recent"], now: Millis.of(now))))
            }
            return due
        }
    }

    /// When the next wake is due, if any.
    func nextWakeDue() async throws -> Date? {
        try await self.pool.read { db in
            try WakeEntry.filter(WakeEntry.Columns.status == WakeStatus.active.rawValue).select(min(WakeEntry.Columns.dueMs), as: Int64.self)
                .fetchOne(db).map(Millis.date)
        }
    }

    /// What came of a wake, to be written with the others of its batch.
    enum WakeResult: Sendable {
        /// The relay (or APNs) took it. Notifications queued since it was read keep their
        /// wake (``dueWakes(now:limit:)`` gives the device `settle` to fetch them first).
        case sent(DueWake, at: Date)
        /// The hour's background wakes are spent: it waits until `until`.
        case held(DueWake, until: Date)
        /// Tried again at `due`.
        case retry(DueWake, at: Date, error: String, now: Date)
        /// Given up (the notifications stay queued for the device's next connection).
        case abandoned(DueWake, error: String, now: Date)
        /// The registration is no use any more: marked gone until the device registers again.
        case gone(DueWake, outcome: WakeOutcome, error: String, now: Date)
    }

    /// Writes what came of a batch of wakes, in one transaction (a rule change wakes every
    /// device of a family at once: one commit for them all, not one each).
    func record(_ results: [WakeResult]) async throws {
        guard !results.isEmpty else { return }
        try await self.pool.write { db in
            for result in results { try Self.record(result, db) }
        }
    }

    private static func record(_ result: WakeResult, _ db: Database) throws {
        switch result {
        case .sent(let wake, let now):
            let recent = wake.kind == .background ? wake.recent + [Millis.of(now)] : wake.recent
            try db.cachedStatement(sql: """
                UPDATE wakes SET last_wake_at = ?1, last_wake_seq = ?3, last_outcome = 'sent', last_error = NULL, attempts = 0, recent = ?2,
                    due_ms = CASE WHEN due_seq > ?3 THEN due_ms END,
                    due_seq = CASE WHEN due_seq > ?3 THEN due_seq END,
                    -- notifications queued while this one was sent: their own kind, not this one's
                    due_kind = CASE WHEN due_seq > ?3 THEN (CASE WHEN coalesce(due_alert_seq, 0) > ?3 THEN 'alert' ELSE 'background' END) END,
                    due_alert_seq = CASE WHEN due_seq > ?3 AND due_alert_seq > ?3 THEN due_alert_seq END,
                    due_expires_ms = CASE WHEN due_seq > ?3 THEN due_expires_ms END
                WHERE family = ?4 AND device_id = ?5
                """).execute(arguments: [Millis.of(now), recent.map(String.init).joined(separator: ","), wake.seq, wake.family, wake.deviceId])
        case .held(let wake, let until):
            try WakeEntry.of(family: wake.family, deviceId: wake.deviceId).filter(WakeEntry.Columns.dueMs != nil)
                .updateAll(db, WakeEntry.Columns.dueMs.set(to: Millis.of(until)), WakeEntry.Columns.lastOutcome.set(to: WakeOutcome.held.rawValue))
        case .retry(let wake, let due, let error, let now):
            try WakeEntry.of(family: wake.family, deviceId: wake.deviceId).filter(WakeEntry.Columns.dueMs != nil).updateAll(db,
                WakeEntry.Columns.attempts += 1, WakeEntry.Columns.dueMs.set(to: Millis.of(due)), WakeEntry.Columns.lastError.set(to: error),
                WakeEntry.Columns.lastWakeAt.set(to: Millis.of(now)), WakeEntry.Columns.lastOutcome.set(to: WakeOutcome.failed.rawValue))
        case .abandoned(let wake, let error, let now):
            try Self.clearWake(family: wake.family, deviceId: wake.deviceId, db)
            try WakeEntry.of(family: wake.family, deviceId: wake.deviceId).updateAll(db,
                WakeEntry.Columns.lastError.set(to: error), WakeEntry.Columns.lastWakeAt.set(to: Millis.of(now)),
                WakeEntry.Columns.lastOutcome.set(to: WakeOutcome.failed.rawValue))
        case .gone(let wake, let outcome, let error, let now):
            try Self.clearWake(family: wake.family, deviceId: wake.deviceId, db)
            try WakeEntry.of(family: wake.family, deviceId: wake.deviceId).filter(WakeEntry.Columns.handle == wake.handle).updateAll(db,
                WakeEntry.Columns.status.set(to: WakeStatus.gone.rawValue), WakeEntry.Columns.lastError.set(to: error),
                WakeEntry.Columns.lastWakeAt.set(to: Millis.of(now)), WakeEntry.Columns.lastOutcome.set(to: outcome.rawValue))
        }
    }

    private static func clearWake(family: String, deviceId: String, _ db: Database) throws {
        try WakeEntry.of(family: family, deviceId: deviceId).updateAll(db,
            WakeEntry.Columns.dueMs.set(to: nil), WakeEntry.Columns.dueSeq.set(to: nil), WakeEntry.Columns.dueKind.set(to: nil),
            WakeEntry.Columns.dueExpiresMs.set(to: nil), WakeEntry.Columns.dueAlertSeq.set(to: nil), WakeEntry.Columns.attempts.set(to: 0))
    }

    /// The times in `text` within the hour before `now`.
    static func recent(_ text: String, now: Int64) -> [Int64] {
        text.split(separator: ",").compactMap { Int64($0) }.filter { $0 > now - Self.hour }
    }

    private static func wakeInfos(family: String, deviceId: String?, now: Date, _ db: Database) throws -> [WakeInfo] {
        var request = WakeEntry.filter(WakeEntry.Columns.family == family)
        if let deviceId { request = request.filter(WakeEntry.Columns.deviceId == deviceId) }
        let rows = try request.order(WakeEntry.Columns.deviceId).asRequest(of: Row.self).fetchAll(db)
        return rows.map { row in
            let relay: String = row[WakeEntry.Columns.relay]
            let lastWake: Int64? = row[WakeEntry.Columns.lastWakeAt], due: Int64? = row[WakeEntry.Columns.dueMs]
            return WakeInfo(
                deviceId: row[WakeEntry.Columns.deviceId], relayHost: relay == DirectAPNs.marker ? "APNs" : URL(string: relay)?.host ?? relay,
                status: WakeStatus(rawValue: row[WakeEntry.Columns.status]) ?? .gone, registeredAt: Millis.date(row[WakeEntry.Columns.registeredAt]),
                lastWakeAt: lastWake.map(Millis.date), lastOutcome: (row[WakeEntry.Columns.lastOutcome] as String?).flatMap(WakeOutcome.init(rawValue:)),
                lastError: row[WakeEntry.Columns.lastError], wakesLastHour: Self.recent(row[WakeEntry.Columns.recent], now: Millis.of(now)).count,
                dueAt: due.map(Millis.date))
        }
    }
}

/// A device's wake registration and its pending wake (the `wakes` table). The statements
/// on the notification path (raising a wake for each batch, clearing it on an
/// acknowledgement, recording a sent one) stay SQL in the statement cache: each is one
/// conditional UPDATE that the query interface would say less clearly.
private enum WakeEntry: TableRecord {
    static let databaseTableName = "wakes"

    enum Columns {
        static let family = Column("family"), deviceId = Column("device_id"), handle = Column("handle"), relay = Column("relay")
        static let status = Column("status"), registeredAt = Column("registered_at"), attempts = Column("attempts"), recent = Column("recent")
        static let dueMs = Column("due_ms"), dueSeq = Column("due_seq"), dueKind = Column("due_kind"), dueExpiresMs = Column("due_expires_ms")
        static let dueAlertSeq = Column("due_alert_seq")
        static let lastWakeAt = Column("last_wake_at"), lastOutcome = Column("last_outcome"), lastError = Column("last_error")
    }

    static func of(family: String, deviceId: String) -> QueryInterfaceRequest<WakeEntry> {
        self.filter(Columns.family == family && Columns.deviceId == deviceId)
    }
}
