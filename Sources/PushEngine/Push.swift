import ChangeFeed
import Foundation
import Logging
import PushAPI
import RPCClient
import RPCCore
import RPCServer
import RelayCore
import StoreAPI
import Synchronization

/// The `push.*` methods.
struct Push: Sendable {
    struct Settings: Sendable {
        var maximumSubscriptions: Int
        var defaultTTL: Duration
    }

    let store: RPCClient
    /// Who a device is: kept from the store's change feed.
    let credentials: CredentialTable
    let database: PushDatabase
    let registry: SubscriptionRegistry
    let access: AccessCache
    let hub: Hub
    let dispatch: Dispatch
    let settings: Settings
    /// How wakes are sent; nil: wakes are off.
    let wakeMode: WakeMode?

    enum WakeMode: Sendable {
        /// Through the relay at this base URL.
        case relay(String)
        /// Straight to APNs, for these app topics.
        case direct(topics: Set<String>)
    }
    let schema: SchemaCache
    var metrics = PushMetrics.none
    let logger: Logger

    // MARK: Subscriptions

    func subscribe(_ params: SubscribeParams, auth: Auth?) async throws -> Subscription {
        let device = try await self.device(auth)
        let subscription = try await self.validate(params, device: device)
        // A fresh look at the shares: a subscription is refused if it asks for more than
        // the device may read now. The fan-out learns of the device at once.
        self.access.learn(family: device.family, deviceId: device.deviceId, device.standing)
        switch subscription.kind {
        case .family where device.role == .child:
            throw RPCError(.forbidden, "a child device reads only the zones shared with it: subscribe to those zones instead of the whole family")
        case .zone, .query:
            guard let zone = subscription.zone else { break }
            let (readable, exists) = try await self.access.freshZoneAccess(device, zone: zone)
            guard readable else {
                throw RPCError(.forbidden, "this device may not read zone \(zone), so it cannot subscribe to it", data: ["zone": .string(zone)])
            }
            guard exists else {
                throw RPCError(.notFound, "family \(device.family) has no zone \(zone)", data: ["zone": .string(zone)])
            }
        default:
            break
        }
        try await self.database.save(subscription, limit: self.settings.maximumSubscriptions)
        self.registry.put(subscription)
        self.logger.info("subscribed", metadata: [
            "family": "\(device.family)", "device_id": "\(device.deviceId)", "subscription_id": "\(subscription.subscriptionId)",
            "kind": "\(subscription.kind.rawValue)",
        ])
        return subscription
    }

    func unsubscribe(_ params: SubscriptionParams, auth: Auth?) async throws -> UnsubscribeResult {
        let device = try await self.device(auth)
        guard try await self.database.removeSubscription(family: device.family, deviceId: device.deviceId, id: params.subscriptionId) else {
            throw RPCError(.notFound, "this device has no subscription \(params.subscriptionId)", data: ["subscriptionId": .string(params.subscriptionId)])
        }
        self.registry.remove([.init(family: device.family, deviceId: device.deviceId, id: params.subscriptionId)])
        return UnsubscribeResult(subscriptionId: params.subscriptionId)
    }

    func listSubscriptions(_ params: ListSubscriptionsParams, auth: Auth?) async throws -> ListSubscriptionsResult {
        guard auth != nil else {
            guard let family = params.family else {
                throw RPCError.invalidParams("params.family", "is required for a local service: whose subscriptions?")
            }
            return ListSubscriptionsResult(subscriptions: self.registry.listing(family))
        }
        let device = try await self.device(auth)
        return ListSubscriptionsResult(subscriptions: self.registry.listing(device.family, deviceId: device.deviceId))
    }

    /// The family's devices listening now: the dashboard's and `screentimectl devices`'
    /// "connected now" (an app with its connection open listens).
    func listening(_ params: ListeningParams, auth: Auth?) async throws -> ListeningResult {
        let family = try await self.familyShown(params.family, auth: auth, what: "which devices are connected")
        return ListeningResult(deviceIds: self.hub.listeningDevices(family: family))
    }

