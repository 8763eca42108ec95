import Foundation
import Logging
import PushAPI
import RPCClient
import RPCCore
import ServiceKit
import StoreAPI

/// Sends queued alerts to the family's parents with `push.notify` (high priority, one
/// collapse key per alert and subject, so a stale one is replaced while undelivered), and
/// first keeps each as an AuditEntry (`action` `alert.<kind>`, actor `server`) in the
/// family's default zone: the alerts' history, which the dashboard's Activity page lists
/// (a push queue forgets what its device acknowledged).
struct AlertWriter: Sendable {
    let push: RPCClient
    let store: RPCClient
    let database: AggregatorDatabase
    let logger: Logger
    var metrics = AggregatorMetrics.none

    func flush() async throws -> Int {
        let pending = try await self.database.pendingAlerts(limit: 100)
        for alert in pending {
            let data = (try? RPCJSON.decode(JSONValue.self, from: alert.data))?.objectValue ?? [:]
            let subject = data["child"]?.stringValue ?? data["deviceId"]?.stringValue ?? ""
            // The outbox's id names the entry (AUTOINCREMENT: never reused), so a retry after
            // push was away saves the same record again rather than a second one.
            if let error = await self.store.write(try Self.auditEntry(alert, data: data, subject: subject), logger: self.logger) {
                guard error.code == .notFound else { throw error }  // the store is away: the alert waits
            }
            let params = NotifyParams(family: alert.family, parents: true, alert: Alert(title: alert.title, body: alert.body), data: data,
                                      collapseKey: "alert:\(alert.kind):\(subject)", priority: .high, requestId: Self.requestId(alert))
            switch await self.notify(params) {
            case .success(let result):
                self.logger.notice("alert sent", metadata: ["family": "\(alert.family)", "alert": "\(alert.kind)", "parents": "\(result.queued.count)"])
                self.metrics.alerts(alert.kind, "sent").increment()
            case .failure(let error) where error.code == .notFound || error.code == .invalidParams:
                self.logger.warning("alert dropped: push refused it", metadata: ["family": "\(alert.family)", "alert": "\(alert.kind)", "error": "\(error)"])
                self.metrics.alerts(alert.kind, "dropped").increment()
            case .failure(let error):
                throw error  // push is away: the alert waits in the outbox
            }
            try await self.database.alertSent(alert.id)
        }
        return pending.count
    }

    /// The alert's name for push: the same on every retry (a restart after push took it, before
    /// its row was deleted, sends it again, and push recognises it), and a new one for a new
    /// alert even when this database was made anew and its ids started again (the content
    /// goes in too: FNV-1a, the same in every process, unlike Swift's seeded `Hasher`).
    static func requestId(_ alert: AggregatorDatabase.PendingAlert) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in [alert.family, alert.kind, alert.title, alert.body, alert.data].joined(separator: "\n").utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return "alert-\(alert.id)-" + String(hash, radix: 16)
    }

    static func auditEntry(_ alert: AggregatorDatabase.PendingAlert, data: [String: JSONValue], subject: String) throws(RPCError) -> ModifyParams {
        var metadata = data
        metadata["title"] = .string(alert.title)
        metadata["body"] = .string(alert.body)
        let metadataText = (try? RPCJSON.encodeText(JSONValue.object(metadata))) ?? "{}"
        let entry = AuditEntry(familyRef: .inDefaultZone(alert.family), actorParentRef: .inDefaultZone(alert.family), action: "alert.\(alert.kind)",
                               target: subject, timestamp: Date(), metadata: metadataText, actor: "server")
        return ModifyParams(family: alert.family, zone: StoreNames.defaultZone, saves: [try .record(entry, named: "alert-\(alert.id)")], atomic: true)
    }

    private func notify(_ params: NotifyParams) async -> Result<NotifyResult, RPCError> {
        do {
            return .success(try await self.push.call(PushMethods.notify, params))
        } catch {
            return .failure(error)
        }
    }
}
