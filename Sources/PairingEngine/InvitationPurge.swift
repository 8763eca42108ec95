import Foundation
import Logging
import ServiceLifecycle
import RPCCore
import StoreAPI

/// Deletes invitations and enrollment codes that can no longer be used (expired, plus
/// the grace during which an accepted one may still be confirmed), hourly.
struct InvitationPurge: Service {
    let store: PairingStore
    let logger: Logger
    var interval: Duration = .seconds(3600)
    var grace: TimeInterval = 3600

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let interval = self.interval
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
            do {
                try await self.purgeOnce()
            } catch {
                self.logger.warning("invitation purge failed; will retry", metadata: ["error": "\(error)"])
            }
        }
    }

    func purgeOnce() async throws {
        let cutoff = Date().addingTimeInterval(-self.grace)
        let families = try await self.store.client.call(StoreMethods.listFamilies, Empty()).families
        for family in families {
            let stale: [Record]
            do {
                stale = try await self.store.all(family.family, zone: PairingStore.zone, type: RecordTypes.pairingInvitation,
                                                 filters: [QueryFilter(PairingInvitation.Field.expiresAt, .less, .date(cutoff))])
            } catch let error as RPCError where error.code == .notFound {
                continue  // a family made through the store alone has no pairing zone
            }
            guard !stale.isEmpty else { continue }
            try await self.store.delete(family.family, zone: PairingStore.zone, stale.map(\.recordName))
            self.logger.info("invitations purged", metadata: ["family": "\(family.family)", "count": "\(stale.count)"])
        }
    }
}