    /// The family a family-wide view is for: a local service names any; a parent's device
    /// gets its own (naming another is `forbidden`); a child's device none.
    private func familyShown(_ named: String?, auth: Auth?, what: String) async throws -> String {
        guard auth != nil else {
            guard let family = named else {
                throw RPCError.invalidParams("params.family", "is required for a local service: which family?")
            }
            try Check.identifier("params.family", family)
            return family
        }
        let device = try await self.device(auth)
        if device.role == .child {
            throw RPCError(.forbidden, "only a parent may see \(what); device \(device.deviceId) is a child device")
        }
        if let family = named, family != device.family {
            throw RPCError(.forbidden, "device \(device.deviceId) does not belong to family \(family)")
        }
        return device.family
    }

    // MARK: Delivery

    /// `send` writes one item and waits while the peer is slow; `sink` writes live items
    /// straight from the connection's event loop (nil for a one-way request).
    func listen(_ params: ListenParams, auth: Auth?, connection: UInt64, sink: StreamSink?, send: @Sendable (EncodedJSON) async throws -> Void) async throws -> ListenEnd {
        let device = try await self.device(auth)
        if let after = params.after, after < 0 { throw RPCError.invalidParams("params.after", "must not be negative") }
        let key = Hub.DeviceKey(family: device.family, deviceId: device.deviceId)
        // Listen first, then read the backlog: nothing queued in between is missed.
        let (listener, inFlight, unregister) = try self.hub.register(key, connection: connection)
        defer { unregister() }
        self.logger.debug("listening", metadata: ["family": "\(device.family)", "device_id": "\(device.deviceId)"])
        var last = max(params.after ?? 0, try await self.database.acked(family: device.family, deviceId: device.deviceId))
        while true {
            let page = try await self.database.pending(family: device.family, deviceId: device.deviceId, after: last, limit: 500, now: Date())
            for notification in page {
                try await send(notification.json)
                self.metrics.delivered.increment()
                last = notification.seq
            }
            if page.count < 500 { break }
        }
        // Delivered before this listener registered and not committed when the queue was
        // read: numbers are committed in order, so these follow the backlog.
        for notification in inFlight where notification.seq > last && notification.expiresAt > Date() {
            try await send(notification.json)
            self.metrics.delivered.increment()
            last = notification.seq
        }
        // One-way (nobody listens), or the backlog was all that was asked for.
        guard let sink, params.backlogOnly != true else { return ListenEnd(lastSeq: last) }
        // Live: what arrived meanwhile, then each new notification, written by the hub.
        await listener.goDirect(sink, after: last)
        let (ending, lastWritten) = await listener.waitForEnd()
        last = max(last, lastWritten)
        switch ending {
        case .fellBehind:
            let limits = self.hub.limits
            throw RPCError(.limitExceeded, "this listener fell behind (over \(limits.notifications) notifications or \(limits.bytes) bytes waited for its socket: --listener-buffer, --listener-buffer-bytes) and was cut off; listen again to resume after your last acknowledgement",
                           data: ["lastSeq": .int(last)])
        case .connectionFellBehind:
            throw RPCError(.limitExceeded, "the streams of this listener's connection fell behind together (over \(self.hub.limits.connectionBytes) bytes waited for its socket: --connection-buffer-bytes) and this one was cut off; read faster, or listen again to resume after your last acknowledgement",
                           data: ["lastSeq": .int(last)])
        case .revoked:
            throw RPCError.deviceRevoked(device.deviceId)
        case .shutdown:
            // As every stream of a stopping service ends: the device tells a stop from a
            // normal end, reconnects and listens again.
            throw RPCError(.unavailable, "the push service is stopping; listen again to resume after your last acknowledgement",
                           data: ["lastSeq": .int(last)])
        case nil:
            // Cancelled (rpc.cancel, the peer gone, a stop): the runtime replies as it does
            // for any cancelled request.
            throw CancellationError()
        }
    }

