import Foundation
import Logging
import PushAPI
import RPCClient
import RPCCore
import StoreAPI

/// The device's subscriptions and notifications (`CKQuerySubscription`, and what
/// `didReceiveRemoteNotification` hands the app).
public struct Notifications: Sendable {
    let session: Session
    let store: LocalStore
    let backoff: Backoff
    let logger: Logger
    /// Handles the wake relay pushed to this device, on their way to ``enableWakes``.
    let handles = HandleMailbox()

    // MARK: Subscriptions

    /// Subscribes this device to changes of one record type (optionally filtered), in a zone
    /// or across the family. Idempotent with a `subscriptionId`.
    @discardableResult
    public func subscribe(to recordType: String, in zone: String? = nil, where filters: [QueryFilter] = [], firesOn: [FireOn]? = nil,
                          id: String? = nil, notification: NotificationSpec? = nil) async throws(RPCError) -> Subscription {
        try await self.session.call(PushMethods.subscribe, SubscribeParams(
            subscriptionId: id, kind: .query, zone: zone, recordType: recordType, filters: filters.isEmpty ? nil : filters,
            firesOn: firesOn, notification: notification))
    }

    /// Subscribes this device to every change in a zone (`CKRecordZoneSubscription`).
    @discardableResult
    public func subscribe(toZone zone: String, id: String? = nil) async throws(RPCError) -> Subscription {
        try await self.session.call(PushMethods.subscribe, SubscribeParams(subscriptionId: id, kind: .zone, zone: zone))
    }

    /// Any subscription, as `push.subscribe` takes it.
    @discardableResult
    public func subscribe(_ params: SubscribeParams) async throws(RPCError) -> Subscription {
        try await self.session.call(PushMethods.subscribe, params)
    }

    public func unsubscribe(_ subscriptionId: String) async throws(RPCError) {
        _ = try await self.session.call(PushMethods.unsubscribe, SubscriptionParams(subscriptionId: subscriptionId))
    }

    public func subscriptions() async throws(RPCError) -> [Subscription] {
        try await self.session.call(PushMethods.listSubscriptions, ListSubscriptionsParams()).subscriptions
    }

    // MARK: Delivery

    /// The device's notifications, for as long as the caller iterates: first those queued
    /// on the server and not yet handled, then live ones. It survives reconnects (listens
    /// again after the last one handled) and never yields one twice.
    ///
    /// A notification counts as handled when the caller asks for the next one (the loop's
    /// body returned): only then is it recorded here and acknowledged to the server
    /// (`push.ack`). One whose handling was cut short (the app killed mid-body) comes again.
    /// To stop after handling one, call ``NotificationSequence/AsyncIterator`` 's
    /// `finish()`, or use ``handle(_:)``.
    public func stream() -> NotificationSequence {
        NotificationSequence(notifications: self)
    }

    /// Runs `handler` on each notification, in order, acknowledging each after the handler
    /// returns; returns when the task is cancelled. A handler that throws stops the loop
    /// without acknowledging that notification (it comes again next time).
    public func handle(_ handler: (PushNotification) async throws -> Void) async throws {
        var iterator = self.stream().makeAsyncIterator()
        defer { iterator.close() }
        while let notification = try await iterator.next() {
            try await handler(notification)
        }
    }

    /// The sequence number of the last notification handled on this device.
    public var lastHandled: Int64 {
        get throws(RPCError) { try self.store.value(Self.handledKey).flatMap(Int64.init) ?? 0 }
    }

    static let handledKey = "notifications:lastHandled"

    func markHandled(_ seq: Int64) throws(RPCError) {
        if seq > (try self.lastHandled) { try self.store.setValue(String(seq), for: Self.handledKey) }
    }

    /// Acknowledges up to the last handled, best effort: a failure is retried on the next
    /// acknowledgement or reconnect; nothing is handled twice meanwhile (the local record
    /// filters repeats).
    func acknowledge() async {
        guard let upTo = try? self.lastHandled, upTo > 0 else { return }
        do {
            _ = try await self.session.call(PushMethods.ack, AckParams(upTo: upTo))
        } catch {
            self.logger.debug("push.ack not sent", metadata: ["up_to": "\(upTo)", "code": "\(error.code)"])
        }
    }
}

/// The device's notifications as an async sequence; see ``Notifications/stream()``.
public struct NotificationSequence: AsyncSequence, Sendable {
    public typealias Element = PushNotification
    let notifications: Notifications

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(notifications: self.notifications) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let notifications: Notifications
        var upstream: AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error>.AsyncIterator?
        var delivered: Int64?
        var failures = 0

        init(notifications: Notifications) { self.notifications = notifications }

        public mutating func next() async throws -> PushNotification? {
            // The previous one was handled: record it, then tell the server.
            if let handled = self.delivered {
                try self.notifications.markHandled(handled)
                self.delivered = nil
                await self.notifications.acknowledge()
            }
            while !Task.isCancelled {
                if self.upstream == nil {
                    let after = try self.notifications.lastHandled
                    self.upstream = try self.notifications.session.stream(PushMethods.listen, ListenParams(after: after)).makeAsyncIterator()
                    // Acknowledge what was handled while the connection was down.
                    await self.notifications.acknowledge()
                }
                do {
                    guard let event = try await self.upstream?.next() else {
                        self.upstream = nil  // the service ended the stream: listen again
                        continue
                    }
                    self.failures = 0
                    guard case .item(let value) = event else {
                        self.upstream = nil
                        continue
                    }
                    let notification = try WireValues.decode(PushNotification.self, from: value, what: "a notification")
                    if notification.seq <= (try self.notifications.lastHandled) { continue }  // already handled: a replay
                    self.delivered = notification.seq
                    return notification
                } catch let error as RPCError where error.code == .unauthorized || error.code == .forbidden || error.code == .deviceRevoked {
                    throw error
                } catch {
                    // Lost: wait for the connection, with backoff, and listen again.
                    self.upstream = nil
                    self.failures += 1
                    try? await Task.sleep(for: self.notifications.backoff.delay(attempt: self.failures))
                    if self.notifications.session.transport.state != .connected {
                        await self.notifications.session.transport.waitUntilConnected()
                    }
                }
            }
            return nil
        }

        /// Records the last notification returned as handled, acknowledges it, and stops.
        public mutating func finish() async throws {
            if let handled = self.delivered {
                try self.notifications.markHandled(handled)
                self.delivered = nil
                await self.notifications.acknowledge()
            }
            self.upstream = nil
        }

        /// Stops without recording the last notification returned as handled.
        mutating func close() {
            self.upstream = nil
        }
    }
}
