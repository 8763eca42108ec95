import Foundation
import Logging
import PushAPI
import RPCClient
import RPCCore
import ServiceKit

/// Sends queued alerts to the family's parents with `push.notify` (high priority, one
/// collapse key per alert and subject, so a stale one is replaced while undelivered).
struct AlertWriter: Sendable {
    let push: RPCClient
    let database: AggregatorDatabase
    let logger: Logger

    func flush() async throws -> Int {
        let pending = try await self.database.pendingAlerts(limit: 100)
        for alert in pending {
            let data = (try? RPCJSON.makeDecoder().decode(JSONValue.self, from: Data(alert.data.utf8)))?.objectValue ?? [:]
            let subject = data["child"]?.stringValue ?? data["deviceId"]?.stringValue ?? ""
            let params = NotifyParams(family: alert.family, parents: true, alert: Alert(title: alert.title, body: alert.body), data: data,
                                      collapseKey: "alert:\(alert.kind):\(subject)", priority: .high)
            switch await self.notify(params) {
            case .success(let result):
                self.logger.notice("alert sent", metadata: ["family": "\(alert.family)", "alert": "\(alert.kind)", "parents": "\(result.queued.count)"])
            case .failure(let error) where error.code == .notFound || error.code == .invalidParams:
                self.logger.warning("alert dropped: push refused it", metadata: ["family": "\(alert.family)", "alert": "\(alert.kind)", "error": "\(error)"])
            case .failure(let error):
                throw error  // push is away: the alert waits in the outbox
            }
            try await self.database.alertSent(alert.id)
        }
        return pending.count
    }

    private func notify(_ params: NotifyParams) async -> Result<NotifyResult, RPCError> {
        do {
            return .success(try await self.push.call(PushMethods.notify, params))
        } catch {
            return .failure(error)
        }
    }
}