    func ack(_ params: AckParams, auth: Auth?) async throws -> AckResult {
        let device = try await self.device(auth)
        guard params.upTo >= 0 else { throw RPCError.invalidParams("params.upTo", "must not be negative") }
        let result = try await self.database.ack(family: device.family, deviceId: device.deviceId, upTo: params.upTo)
        self.metrics.acks.increment()
        return result
    }

    func notify(_ params: NotifyParams, auth: Auth?) async throws -> NotifyResult {
        guard auth == nil else { throw RPCError(.forbidden, "push.notify is for local services only") }
        try Check.identifier("params.family", params.family)
        guard (params.deviceId != nil) != (params.parents == true) else {
            throw RPCError.invalidParams("params", "give exactly one of deviceId and parents: true")
        }
        guard params.alert != nil || params.data != nil else {
            throw RPCError.invalidParams("params", "a notification needs an alert, data, or both")
        }
        try Check.notification(alert: params.alert, collapseKey: params.collapseKey, ttlSeconds: params.ttlSeconds, path: "params")
        if let requestId = params.requestId {
            try Check.identifier("params.requestId", requestId)
            // Sent before: the first answer, and nothing queued again.
            if let answer = try await self.database.notifyAnswer(family: params.family, requestId: requestId) {
                self.logger.info("notification already sent", metadata: ["family": "\(params.family)", "request_id": "\(requestId)"])
                return answer
            }
        }
        let access = try await self.access.access(params.family)
        let targets: [String]
        if let deviceId = params.deviceId {
            try Check.identifier("params.deviceId", deviceId)
            guard access.credentials[deviceId].map({ $0.status != .revoked }) == true else {
                throw RPCError(.notFound, "family \(params.family) has no active device \(deviceId)", data: ["deviceId": .string(deviceId)])
            }
            targets = [deviceId]
        } else {
            targets = access.activeParents
        }
        let now = Date()
        let ttl = params.ttlSeconds.map { Duration.milliseconds(Int64($0 * 1000)) } ?? self.settings.defaultTTL
        let notification = PushNotification(
            seq: 0, family: params.family, reason: .message, alert: params.alert, fields: params.data, collapseKey: params.collapseKey,
            priority: params.priority ?? .normal, createdAt: now, expiresAt: now.addingTimeInterval(ttl.seconds))
        // The same notification for every target: one group, encoded once.
        let drafts = targets.map { PushDatabase.Draft(family: params.family, deviceId: $0, notification: notification, group: 1) }
        let request = params.requestId.map { PushDatabase.NotifyRequest(family: params.family, id: $0, at: now) }
        let queued = try await self.dispatch.queue(drafts, request: request)
        self.logger.info("notification sent", metadata: ["family": "\(params.family)", "devices": "\(queued.map(\.deviceId))"])
        return NotifyResult(queued: queued.map { QueuedNotification(deviceId: $0.deviceId, seq: $0.seq) })
    }

    // MARK: Webhooks

