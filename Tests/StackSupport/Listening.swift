import Foundation
import PushAPI
import RPCClient
import Synchronization
import Testing
import TestSupport

/// A device's `push.listen`, collecting what arrives.
public final class Listening: Sendable {
    private let received = Arrivals<PushNotification>()
    private let ended = Mutex<(any Error)?>(nil)
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    /// - Parameters:
    ///   - reconnecting: listen again whenever the stream fails or ends (push not up yet),
    ///     instead of keeping the error.
    ///   - only: keep the notifications of this reason only.
    public init(_ client: RPCClient, after: Int64? = nil, reconnecting: Bool = false, only reason: NotificationReason? = nil) {
        let task = Task { [weak self] in
            repeat {
                do {
                    for try await event in client.stream(PushMethods.listen, ListenParams(after: after)) {
                        guard case .item(let notification) = event, reason.map({ notification.reason == $0 }) ?? true else { continue }
                        self?.received.append(notification)
                    }
                } catch {
                    if !reconnecting { self?.ended.withLock { $0 = error } }
                }
                // Push is not up yet: try again in a moment (the client's own connect backoff
                // covers a service that is starting; this covers one that ended the stream).
                if reconnecting { try? await Task.sleep(for: .milliseconds(100)) }
            } while reconnecting && !Task.isCancelled
        }
        self.task.withLock { $0 = task }
    }

    public var notifications: [PushNotification] { self.received.all }
    public var error: (any Error)? { self.ended.withLock { $0 } }

    /// Waits until `count` notifications have arrived (or fails after `timeout`).
    @discardableResult
    public func wait(for count: Int, timeout: Duration = .seconds(10)) async throws -> [PushNotification] {
        try await self.received.wait(for: count, timeout: timeout, "notifications") { received in
            // A stream that ended says why (cut off for falling behind, say).
            "\(Self.describe(received))" + (self.error.map { "; the stream ended: \($0)" } ?? "")
        }
    }

    /// Checks that nothing more arrives for a while. (A negative can only be observed over
    /// time; where a later notification is certain to come, wait for it instead.)
    public func expectQuiet(beyond count: Int, for duration: Duration = .milliseconds(500), sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await Task.sleep(for: duration)
        #expect(self.notifications.count == count, "unexpected notifications: \(Self.describe(Array(self.notifications.dropFirst(count))))", sourceLocation: sourceLocation)
    }

    private static func describe(_ notifications: [PushNotification]) -> [String] {
        notifications.map { $0.alert?.title ?? "\($0.reason)" }
    }

    public func cancel() { self.task.withLock { $0?.cancel() } }
    deinit { self.task.withLock { $0?.cancel() } }
}
