import Crypto
import Foundation
import PushAPI
import RelayCore
import RPCCore

/// Wakes: how a suspended iPhone app hears that something is waiting for it. The app gives
/// its APNs device token to the app publisher's wake relay, which seals it for this
/// device's home server (the server never sees the token); the server asks the relay to
/// wake the app when it is not listening; the woken app fetches what is pending.
extension Notifications {
    /// Registers this device for wakes (`registerForRemoteNotifications`'s token in
    /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`): asks `relay` to
    /// seal the token for the home server's key pin, waits for the handle the relay sends
    /// to the device in a silent push (the app hands its remote notifications to
    /// ``receiveRemoteNotification(_:)``; the relay never answers with the handle, so only
    /// the app that holds the token gets one), and gives the handle to the server. Call it
    /// on every launch: the token can change, and a registration the server dropped (the
    /// app reinstalled, the token unregistered) is made again. The relay is asked only when
    /// the token, relay or pin changed since the last time, when the handle is a week old,
    /// or when the server found the handle refused (the relay lost its sealing key).
    ///
    /// `relay` nil: the home server holds the family's own APNs key (an app the family
    /// builds with its own developer account) and is given the token itself.
    /// `handleTimeout`: how long to wait for the relay's push (`timeout` after it).
    @discardableResult
    public func enableWakes(apnsToken: Data, relay: URL?, topic: String? = nil, environment: APNsEnvironment = .production,
                            handleTimeout: Duration = .seconds(30)) async throws(RPCError) -> WakeInfo {
        let identity = try self.session.requireIdentity()
        guard let topic = topic ?? Bundle.main.bundleIdentifier else {
            throw RPCError.invalidParams("topic", "is required: the app's bundle id (there is no main bundle to read it from)")
        }
        let token = apnsToken.map { String(format: "%02x", $0) }.joined()
        guard let relay else {
            return try await self.session.call(PushMethods.registerWake, RegisterWakeParams(token: token, topic: topic, environment: environment))
        }
        guard let pin = identity.pin else {
            throw RPCError(.invalidParams, "wakes through a relay are for a device that reaches its server through the gateway: this one has no key pin")
        }
        let base = relay.absoluteString.hasSuffix("/") ? String(relay.absoluteString.dropLast()) : relay.absoluteString
        // What the handle was sealed for, without the token itself.
        let sealedFor = Data(SHA256.hash(data: Data("\(token)|\(topic)|\(environment.rawValue)|\(pin)|\(base)".utf8))).base64EncodedString()
        let handle: String
        let now = Date()
        // Kept as "<sealed for> <sealed at> <handle>".
        let cached = try self.store.value(Self.wakeHandleKey)?.split(separator: " ", maxSplits: 2).map(String.init)
        if let cached, cached.count == 3, cached[0] == sealedFor, let sealedAt = Double(cached[1]),
           now.timeIntervalSince1970 - sealedAt < Self.sealAgainAfter, try await !self.handleRefused() {
            handle = cached[2]
        } else {
            let request = SealRequest(token: token, topic: topic, environment: environment == .production ? .production : .development, pin: pin)
            let before = self.handles.received
            try await Self.seal(request, relay: base)
            guard let delivered = await self.handles.handle(after: before, within: handleTimeout) else {
                throw RPCError(.timeout, "the wake relay sent this device its handle by push, and none arrived within \(handleTimeout): "
                    + "the app must pass its remote notifications to receiveRemoteNotification(_:), and the device must be online")
            }
            handle = delivered
            try self.store.setValue("\(sealedFor) \(Int(now.timeIntervalSince1970)) \(handle)", for: Self.wakeHandleKey)
        }
        do {
            return try await self.session.call(PushMethods.registerWake, RegisterWakeParams(handle: handle, relay: base))
        } catch {
            // A handle the server cannot use is sealed again next time.
            if error.code == .invalidParams { try? self.store.setValue(nil, for: Self.wakeHandleKey) }
            throw error
        }
    }

    /// Hands the kit a remote notification the app received
    /// (`application(_:didReceiveRemoteNotification:fetchCompletionHandler:)`'s `userInfo`).
    /// True when it was the wake relay sending this device its handle: the kit took it
    /// (for ``enableWakes``) and the app has nothing more to do with it. False for anything
    /// else, a wake included (then call ``handleWake(within:_:)``).
    @discardableResult
    public func receiveRemoteNotification(_ userInfo: [AnyHashable: Any]) -> Bool {
        var payload: [String: Any] = [:]
        for (key, value) in userInfo { if let key = key as? String { payload[key] = value } }
        guard let handle = APNsPush.handle(inPayload: payload) else { return false }
        self.handles.post(handle)
        return true
    }

    /// Whether the server's last wake for this device was refused by the relay (a handle
    /// it cannot open any more): then the cached handle is no use.
    private func handleRefused() async throws(RPCError) -> Bool {
        do {
            let status = try await self.wakeStatus()
            return status.status == .gone && status.lastOutcome == .refused
        } catch where error.code == .notFound {
            return false
        }
    }

    /// Stops wakes for this device (the user turned notifications off, the device is
    /// handed on).
    public func disableWakes() async throws(RPCError) {
        _ = try await self.session.call(PushMethods.removeWake, Empty())
        try self.store.setValue(nil, for: Self.wakeHandleKey)
    }

    /// The device's wake registration, as the server sees it.
    public func wakeStatus() async throws(RPCError) -> WakeInfo {
        try await self.session.call(PushMethods.getWake, Empty())
    }

    /// The wake registrations of the family's devices and how their last wakes went (a
    /// parent's view).
    public func familyWakes() async throws(RPCError) -> [WakeInfo] {
        try await self.session.call(PushMethods.listWakes, ListWakesParams()).wakes
    }

    /// What an app woken by a wake does (`application(_:didReceiveRemoteNotification:)`,
    /// or a notification service extension): fetches the notifications waiting on the
    /// server, runs `handler` on each in order, acknowledges them, and returns how many,
    /// all within `limit` (iOS allows about 30 s). A handler that throws stops there;
    /// what it did not finish comes again.
    @discardableResult
    public func handleWake(within limit: Duration = .seconds(25), _ handler: @escaping @Sendable (PushNotification) async throws -> Void) async throws -> Int {
        try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask { try await self.fetchPending(handler) }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            guard let handled = first else {
                await self.acknowledge()
                throw RPCError(.timeout, "the notifications waiting on the server were not all fetched within \(limit); the rest come on the next wake or launch")
            }
            return handled
        }
    }

    private func fetchPending(_ handler: @Sendable (PushNotification) async throws -> Void) async throws -> Int {
        var handled = 0
        let stream = try self.session.stream(PushMethods.listen, ListenParams(after: try self.lastHandled, backlogOnly: true))
        for try await event in stream {
            guard case .item(let value) = event else { break }
            let notification = try WireValues.decode(PushNotification.self, from: value, what: "a notification")
            if notification.seq <= (try self.lastHandled) { continue }
            try await handler(notification)
            try self.markHandled(notification.seq)
            handled += 1
        }
        await self.acknowledge()
        return handled
    }

    static let wakeHandleKey = "wakes:handle"
    /// A handle is sealed again once it is a week old: relays' handles expire (30 days by
    /// default), and an app launched now and then keeps one well inside its lifetime.
    static let sealAgainAfter: TimeInterval = 7 * 86_400

    /// `POST <relay>/v1/seal`: the relay sends the handle for this token and pin to the
    /// token (202); nothing comes back here but whether it did.
    static func seal(_ request: SealRequest, relay: String) async throws(RPCError) {
        guard let url = URL(string: relay + "/v1/seal"), url.host != nil else { throw RPCError.invalidParams("relay", "must be the wake relay's URL") }
        let status: Int, data: Data
        do {
            (status, data) = try await RelayHTTP.post(url, body: try JSONEncoder().encode(request))
        } catch {
            throw RPCError(.unavailable, "the wake relay \(url.host ?? relay) could not be reached: \(error)")
        }
        if status == 202 { return }
        let refusal = try? JSONDecoder().decode(RelayErrorBody.self, from: data)
        let reason = refusal.map { "\($0.message) (\($0.error))" } ?? "HTTP \(status)"
        throw RPCError(status == 429 || status >= 500 ? .unavailable : .invalidParams, "the wake relay did not seal the token: \(reason)")
    }
}