    func setWebhook(_ params: SetWebhookParams, auth: Auth?) async throws -> WebhookInfo {
        let device = try await self.device(auth)
        guard let webhooks = self.dispatch.webhooks else {
            throw RPCError(.unavailable, "outbound delivery is off on this server; its administrator turns it on with screentime-pushd --webhooks")
        }
        try Check.webhookURL("params.url", params.url)
        if let authorization = params.authorization {
            guard (1...1024).contains(authorization.utf8.count), authorization.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0.value != 0x7F }) else {
                throw RPCError.invalidParams("params.authorization", "must be 1 to 1024 printable ASCII characters (an HTTP header value such as Bearer tk_…)")
            }
        }
        let info = try await self.database.setWebhook(
            family: device.family, deviceId: device.deviceId,
            PushDatabase.Webhook(url: params.url, format: params.format, authorization: params.authorization), now: Date())
        webhooks.registry.insert(Hub.DeviceKey(family: device.family, deviceId: device.deviceId))
        self.logger.info("webhook set", metadata: [
            "family": "\(device.family)", "device_id": "\(device.deviceId)", "format": "\(params.format.rawValue)",
            "host": "\(URL(string: params.url)?.host ?? "")",
        ])
        return info
    }

    func getWebhook(auth: Auth?) async throws -> WebhookInfo {
        let device = try await self.device(auth)
        guard let info = try await self.database.webhook(family: device.family, deviceId: device.deviceId) else {
            throw RPCError(.notFound, "this device has no webhook; set one with push.setWebhook")
        }
        return info
    }

    func removeWebhook(auth: Auth?) async throws -> RemoveWebhookResult {
        let device = try await self.device(auth)
        let removed = try await self.database.removeWebhook(family: device.family, deviceId: device.deviceId)
        self.dispatch.webhooks?.registry.remove(Hub.DeviceKey(family: device.family, deviceId: device.deviceId))
        if removed { self.logger.info("webhook removed", metadata: ["family": "\(device.family)", "device_id": "\(device.deviceId)"]) }
        return RemoveWebhookResult(removed: removed)
    }

    // MARK: Wakes

    func registerWake(_ params: RegisterWakeParams, auth: Auth?) async throws -> WakeInfo {
        let device = try await self.device(auth)
        guard let mode = self.wakeMode, let wakes = self.dispatch.wakes else {
            throw RPCError(.unavailable, "wakes are off on this server; its administrator turns them on with screentime-pushd --wake-relay (or --apns-key-file)")
        }
        let handle: String, relay: String
        switch mode {
        case .relay(let url):
            guard let given = params.handle else {
                throw RPCError.invalidParams("params.handle", "is required: this server wakes devices through the relay \(url); seal the device's token there")
            }
            guard (1...1024).contains(given.utf8.count), given.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7F }) else {
                throw RPCError.invalidParams("params.handle", "must be the relay's handle: 1 to 1024 printable ASCII characters")
            }
            guard let sealedBy = params.relay, Self.sameRelay(sealedBy, url) else {
                throw RPCError(.invalidParams, "params.relay must be the relay this server sends wakes through, \(url): seal the device's token with that relay",
                               data: ["parameter": .string("params.relay"), "relay": .string(url)])
            }
            (handle, relay) = (given, url)
        case .direct(let topics):
            guard let token = params.token else {
                throw RPCError.invalidParams("params.token", "is required: this server sends to APNs itself; give the APNs device token, topic and environment")
            }
            guard WakeRegistration.isDeviceToken(token) else {
                throw RPCError.invalidParams("params.token", "must be the APNs device token in hex")
            }
            guard let topic = params.topic, topics.contains(topic) else {
                throw RPCError.invalidParams("params.topic", "must be an app this server's APNs key pushes to: \(topics.sorted().joined(separator: ", "))")
            }
            let environment = params.environment ?? .production
            (handle, relay) = (DirectAPNs.handle(WakeRegistration(token: token.lowercased(), topic: topic, environment: environment, pin: "")), DirectAPNs.marker)
        }
        let info = try await self.database.registerWake(family: device.family, deviceId: device.deviceId, handle: handle, relay: relay, now: Date())
        wakes.registry.insert(Hub.DeviceKey(family: device.family, deviceId: device.deviceId))
        self.logger.info("wake registered", metadata: ["family": "\(device.family)", "device_id": "\(device.deviceId)", "relay": "\(info.relayHost)"])
        return info
    }

    func getWake(auth: Auth?) async throws -> WakeInfo {
        let device = try await self.device(auth)
        guard let info = try await self.database.wakeInfo(family: device.family, deviceId: device.deviceId, now: Date()) else {
            throw RPCError(.notFound, "this device is not registered for wakes; register with push.registerWake")
        }
        return info
    }

    func removeWake(auth: Auth?) async throws -> RemoveWakeResult {
        let device = try await self.device(auth)
        let removed = try await self.database.removeWake(family: device.family, deviceId: device.deviceId)
        self.dispatch.wakes?.registry.remove(Hub.DeviceKey(family: device.family, deviceId: device.deviceId))
        if removed { self.logger.info("wake registration removed", metadata: ["family": "\(device.family)", "device_id": "\(device.deviceId)"]) }
        return RemoveWakeResult(removed: removed)
    }

    /// Devices revoked: their listeners end, and their wake registrations and webhooks go
    /// (a removed device is never woken or called again; pairing it again registers anew).
    func forget(revoked devices: [CredentialEntry]) async {
        guard !devices.isEmpty else { return }
        for device in devices {
            self.access.learn(family: device.family, deviceId: device.deviceId, FamilyAccess.Standing(role: device.role, status: .revoked))
            self.hub.cut(family: device.family) { $0 == device.deviceId }
        }
        do {
            let removed = try await self.database.removeRegistrations(of: devices.map { PushDatabase.DeviceKey(family: $0.family, deviceId: $0.deviceId) })
            for (device, wake, webhook) in removed where wake || webhook {
                let key = Hub.DeviceKey(family: device.family, deviceId: device.deviceId)
                if wake { self.dispatch.wakes?.registry.remove(key) }
                if webhook { self.dispatch.webhooks?.registry.remove(key) }
                self.logger.info("a revoked device's registrations removed", metadata: [
                    "family": "\(device.family)", "device_id": "\(device.deviceId)", "wake": "\(wake)", "webhook": "\(webhook)",
                ])
            }
        } catch {
            self.logger.error("cannot remove revoked devices' registrations", metadata: ["devices": "\(devices.count)", "error": "\(error)"])
        }
    }

    func listWakes(_ params: ListWakesParams, auth: Auth?) async throws -> ListWakesResult {
        let family = try await self.familyShown(params.family, auth: auth, what: "the devices' wake registrations")
        return ListWakesResult(wakes: try await self.database.wakeInfos(family: family, now: Date()))
    }

    /// Two spellings of one relay's base URL: the scheme and host in any case, a trailing
    /// slash or not.
    static func sameRelay(_ a: String, _ b: String) -> Bool {
        func normal(_ text: String) -> String? {
            guard var parts = URLComponents(string: text), let scheme = parts.scheme?.lowercased(), let host = parts.host?.lowercased() else { return nil }
            parts.scheme = scheme
            parts.host = host
            while parts.path.hasSuffix("/") { parts.path.removeLast() }
            return parts.string
        }
        guard let a = normal(a), let b = normal(b) else { return false }
        return a == b
    }

    // MARK: Callers

    struct Device: Sendable {
        var family: String
        var deviceId: String
        var role: DeviceRole
        var status: CredentialStatus

        var standing: FamilyAccess.Standing { FamilyAccess.Standing(role: self.role, status: self.status) }
    }

    /// The calling device, as the store knows it; `unauthorized` for a revoked or unknown one.
    private func device(_ auth: Auth?) async throws -> Device {
        guard let auth else { throw RPCError(.unauthorized, "this method acts for a device: send its credential as auth.token") }
        let who = try await self.credentials.whoami(auth)
        guard let family = who.family, let deviceId = who.deviceId, let role = who.role else {
            throw RPCError(.unauthorized, "this method acts for a device: send its credential as auth.token")
        }
        return Device(family: family, deviceId: deviceId, role: role, status: who.status ?? .active)
    }

    // MARK: Checks

    private func validate(_ params: SubscribeParams, device: Device) async throws -> Subscription {
        let id = params.subscriptionId ?? UUID().uuidString.lowercased()
        try Check.name("params.subscriptionId", id)
        var filters: [QueryFilter] = []
        var firesOn: [FireOn] = []
        switch params.kind {
        case .query:
            guard let type = params.recordType else { throw RPCError.invalidParams("params.recordType", "is required for a query subscription") }
            let info = try await self.schema.recordType(type, store: self.store)
            filters = params.filters ?? []
            guard filters.count <= 16 else { throw RPCError.invalidParams("params.filters", "at most 16 filters") }
            filters = try filters.enumerated().map { index, filter in try Check.filter(filter, of: info, path: "params.filters[\(index)]") }
            for (index, key) in (params.notification?.includeKeys ?? []).enumerated() where !info.fields.contains(where: { $0.name == key }) {
                throw RPCError.invalidParams("params.notification.includeKeys[\(index)]", "\(type) has no field \(key)")
            }
            firesOn = Array(Set(params.firesOn ?? FireOn.allCases)).sorted { $0.rawValue < $1.rawValue }
            guard !firesOn.isEmpty else { throw RPCError.invalidParams("params.firesOn", "must name at least one of create, update, delete") }
        case .zone:
            guard params.zone != nil else { throw RPCError.invalidParams("params.zone", "is required for a zone subscription") }
            try Check.onlyForQuery(params)
            firesOn = Subscription.firesOnEverything
        case .family:
            guard params.zone == nil else { throw RPCError.invalidParams("params.zone", "a family subscription covers every zone; leave zone out") }
            try Check.onlyForQuery(params)
            firesOn = Subscription.firesOnEverything
        }
        if let zone = params.zone { try Check.zone("params.zone", zone) }
        let spec = params.notification ?? NotificationSpec()
        try Check.notification(alert: spec.alert, collapseKey: spec.collapseKey, ttlSeconds: spec.ttlSeconds, path: "params.notification")
        return Subscription(
            subscriptionId: id, family: device.family, deviceId: device.deviceId, kind: params.kind, zone: params.zone,
            recordType: params.kind == .query ? params.recordType : nil, filters: filters, firesOn: firesOn,
            firesOnce: params.firesOnce ?? false, notification: spec, createdAt: Date())
    }
}

