import Foundation
import Logging
import RPCClient
import ServiceKit
import ServiceLifecycle

/// How the push service runs: what its options say.
public struct PushConfiguration: Sendable {
    /// The record store's socket.
    public var storeSocket: String
    /// Notifications a listener may fall behind before it is cut off.
    public var listenerBuffer: Int
    /// Bytes of notifications a listener may fall behind before it is cut off.
    public var listenerBufferBytes: Int
    /// Bytes of notifications the listeners of one connection may fall behind together.
    public var connectionBufferBytes: Int
    /// `push.listen` streams one device may hold at once.
    public var maximumListenersPerDevice: Int
    /// `push.listen` streams one connection may carry at once.
    public var maximumListenersPerConnection: Int
    public var maximumSubscriptions: Int
    public var defaultTTL: Duration
    /// How long a family's credentials and shares are trusted before they are read again.
    public var accessRefresh: Duration
    /// Between drops of expired notifications and checks of listeners' credentials.
    public var maintenanceInterval: Duration
    /// How long a change's "fetch changes" hint (zone and family subscriptions') is held, so that a burst of
    /// changes arrives as one (see `Deferred`); zero: not held.
    public var collapseWindow: Duration
    /// Webhook delivery; nil: off.
    public var webhooks: WebhookDelivery?
    /// Wakes through a wake relay; nil: off.
    public var wakes: WakeDelivery?
    /// The service's version, as its User-Agent says.
    public var version: String

    public struct WebhookDelivery: Sendable {
        public var timeout: Duration
        public var attempts: Int
        public var firstRetry: Duration

        public init(timeout: Duration, attempts: Int, firstRetry: Duration) {
            self.timeout = timeout
            self.attempts = attempts
            self.firstRetry = firstRetry
        }
    }

    public struct WakeDelivery: Sendable {
        /// The relay's base URL (`https://relay.example.org`).
        public var relay: String
        /// A CA to trust for the relay (a private one); nil: the system's.
        public var relayCAFile: String?
        /// The gateway's private key (PEM, P-256): wakes are signed with it.
        public var signingKeyFile: String
        /// How long a listening device has to acknowledge before it is woken anyway.
        public var ackWait: Duration
        /// Background wakes per device in any hour.
        public var perHour: Int
        /// Tries of one wake before it is left to the device's next connection.
        public var attempts: Int

        public init(relay: String, relayCAFile: String? = nil, signingKeyFile: String, ackWait: Duration = .seconds(5), perHour: Int = 3, attempts: Int = 6) {
            self.relay = relay
            self.relayCAFile = relayCAFile
            self.signingKeyFile = signingKeyFile
            self.ackWait = ackWait
            self.perHour = perHour
            self.attempts = attempts
        }
    }

    public init(storeSocket: String, listenerBuffer: Int = 1024, listenerBufferBytes: Int = 512 * 1024, connectionBufferBytes: Int = 4 << 20,
                maximumListenersPerDevice: Int = 4, maximumListenersPerConnection: Int = 64, maximumSubscriptions: Int = 100, defaultTTL: Duration = .seconds(7 * 86_400),
                accessRefresh: Duration = .seconds(30), maintenanceInterval: Duration = .seconds(60), collapseWindow: Duration = .milliseconds(250),
                webhooks: WebhookDelivery? = nil, wakes: WakeDelivery? = nil, version: String) {
        self.storeSocket = storeSocket
        self.listenerBuffer = listenerBuffer
        self.listenerBufferBytes = listenerBufferBytes
        self.connectionBufferBytes = connectionBufferBytes
        self.maximumListenersPerDevice = maximumListenersPerDevice
        self.maximumListenersPerConnection = maximumListenersPerConnection
        self.maximumSubscriptions = maximumSubscriptions
        self.defaultTTL = defaultTTL
        self.accessRefresh = accessRefresh
        self.maintenanceInterval = maintenanceInterval
        self.collapseWindow = collapseWindow
        self.webhooks = webhooks
        self.wakes = wakes
        self.version = version
    }
}

