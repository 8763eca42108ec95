import PushAPI
import RPCCore
import RPCServer
import StoreAPI

/// Binds each `push.*` method to its implementation.
enum PushHandlers {
    static func table(_ push: Push, backup: @escaping @Sendable (BackupParams, Auth?) async throws -> BackupResult) -> MethodTable {
        var methods = MethodTable(implementing: PushMethods.list)
        methods.on(PushMethods.subscribe) { params, context in try await push.subscribe(params, auth: context.auth) }
        methods.on(PushMethods.unsubscribe) { params, context in try await push.unsubscribe(params, auth: context.auth) }
        methods.on(PushMethods.listSubscriptions) { params, context in try await push.listSubscriptions(params, auth: context.auth) }
        methods.on(PushMethods.listening) { params, context in try await push.listening(params, auth: context.auth) }
        methods.on(PushMethods.listen) { params, stream, context in
            try await push.listen(params, auth: context.auth, connection: context.connectionID, sink: stream.sink) { notification in try await stream.yield(encoded: notification) }
        }
        methods.on(PushMethods.ack) { params, context in try await push.ack(params, auth: context.auth) }
        methods.on(PushMethods.notify) { params, context in try await push.notify(params, auth: context.auth) }
        methods.on(PushMethods.setWebhook) { params, context in try await push.setWebhook(params, auth: context.auth) }
        methods.on(PushMethods.getWebhook) { _, context in try await push.getWebhook(auth: context.auth) }
        methods.on(PushMethods.removeWebhook) { _, context in try await push.removeWebhook(auth: context.auth) }
        methods.on(PushMethods.registerWake) { params, context in try await push.registerWake(params, auth: context.auth) }
        methods.on(PushMethods.getWake) { _, context in try await push.getWake(auth: context.auth) }
        methods.on(PushMethods.removeWake) { _, context in try await push.removeWake(auth: context.auth) }
        methods.on(PushMethods.listWakes) { params, context in try await push.listWakes(params, auth: context.auth) }
        methods.on(PushMethods.backup) { params, context in try await backup(params, context.auth) }
        return methods
    }
}
