import RPCCore
import RPCServer
import StoreAPI

/// Binds each `store.*` method to the store.
enum StoreHandlers {
    static func table(_ store: RecordStore) -> MethodTable {
        var methods = MethodTable(implementing: StoreMethods.list)
        // The fetches of one read from a socket (32 pipelined, say) share one snapshot.
        let readers = store.loopReaders
        methods.aroundRead = { serve in readers.batch(serve) }
        methods.on(StoreMethods.createFamily) { params, context in try await store.createFamily(params, auth: context.auth) }
        methods.on(StoreMethods.listFamilies) { _, context in try await store.listFamilies(auth: context.auth) }
        methods.on(StoreMethods.createZone) { params, context in try await store.createZone(params, auth: context.auth) }
        methods.on(StoreMethods.deleteZone) { params, context in try await store.deleteZone(params, auth: context.auth) }
        methods.on(StoreMethods.listZones) { params, context in try await store.listZones(params, auth: context.auth) }
        methods.on(StoreMethods.modify) { params, context in
            let result = try await store.modify(params, auth: context.auth)
            store.metrics.modified(result)
            context.debug("modify", metadata: [
                "family": "\(params.family)", "zone": "\(params.zone)", "saves": "\(result.saved.count)",
                "deletes": "\(result.deleted.count)", "replayed": "\(result.replayed)",
            ])
            return result
        }
        methods.on(StoreMethods.fetch, immediatelyWritten: { params, context in try store.fetchOnLoop(params, auth: context.auth) },
                   otherwise: { params, context in try await store.fetch(params, auth: context.auth) })
        methods.on(StoreMethods.query) { params, context in try await store.query(params, auth: context.auth) }
        methods.on(StoreMethods.zoneChanges) { params, context in try await store.zoneChanges(params, auth: context.auth) }
        methods.on(StoreMethods.databaseChanges) { params, context in try await store.databaseChanges(params, auth: context.auth) }
        methods.on(StoreMethods.watch) { params, stream, context in
            context.logger.info("watch started", metadata: ["after": "\(params.after ?? 0)", "follow": "\(params.follow ?? true)"])
            return try await store.watch(params, auth: context.auth) { event in try await stream.yield(event) }
        }
        methods.on(StoreMethods.share) { params, context in
            let info = try await store.share(params, auth: context.auth)
            context.logger.notice("zone shared", metadata: [
                "family": "\(params.family)", "zone": "\(params.zone)", "devices": "\(params.participants.map(\.deviceId))",
            ])
            return info
        }
        methods.on(StoreMethods.unshare) { params, context in
            let info = try await store.unshare(params, auth: context.auth)
            context.logger.notice("zone unshared", metadata: [
                "family": "\(params.family)", "zone": "\(params.zone)", "devices": "\(params.deviceIds.map { "\($0)" } ?? "all")",
            ])
            return info
        }
        methods.on(StoreMethods.shareInfo) { params, context in try await store.shareInfo(params, auth: context.auth) }
        methods.on(StoreMethods.putCredential) { params, context in
            let info = try await store.putCredential(params, auth: context.auth)
            context.logger.notice("credential recorded", metadata: [
                "family": "\(params.family)", "device_id": "\(params.deviceId)", "role": "\(params.role.rawValue)",
                "status": "\(info.status.rawValue)",
            ])
            return info
        }
        methods.on(StoreMethods.updateCredential) { params, context in
            let info = try await store.updateCredential(params, auth: context.auth)
            context.logger.notice("credential updated", metadata: [
                "family": "\(params.family)", "device_id": "\(params.deviceId)", "status": "\(params.status.rawValue)",
            ])
            return info
        }
        methods.on(StoreMethods.listCredentials) { params, context in try await store.listCredentials(params, auth: context.auth) }
        methods.on(StoreMethods.credentialSnapshot) { _, context in try await store.credentialSnapshot(auth: context.auth) }
        methods.on(StoreMethods.whoami, immediately: { _, context in try store.whoamiOnLoop(auth: context.auth) },
                   otherwise: { _, context in try await store.whoami(auth: context.auth) })
        methods.on(StoreMethods.schema) { _, _ in store.schemaInfo }
        methods.on(StoreMethods.backup) { params, context in try await store.backup(params, auth: context.auth) }
        methods.on(StoreMethods.purge) { params, context in try await store.purge(params, auth: context.auth) }
        methods.on(StoreMethods.stats) { _, context in try await store.stats(auth: context.auth) }
        return methods
    }
}