/// The store's record types, read once (they change only when the store is upgraded,
/// which restarts the services that follow it).
final class SchemaCache: Sendable {
    private let types = Mutex<[String: RecordTypeInfo]?>(nil)

    func recordType(_ name: String, store: RPCClient) async throws -> RecordTypeInfo {
        if self.types.withLock({ $0 }) == nil {
            let schema = try await store.call(StoreMethods.schema, Empty())
            self.types.withLock { $0 = Dictionary(schema.recordTypes.map { ($0.name, $0) }) { _, new in new } }
        }
        guard let info = self.types.withLock({ $0?[name] }) else {
            let known = self.types.withLock { $0?.keys.sorted() ?? [] }
            throw RPCError.invalidParams("params.recordType", "unknown record type \(name); the store has \(known.joined(separator: ", "))")
        }
        return info
    }
}

/// Parameter checks with errors naming the parameter.
enum Check {
    static func identifier(_ path: String, _ value: String) throws {
        guard StoreNames.isValidIdentifier(value) else { throw RPCError.invalidParams(path, "must be 1 to 255 bytes without control characters") }
    }

    /// Subscription ids follow the store's rule for zone names.
    static func name(_ path: String, _ value: String) throws {
        guard StoreNames.isValidZone(value) else { throw RPCError.invalidParams(path, "must be 1 to 255 letters, digits, '-', '_' or '.'") }
    }

