import DurableSQLite
import Foundation
import GRDB
import Logging
import PushAPI
import RPCCore
import ServiceKit
import ServiceLifecycle

/// The collapse window: a change's "fetch changes" hint (a zone or family subscription's
/// notification, which says only "this zone changed") is held for the window before it is
/// numbered and sent, and a later one for the same device and key replaces it meanwhile. So a burst of changes (a summary and a balance written one after
/// the other, a rule saved five times in a second) reaches each listener as one
/// notification, the last, at most one window after the first. Held drafts are rows of the
/// `deferred` table, written in the transaction that moves the change-log position: a
/// crash loses none; they go out at the next start.
///
/// A query subscription's notifications (each carries its record's fields) and
/// `push.notify`'s are not held: each one counts. Held hints are numbered when released, so
/// that acknowledging one notification never covers one still held.
struct Deferred: Service {
    struct Key: Sendable, Hashable {
        var family: String
        var deviceId: String
        var collapseKey: String
        var version: Int64
    }

    let database: PushDatabase
    let dispatch: Dispatch
    let wakeup: Wakeup
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let next = try await self.releaseDue(now: Date())
                    let wait = next.map { max(Duration.milliseconds(1), .milliseconds(Int64($0.timeIntervalSinceNow * 1000))) } ?? .seconds(60)
                    await self.wakeup.wait(upTo: wait)
                } catch {
                    self.logger.warning("sending held notifications failed; retrying", metadata: ["error": "\(error)"])
                    await self.wakeup.wait(upTo: .seconds(1))
                }
            }
        }
    }

    /// Numbers, queues and sends the held drafts due by `now`; returns when the next one is
    /// due (nil: none held).
    func releaseDue(now: Date) async throws -> Date? {
        // Rows are not Sendable: read into (key, body) pairs, so that the read is the pool's
        // asynchronous one and no thread of the cooperative pool waits for the database.
        let (due, next) = try await self.database.pool.read { db -> ([(key: Key, body: String)], Date?) in
            let rows = try Row.fetchAll(db, sql: "SELECT family, device_id, collapse_key, version, body FROM deferred WHERE due_ms <= ? ORDER BY due_ms LIMIT 1000",
                                        arguments: [Millis.of(now)])
            let next = try Int64.fetchOne(db, sql: "SELECT min(due_ms) FROM deferred WHERE due_ms > ?", arguments: [Millis.of(now)])
            return (rows.map { row in
                (Key(family: row["family"], deviceId: row["device_id"], collapseKey: row["collapse_key"], version: row["version"]), row["body"])
            }, next.map(Millis.date))
        }
        guard !due.isEmpty else { return next }
        var drafts: [PushDatabase.Draft] = []
        var keys: [Key] = []
        for (key, body) in due {
            keys.append(key)
            do {
                // Held as written unnumbered (no `seq`): numbered when released.
                guard case .object(var fields) = try JSONParser.parse(body) else { throw PushDatabase.Unreadable() }
                fields["seq"] = 0
                drafts.append(PushDatabase.Draft(family: key.family, deviceId: key.deviceId,
                                                 notification: try JSONValueDecoding.decode(PushNotification.self, from: .object(fields))))
            } catch {
                self.logger.error("a held notification cannot be read; dropped", metadata: ["family": "\(key.family)", "device_id": "\(key.deviceId)", "error": "\(error)"])
            }
        }
        _ = try await self.dispatch.queue(drafts, releasing: keys)
        return due.count == 1000 ? now : next
    }

    /// Holds drafts (in the caller's transaction): a new key is due at `due`; a held one
    /// keeps its time and takes the newer notification.
    static func hold(_ drafts: [(PushDatabase.Draft, String)], due: Date, _ db: Database) throws {
        for (draft, body) in drafts {
            guard let key = draft.notification.collapseKey else { continue }
            try db.execute(cached: """
                INSERT INTO deferred(family, device_id, collapse_key, due_ms, body) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(family, device_id, collapse_key) DO UPDATE SET body = excluded.body, version = version + 1
                """, arguments: [draft.family, draft.deviceId, key, Millis.of(due), body])
        }
    }

    /// Forgets released drafts (in the caller's transaction), unless a newer one replaced
    /// one meanwhile: that one stays held, due at once.
    static func delete(_ keys: [Key], _ db: Database) throws {
        for key in keys {
            try db.execute(cached: "DELETE FROM deferred WHERE family = ? AND device_id = ? AND collapse_key = ? AND version = ?",
                           arguments: [key.family, key.deviceId, key.collapseKey, key.version])
        }
    }
}
