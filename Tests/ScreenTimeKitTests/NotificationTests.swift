import Foundation
import PushAPI
import RPCCore
import ScreenTimeKit
import StoreAPI
import Testing
import TestSupport

@Suite("Notifications", .serialized)
struct NotificationTests {
    /// A command for the child, written by the parent through its queue.
    static func command(_ parent: ScreenTimeClient, _ zone: String, _ name: String) async throws {
        let command = ConfigurationCommand(targetDeviceID: "emma-ipad", commandType: "ping", createdAt: Date())
        try await parent.records.save(TypedRecord(command, recordName: name, zone: zone))
    }

    @Test("notifications across a lost connection: none missed, none handled twice, acknowledged after handling, resumed by a new kit")
    func acrossReconnect() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push"])
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: zone, firesOn: [.create])

        let handled = Arrivals<PushNotification>()
        let listener = Task { try await child.notifications.handle { handled.append($0) } }
        for index in 1...3 { try await Self.command(parent, zone, "cmd-\(index)") }
        _ = try await handled.wait(for: 3, "the first three notifications")

        // Push goes away while the parent keeps writing; it comes back and catches up.
        await stack.stop("push")
        for index in 4...6 { try await Self.command(parent, zone, "cmd-\(index)") }
        try await stack.start("push")
        let all = try await handled.wait(for: 6, timeout: .seconds(20), "all six notifications after push came back") { "\($0.map { $0.recordName ?? "?" })" }
        #expect(all.map(\.recordName) == (1...6).map { "cmd-\($0)" })
        #expect(Set(all.map(\.seq)).count == 6)
        listener.cancel()
        _ = await listener.result
        await child.close()

        // A new kit on the same database resumes after the last one handled: the first six
        // never come again, the seventh does. Everything handled was acknowledged.
        try await Self.command(parent, zone, "cmd-7")
        let again = try stack.kit("child")
        let next = try #require(try await within(.seconds(10), "the seventh notification") {
            var iterator = again.notifications.stream().makeAsyncIterator()
            let next = try await iterator.next()
            try await iterator.finish()
            return next
        })
        #expect(next.recordName == "cmd-7")
        #expect(try again.notifications.lastHandled == next.seq)
        let ack = try await again.transport.call(TransportRequest(method: "push.ack", params: ["upTo": .int(next.seq)],
                                                                  auth: again.identity.map { Auth(token: $0.token) }))
        #expect(ack["pending"] == 0)
        await again.close()
        await parent.close()
    }

    @Test("a handler that throws leaves its notification unacknowledged: it comes again")
    func handlerThrows() async throws {
        let stack = try await KitStack.start(["store", "pairing", "push"])
        defer { stack.stopAll() }
        let (parent, child, zone) = try await stack.family()
        try await child.notifications.subscribe(to: "ConfigurationCommand", in: zone, firesOn: [.create])
        try await Self.command(parent, zone, "cmd-1")
        struct Crash: Error {}
        await #expect(throws: Crash.self) { try await child.notifications.handle { _ in throw Crash() } }
        #expect(try child.notifications.lastHandled == 0)
        let seen = try await within(.seconds(10), "the unacknowledged notification again") {
            var iterator = child.notifications.stream().makeAsyncIterator()
            return try await iterator.next()?.recordName
        }
        #expect(seen == "cmd-1")
        await child.close()
        await parent.close()
    }
}