    static func zone(_ path: String, _ value: String) throws {
        try self.name(path, value)
        guard !StoreNames.isInternalZone(value) else { throw RPCError(.forbidden, "\(value) is an internal zone of the services; nobody subscribes to it") }
    }

    /// An http(s) URL with a host, without credentials in it, at most 2048 bytes.
    static func webhookURL(_ path: String, _ value: String) throws {
        guard value.utf8.count <= 2048 else { throw RPCError.invalidParams(path, "must be at most 2048 bytes") }
        guard let components = URLComponents(string: value), let scheme = components.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = components.host, !host.isEmpty
        else { throw RPCError.invalidParams(path, "must be an http:// or https:// URL with a host, such as https://ntfy.sh/mytopic") }
        guard components.user == nil, components.password == nil else {
            throw RPCError.invalidParams(path, "must not carry a user name or password; put credentials in authorization")
        }
    }

    static func onlyForQuery(_ params: SubscribeParams) throws {
        if params.recordType != nil { throw RPCError.invalidParams("params.recordType", "only query subscriptions take a record type") }
        if params.filters != nil { throw RPCError.invalidParams("params.filters", "only query subscriptions take filters") }
        if params.firesOn != nil { throw RPCError.invalidParams("params.firesOn", "only query subscriptions take firesOn") }
        if params.notification?.includeKeys != nil {
            throw RPCError.invalidParams("params.notification.includeKeys", "only query subscriptions carry record fields")
        }
    }