extension ServiceSetup {
    /// The push service: opens its database, and returns its methods and the store follower,
    /// maintenance and webhook sender that run beside them.
    public static func push(_ configuration: PushConfiguration, environment: ServiceEnvironment) async throws -> ServiceSetup {
        let logger = environment.logger
        let store = RPCClient(configuration: ClientConfiguration(socketPath: configuration.storeSocket, callTimeout: .seconds(30), connectTimeout: .seconds(10)))
        let settings = Push.Settings(maximumSubscriptions: configuration.maximumSubscriptions, defaultTTL: configuration.defaultTTL)
        let access = AccessCache(store: store, lifetime: configuration.accessRefresh)
        let hub = Hub(limits: Hub.Limits(
            notifications: configuration.listenerBuffer, bytes: configuration.listenerBufferBytes,
            connectionBytes: configuration.connectionBufferBytes,
            perDevice: configuration.maximumListenersPerDevice, perConnection: configuration.maximumListenersPerConnection))

        try FileManager.default.createDirectory(atPath: environment.paths.stateDirectory, withIntermediateDirectories: true)
        let database = try PushDatabase(path: environment.paths.stateDirectory + "/" + PushDatabase.fileName, logger: logger)
        let registry = SubscriptionRegistry(try await database.allSubscriptions())
        let webhooks = configuration.webhooks == nil ? nil : Dispatch.Webhooks(registry: DeviceRegistry(try await database.activeWebhooks()), wakeup: Wakeup())
        var wakes: Dispatch.Wakes?
        if let delivery = configuration.wakes {
            wakes = Dispatch.Wakes(registry: DeviceRegistry(try await database.activeWakes()), wakeup: Wakeup(), ackWait: delivery.ackWait)
        }
        let dispatch = Dispatch(database: database, hub: hub, webhooks: webhooks, wakes: wakes, collapseWindow: configuration.collapseWindow, held: Wakeup())
        let position = try await database.position()
        logger.info("database open", metadata: [
            "path": "\(database.path)", "subscriptions": "\(registry.count)", "position": "\(position)",
            "store_socket": "\(configuration.storeSocket)", "webhooks": "\(webhooks == nil ? "off" : "on")",
            "wake_relay": "\(configuration.wakes?.relay ?? "off")",
        ])

        let fanout = Fanout(registry: registry, access: access, store: StoreReader(client: store), defaultTTL: settings.defaultTTL)
        let follower = Follower(store: store, database: database, fanout: fanout, dispatch: dispatch, registry: registry, hub: hub,
                                access: access, logger: logger)
        var background: [any Service] = [
            follower,
            Deferred(database: database, dispatch: dispatch, wakeup: dispatch.held, logger: logger),
            Periodic(every: configuration.maintenanceInterval, Maintenance(database: database, follower: follower, access: access, logger: logger).run),
        ]
        if let webhooks, let delivery = configuration.webhooks {
            background.append(WebhookSender(
                database: database, registry: webhooks.registry, wakeup: webhooks.wakeup,
                settings: WebhookSender.Settings(timeout: delivery.timeout, attempts: delivery.attempts, firstRetry: delivery.firstRetry,
                                                 userAgent: "screentime-pushd/\(configuration.version)"),
                logger: logger))
        }
        if let wakes, let delivery = configuration.wakes {
            background.append(WakeSender(
                database: database, registry: wakes.registry, wakeup: wakes.wakeup,
                client: RelayClient(http: RelayClient.makeHTTPClient(trusting: delivery.relayCAFile), relay: delivery.relay,
                                    signingKey: RelayClient.SigningKey(path: delivery.signingKeyFile), userAgent: "screentime-pushd/\(configuration.version)"),
                settings: WakeSender.Settings(perHour: delivery.perHour, attempts: delivery.attempts), logger: logger))
        }
        let methods = PushHandlers.table(Push(
            store: store, database: database, registry: registry, access: access, hub: hub, dispatch: dispatch, settings: settings,
            wakeRelay: configuration.wakes?.relay,
            schema: SchemaCache(), logger: logger))
        return ServiceSetup(methods: methods, background: background) {
            // A clean stop gives back the numbers reserved and not used: no gap after a restart.
            // Not fatal if it cannot: the next start then skips them, as after a crash.
            try? database.releaseReservations()
        }
    }
}
