import Foundation
@testable import PushEngine
import RPCCore
import Testing

/// The bytes the listeners of one connection hold together (`--connection-buffer-bytes`),
/// on the hub itself: shared by the connection's listeners, given back as they go, and
/// kept for a connection while an ended listener's writes still wait in it.
@Suite("Push: one byte budget per connection, shared by its listeners")
struct ConnectionBudgetTests {
    static let limits = Hub.Limits(notifications: 1000, bytes: 1 << 20, connectionBytes: 3000, perDevice: 4, perConnection: 64)

    static func notification(_ seq: Int64, bytes: Int) -> Outgoing {
        Outgoing(seq: seq, expiresAt: Date().addingTimeInterval(3600),
                 json: EncodedJSON("\"" + String(repeating: "x", count: bytes - 2) + "\""))
    }

    @Test("two listeners of one connection share its budget: what fits each alone is refused once both hold it, and the second is cut off")
    func sharedBetweenListeners() throws {
        let hub = Hub(limits: Self.limits)
        let emma = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "emma"), connection: 7)
        let leo = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "leo"), connection: 7)
        #expect(emma.listener.budget === leo.listener.budget)
        // 1,000 bytes of JSON is 1,064 counted; two fit in 3,000, a third does not.
        guard case .buffered = emma.listener.offer(Self.notification(1, bytes: 1000)) else { Issue.record("emma's first refused"); return }
        guard case .buffered = emma.listener.offer(Self.notification(2, bytes: 1000)) else { Issue.record("emma's second refused"); return }
        guard case .refused = leo.listener.offer(Self.notification(1, bytes: 1000)) else { Issue.record("leo's fitted a full budget"); return }
        #expect(emma.listener.budget.pendingBytes == 2128)
        // Leo's listener was cut off for its connection: it takes nothing more.
        guard case .refused = leo.listener.offer(Self.notification(2, bytes: 10)) else { Issue.record("a cut-off listener took more"); return }

        // A listener of another connection has a budget of its own.
        let other = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "leo"), connection: 8)
        #expect(other.listener.budget !== emma.listener.budget)
        guard case .buffered = other.listener.offer(Self.notification(1, bytes: 1000)) else { Issue.record("another connection's listener refused"); return }
    }

    @Test("what an ended listener buffered is given back to its connection's budget")
    func givenBackWhenListenerEnds() throws {
        let hub = Hub(limits: Self.limits)
        let emma = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "emma"), connection: 7)
        _ = emma.listener.offer(Self.notification(1, bytes: 1000))
        _ = emma.listener.offer(Self.notification(2, bytes: 1000))
        emma.unregister()
        #expect(emma.listener.budget.pendingBytes == 0)
        let leo = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "leo"), connection: 7)
        guard case .buffered = leo.listener.offer(Self.notification(1, bytes: 2000)) else { Issue.record("the budget was not given back"); return }
    }

    @Test("listening again on a connection gets the budget its ended listener still holds, not a fresh one")
    func keptWhileAnEndedListenerHoldsIt() throws {
        let hub = Hub(limits: Self.limits)
        let first = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "emma"), connection: 7)
        first.unregister()
        // The ended listener is still referenced (as its pending writes would hold it).
        let again = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "emma"), connection: 7)
        #expect(again.listener.budget === first.listener.budget)
    }

    @Test("a single notification larger than the budget still goes when nothing else waits")
    func largeAloneGoes() throws {
        let hub = Hub(limits: Self.limits)
        let emma = try hub.register(Hub.DeviceKey(family: "smith", deviceId: "emma"), connection: 7)
        guard case .buffered = emma.listener.offer(Self.notification(1, bytes: 5000)) else { Issue.record("refused though nothing waited"); return }
        #expect(emma.listener.budget.pendingBytes == 5064)
    }
}