    static func notification(alert: Alert?, collapseKey: String?, ttlSeconds: Double?, path: String) throws {
        if let alert, alert.title.isEmpty || alert.title.count > 200 || (alert.body?.count ?? 0) > 2000 {
            throw RPCError.invalidParams("\(path).alert", "needs a title of 1 to 200 characters and a body of at most 2000")
        }
        if let collapseKey, collapseKey.isEmpty || collapseKey.utf8.count > 128 {
            throw RPCError.invalidParams("\(path).collapseKey", "must be 1 to 128 bytes")
        }
        if let ttlSeconds, !(1...30 * 86_400).contains(ttlSeconds) {
            throw RPCError.invalidParams("\(path).ttlSeconds", "must be between 1 second and 30 days")
        }
    }

    /// Checks a filter against the record type; returns it with date values in the form
    /// records hold them (RFC 3339 with milliseconds), so that they compare as text.
    static func filter(_ filter: QueryFilter, of type: RecordTypeInfo, path: String) throws -> QueryFilter {
        guard let field = type.fields.first(where: { $0.name == filter.field }) else {
            throw RPCError.invalidParams("\(path).field", "\(type.name) has no field \(filter.field); it has \(type.fields.map(\.name).joined(separator: ", "))")
        }
        let isList = field.type.rawValue.hasSuffix("List")
        if isList != (filter.op == .contains) {
            throw RPCError.invalidParams("\(path).op", isList ? "\(field.name) is a list: filter it with contains" : "contains applies to list fields; \(field.name) is a \(field.type.rawValue)")
        }
        switch filter.op {
        case .in:
            guard case .array(let values) = filter.value, (1...100).contains(values.count) else {
                throw RPCError.invalidParams("\(path).value", "must be a list of 1 to 100 values for in")
            }
        case .beginsWith:
            guard case .string(let prefix) = filter.value, !prefix.isEmpty else {
                throw RPCError.invalidParams("\(path).value", "must be a non-empty string for beginsWith")
            }
        default:
            if filter.value == .null { throw RPCError.invalidParams("\(path).value", "is required") }
        }
        guard field.type == .date else { return filter }
        var normalized = filter
        normalized.value = try self.date(filter.value, path: "\(path).value")
        return normalized
    }

    private static func date(_ value: JSONValue, path: String) throws -> JSONValue {
        switch value {
        case .array(let values): return .array(try values.map { try self.date($0, path: path) })
        case .string(let text):
            guard let date = StoreDates.parse(text) else { throw RPCError.invalidParams(path, "must be an RFC 3339 date, such as 2026-11-22T08:00:00Z") }
            return .date(date)
        default: throw RPCError.invalidParams(path, "must be an RFC 3339 date, such as 2026-11-22T08:00:00Z")
        }
    }
}
