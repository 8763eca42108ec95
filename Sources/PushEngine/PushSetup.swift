import APNs
import ChangeFeed
import DurableSQLite
import Foundation
import Logging
import RelayCore
import RPCClient
import ServiceKit
import ServiceLifecycle
import StoreAPI

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
    /// While the credentials cannot be followed: how long a family's credentials and shares
    /// are trusted before they are read again.
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
        public enum Route: Sendable {
            /// Through the app publisher's relay (its base URL, a CA to trust for it or the
            /// system's), signed with the gateway's private key (PEM, P-256).
            case relay(url: String, caFile: String?, signingKeyFile: String)
            /// Straight to APNs with the family's own APNs key.
            case direct(DirectAPNsKey)
        }

        /// A family's own APNs key, for an app it builds with its own developer account.
        public struct DirectAPNsKey: Sendable {
            public var keyId: String
            public var teamId: String
            /// The `.p8` key's PEM.
            public var p8: String
            /// The app bundle ids it may push to.
            public var topics: Set<String>
            /// APNs's base URL instead of Apple's (a stand-in, in tests).
            public var apnsURL: String?
            public var apnsCAFile: String?

            public init(keyId: String, teamId: String, p8: String, topics: Set<String>, apnsURL: String? = nil, apnsCAFile: String? = nil) {
                self.keyId = keyId
                self.teamId = teamId
                self.p8 = p8
                self.topics = topics
                self.apnsURL = apnsURL
                self.apnsCAFile = apnsCAFile
            }
        }

        public var route: Route
        /// How long a listening device has to acknowledge before it is woken anyway.
        public var ackWait: Duration
        /// Background wakes per device in any hour.
        public var perHour: Int
        /// Tries of one wake before it is left to the device's next connection.
        public var attempts: Int

        public init(route: Route, ackWait: Duration = .seconds(5), perHour: Int = 3, attempts: Int = 6) {
            self.route = route
            self.ackWait = ackWait
            self.perHour = perHour
            self.attempts = attempts
        }

        public init(relay: String, relayCAFile: String? = nil, signingKeyFile: String, ackWait: Duration = .seconds(5), perHour: Int = 3, attempts: Int = 6) {
            self.init(route: .relay(url: relay, caFile: relayCAFile, signingKeyFile: signingKeyFile), ackWait: ackWait, perHour: perHour, attempts: attempts)
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
        // Who a device is, kept from the store's change feed: not a store.whoami per call.
        let credentials = CredentialTable(store: store, logger: logger)
        let access = AccessCache(store: store, credentials: credentials, lifetime: configuration.accessRefresh)
        let metrics = PushMetrics(environment.metrics)
        let hub = Hub(limits: Hub.Limits(
            notifications: configuration.listenerBuffer, bytes: configuration.listenerBufferBytes,
            connectionBytes: configuration.connectionBufferBytes,
            perDevice: configuration.maximumListenersPerDevice, perConnection: configuration.maximumListenersPerConnection), delivered: metrics.delivered)

        try FileManager.default.createDirectory(atPath: environment.paths.stateDirectory, withIntermediateDirectories: true)
        let database = try PushDatabase(path: environment.paths.stateDirectory + "/" + PushDatabase.fileName, logger: logger)
        let registry = SubscriptionRegistry(try await database.allSubscriptions())
        let webhooks = configuration.webhooks == nil ? nil : Dispatch.Webhooks(registry: DeviceRegistry(try await database.activeWebhooks()), wakeup: Wakeup())
        var wakes: Dispatch.Wakes?
        if let delivery = configuration.wakes {
            wakes = Dispatch.Wakes(registry: DeviceRegistry(try await database.activeWakes()), wakeup: Wakeup(), ackWait: delivery.ackWait)
        }
        PushMetrics.collect(hub: hub, database: database, into: environment.metrics)
        var dispatch = Dispatch(database: database, hub: hub, webhooks: webhooks, wakes: wakes, collapseWindow: configuration.collapseWindow, held: Wakeup())
        dispatch.metrics = metrics
        let position = try await database.position()
        logger.info("database open", metadata: [
            "path": "\(database.path)", "subscriptions": "\(registry.count)", "position": "\(position)",
            "store_socket": "\(configuration.storeSocket)", "webhooks": "\(webhooks == nil ? "off" : "on")",
            "wakes": "\(configuration.wakes.map { delivery in if case .relay(let url, _, _) = delivery.route { url } else { "direct to APNs" } } ?? "off")",
        ])

        let fanout = Fanout(registry: registry, access: access, store: StoreReader(client: store), defaultTTL: settings.defaultTTL)
        let follower = ChangeFollower(store: store, database: database, fanout: fanout, dispatch: dispatch, registry: registry, hub: hub,
                                access: access, metrics: metrics, logger: logger)
        var background: [any Service] = [
            credentials,
            follower,
            Deferred(database: database, dispatch: dispatch, wakeup: dispatch.held, logger: logger),
            Periodic(every: configuration.maintenanceInterval, Maintenance(database: database, follower: follower, access: access, logger: logger).run),
        ]
        if let webhooks, let delivery = configuration.webhooks {
            var sender = WebhookSender(
                database: database, registry: webhooks.registry, wakeup: webhooks.wakeup,
                settings: WebhookSender.Settings(timeout: delivery.timeout, attempts: delivery.attempts, firstRetry: delivery.firstRetry,
                                                 userAgent: "screentime-pushd/\(configuration.version)"),
                logger: logger)
            sender.metrics = metrics
            background.append(sender)
        }
        var wakeMode: Push.WakeMode?
        if let wakes, let delivery = configuration.wakes {
            let makeRoute: @Sendable () -> any WakeRoute
            let userAgent = "screentime-pushd/\(configuration.version)"
            switch delivery.route {
            case .relay(let url, let caFile, let signingKeyFile):
                makeRoute = {
                    RelayClient(http: RelayClient.makeHTTPClient(trusting: caFile), relay: url, signingKey: RelayClient.SigningKey(path: signingKeyFile),
                                userAgent: userAgent)
                }
                wakeMode = .relay(url)
            case .direct(let key):
                // Read now: a key that is not one stops the start with a sentence.
                let providerToken: ProviderToken
                do {
                    providerToken = try ProviderToken(keyId: key.keyId, teamId: key.teamId, p8: key.p8)
                } catch {
                    throw PushSetupError("the APNs key is not a P-256 PKCS#8 PEM (.p8) key: \(error)")
                }
                let apnsURL = key.apnsURL
                makeRoute = {
                    DirectAPNs(client: APNsClient(http: APNsClient.makeHTTPClient(trusting: key.apnsCAFile), providerToken: providerToken,
                                                  baseURL: { apnsURL ?? APNsPush.host($0) }, attempts: 3, logger: logger))
                }
                wakeMode = .direct(topics: key.topics)
            }
            var sender = WakeSender(
                database: database, registry: wakes.registry, wakeup: wakes.wakeup, makeRoute: makeRoute,
                settings: WakeSender.Settings(perHour: delivery.perHour, attempts: delivery.attempts), logger: logger)
            sender.metrics = metrics
            background.append(sender)
        }
        var made = Push(
            store: store, credentials: credentials, database: database, registry: registry, access: access, hub: hub, dispatch: dispatch, settings: settings,
            wakeMode: wakeMode,
            schema: SchemaCache(), logger: logger)
        made.metrics = metrics
        let push = made
        credentials.observe { changed in
            for device in changed where device.status != .revoked {
                access.learn(family: device.family, deviceId: device.deviceId, FamilyAccess.Standing(role: device.role, status: device.status))
            }
            await push.forget(revoked: changed.filter { $0.status == .revoked })
        }
        let stateDirectory = environment.paths.stateDirectory
        let methods = PushHandlers.table(push) { params, auth in
            let copy = try await OnlineBackup.take(params.path, remote: auth != nil, service: "push", stateDirectory: stateDirectory, pool: database.pool) {
                try StoreLogPosition.load($0)
            }
            logger.notice("backup written", metadata: ["path": "\(copy.path)", "bytes": "\(copy.bytes)", "last_seq": "\(copy.lastSeq)"])
            return BackupResult(path: copy.path, bytes: copy.bytes, lastSeq: copy.lastSeq, milliseconds: copy.milliseconds)
        }
        return ServiceSetup(methods: methods, background: background) {
            // A clean stop gives back the numbers reserved and not used: no gap after a restart.
            // Not fatal if it cannot: the next start then skips them, as after a crash.
            try? database.releaseReservations()
        }
    }
}

/// A configuration the push service cannot start with.
struct PushSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
