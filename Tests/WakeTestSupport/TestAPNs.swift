import APNsStandIn
import Foundation
import RelayCore
import TestSupport

/// The APNs stand-in for a test: its files in a temporary directory, and its pushes as
/// arrivals a test waits for: the wakes apart from the pushes that hand a device its
/// handle (what a test counts is the wakes).
public final class TestAPNs: Sendable {
    /// A handle the relay sent to a device.
    public struct Delivery: Sendable {
        public var token: String
        public var handle: String
        public var push: APNsStandIn.Received
    }

    public let standIn: APNsStandIn
    public let directory = TemporaryDirectory()
    private let arrivals = Arrivals<APNsStandIn.Received>()
    public let deliveries = Arrivals<Delivery>()

    /// `onDelivery`: what the device does with a handle sent to it (an app's
    /// `didReceiveRemoteNotification`, in a test of the kit).
    public init(onDelivery: @escaping @Sendable (Delivery) -> Void = { _ in }) async throws {
        let arrivals = self.arrivals, deliveries = self.deliveries
        self.standIn = try await APNsStandIn(directory: self.directory.path) { push in
            if let delivery = Self.delivery(in: push) {
                deliveries.append(delivery)
                onDelivery(delivery)
            } else {
                arrivals.append(push)
            }
        }
    }

    /// The handle a push carries, as the app reads it from its payload.
    public static func delivery(in push: APNsStandIn.Received) -> Delivery? {
        guard let payload = try? JSONSerialization.jsonObject(with: Data(push.payload.utf8)) as? [String: Any],
              let handle = APNsPush.handle(inPayload: payload) else { return nil }
        return Delivery(token: push.token, handle: handle, push: push)
    }

    /// The latest handle sent to `token`, waiting until `count` were sent to it.
    public func handle(for token: String, count: Int = 1, timeout: Duration = .seconds(10)) async throws -> String {
        try await waitUntil("a handle pushed to \(token.prefix(8))…", timeout: timeout) {
            self.deliveries.all.filter { $0.token == token }.count >= count
        }
        return self.deliveries.all.last { $0.token == token }!.handle
    }

    public var keyId: String { self.standIn.keyId }
    public var teamId: String { self.standIn.teamId }
    public var topic: String { self.standIn.topic }
    public var p8: String { self.standIn.p8 }
    public var url: String { self.standIn.url }
    /// The CA of the stand-in's certificate.
    public var certificateFile: String { self.standIn.certificateFile }
    /// The wakes taken (not the handle deliveries).
    public var pushes: [APNsStandIn.Received] { self.arrivals.all }

    /// The next answers for `token`, in order (then 200).
    public func answer(_ token: String, _ answers: [(status: Int, reason: String)]) { self.standIn.answer(token, answers) }

    /// Waits until `count` pushes were taken in all; returns them all.
    @discardableResult
    public func wait(for count: Int, timeout: Duration = .seconds(10)) async throws -> [APNsStandIn.Received] {
        try await self.arrivals.wait(for: count, timeout: timeout, "pushes") { $0.map { "\($0.headers["apns-push-type"] ?? "?") to \($0.token.prefix(8))…" }.description }
    }

    public func stop() { self.standIn.stop() }
}
