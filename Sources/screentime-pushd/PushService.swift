import ArgumentParser
import Foundation
import Logging
import RPCClient
import ServiceKit
import ServiceLifecycle
import Synchronization

@main
struct PushService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screentime-pushd",
        abstract: "The ScreenTime Rewards push service: subscriptions to record changes, live notification streams, durable per-device queues.",
        discussion: """
            Serves the push.* methods on <runtime-dir>/push.sock (or the socket systemd passes). \
            Follows the record store's change log (<runtime-dir>/store.sock) from where it stopped; \
            subscriptions, queues and that position are in <state-dir>/push.sqlite. See docs/protocol.md.
            """,
        version: pushVersion
    )

    @OptionGroup var options: ServiceOptions

    @Option(name: .customLong("store-socket"), help: ArgumentHelp("The record store's socket.", discussion: "Default: <runtime-dir>/store.sock.", valueName: "path"))
    var storeSocket: String?

    @Option(name: .customLong("listener-buffer"), help: ArgumentHelp("Notifications a listener may fall behind before it is cut off (it then resumes from its queue).", valueName: "count"))
    var listenerBuffer: Int = 1024

    @Option(name: .customLong("max-subscriptions"), help: ArgumentHelp("Subscriptions per device.", valueName: "count"))
    var maximumSubscriptions: Int = 100

    @Option(name: .customLong("default-ttl"), help: ArgumentHelp("Seconds an undelivered notification stays queued, unless it says otherwise.", valueName: "seconds"))
    var defaultTTLSeconds: Double = 7 * 86_400

    @Option(name: .customLong("access-refresh"), help: ArgumentHelp("Seconds a family's credentials and shares are trusted before they are read again from the store.", valueName: "seconds"))
    var accessRefreshSeconds: Double = 30

    @Option(name: .customLong("maintenance-interval"), help: ArgumentHelp("Seconds between drops of expired notifications and checks of listeners' credentials.", valueName: "seconds"))
    var maintenanceSeconds: Double = 60

    @Flag(help: ArgumentHelp("Post notifications to devices' HTTP endpoints (UnifiedPush, ntfy) when they are not listening.", discussion: "Off by default: the service then needs no network. Devices set their endpoint with push.setWebhook."))
    var webhooks = false

    @Option(name: .customLong("webhook-timeout"), help: ArgumentHelp("Seconds an endpoint has to answer a post.", valueName: "seconds"))
    var webhookTimeoutSeconds: Double = 10

    @Option(name: .customLong("webhook-attempts"), help: ArgumentHelp("Posts of one notification before it is left to the device's next listen.", valueName: "count"))
    var webhookAttempts: Int = 8

    @Option(name: .customLong("webhook-retry"), help: ArgumentHelp("Seconds before the first retry; each next one waits twice as long, up to 15 minutes.", valueName: "seconds"))
    var webhookRetrySeconds: Double = 5

    mutating func validate() throws {
        guard (16...1_000_000).contains(self.listenerBuffer) else { throw ValidationError("--listener-buffer must be between 16 and 1000000") }
        guard (1...10_000).contains(self.maximumSubscriptions) else { throw ValidationError("--max-subscriptions must be between 1 and 10000") }
        guard (1...30 * 86_400).contains(self.defaultTTLSeconds) else { throw ValidationError("--default-ttl must be between 1 second and 30 days") }
        guard (0.1...3600).contains(self.accessRefreshSeconds) else { throw ValidationError("--access-refresh must be between 0.1 and 3600 seconds") }
        guard (0.1...86_400).contains(self.maintenanceSeconds) else { throw ValidationError("--maintenance-interval must be between 0.1 and 86400 seconds") }
        guard (0.5...120).contains(self.webhookTimeoutSeconds) else { throw ValidationError("--webhook-timeout must be between 0.5 and 120 seconds") }
        guard (1...100).contains(self.webhookAttempts) else { throw ValidationError("--webhook-attempts must be between 1 and 100") }
        guard (0.01...3600).contains(self.webhookRetrySeconds) else { throw ValidationError("--webhook-retry must be between 0.01 and 3600 seconds") }
    }

    func run() async throws {
        let store = RPCClient(configuration: ClientConfiguration(
            socketPath: self.storeSocket ?? ServicePaths(options: self.options).runtimeDirectory + "/store.sock",
            callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        let settings = Push.Settings(maximumSubscriptions: self.maximumSubscriptions, defaultTTL: .milliseconds(Int64(self.defaultTTLSeconds * 1000)))
        let access = AccessCache(store: store, lifetime: .milliseconds(Int64(self.accessRefreshSeconds * 1000)))
        let hub = Hub(capacity: self.listenerBuffer)
        let maintenance = Duration.milliseconds(Int64(self.maintenanceSeconds * 1000))
        let webhookSettings = WebhookSender.Settings(
            timeout: .milliseconds(Int64(self.webhookTimeoutSeconds * 1000)), attempts: self.webhookAttempts,
            firstRetry: .milliseconds(Int64(self.webhookRetrySeconds * 1000)))
        let webhooksOn = self.webhooks
        let opened = Mutex<(PushDatabase, SubscriptionRegistry, Dispatch)?>(nil)
        try await ServiceMain.run(
            service: "push", identifier: "screentime-pushd", version: pushVersion, options: self.options,
            background: { environment in
                guard let (database, registry, dispatch) = opened.withLock({ $0 }) else { return [] }
                let fanout = Fanout(registry: registry, access: access, store: StoreReader(client: store), defaultTTL: settings.defaultTTL)
                let follower = Follower(store: store, database: database, fanout: fanout, dispatch: dispatch, registry: registry, hub: hub,
                                        access: access, logger: environment.logger)
                var services: [any Service] = [
                    follower, Periodic(every: maintenance, Maintenance(database: database, follower: follower, access: access, logger: environment.logger).run),
                ]
                if let webhooks = dispatch.webhooks {
                    services.append(WebhookSender(database: database, registry: webhooks.registry, wakeup: webhooks.wakeup,
                                                  settings: webhookSettings, logger: environment.logger))
                }
                return services
            },
            methods: { environment in
                try FileManager.default.createDirectory(atPath: environment.paths.stateDirectory, withIntermediateDirectories: true)
                let database = try PushDatabase(path: environment.paths.stateDirectory + "/" + PushDatabase.fileName, logger: environment.logger)
                let registry = SubscriptionRegistry(try database.allSubscriptions())
                let webhooks = webhooksOn ? Dispatch.Webhooks(registry: WebhookRegistry(try database.activeWebhooks()), wakeup: Wakeup()) : nil
                let dispatch = Dispatch(database: database, hub: hub, webhooks: webhooks)
                opened.withLock { $0 = (database, registry, dispatch) }
                let position = try database.position()
                environment.logger.info("database open", metadata: [
                    "path": "\(database.path)", "subscriptions": "\(registry.count)", "position": "\(position)",
                    "store_socket": "\(store.configuration.socketPath)", "webhooks": "\(webhooksOn ? "on" : "off")",
                ])
                return PushHandlers.table(Push(
                    store: store, database: database, registry: registry, access: access, hub: hub, dispatch: dispatch, settings: settings,
                    schema: SchemaCache(), logger: environment.logger))
            }
        )
        // A clean stop gives back the numbers reserved and not used: no gap after a restart.
        // Not fatal if it cannot: the next start then skips them, as after a crash.
        try? opened.withLock { $0?.0 }?.releaseReservations()
    }
}

let pushVersion = "0.6.0"
