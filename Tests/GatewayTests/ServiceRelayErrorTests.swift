import Foundation
import Gateway
import RPCClient
import RPCCore
import Testing
import TestSupport

/// What a device is told when a service fails: a service's own answer as it is, the
/// gateway's failure to reach a service as a sentence that names no socket.
@Suite("Gateway: a service's failures as a device sees them")
struct ServiceRelayErrorTests {
    @Test("a service that cannot be reached is 'not available right now', without the socket's path; the client's error says it is its own")
    func unreachableService() async throws {
        let directory = try TemporaryDirectory()
        let client = RPCClient(configuration: ClientConfiguration(socketPath: directory.path + "/absent.sock", connectTimeout: .milliseconds(100)))
        var caught: RPCError?
        do {
            _ = try await client.call(Builtin.ping, Empty())
        } catch {
            caught = error
        }
        await client.close()
        let error = try #require(caught)
        #expect(error.code == .unavailable)
        #expect(error.isConnectionFailure)
        let shown = ServiceRelay.presentable(error, service: "store")
        #expect(shown.code == .unavailable)
        #expect(shown.message == "the store service is not available right now; try again shortly")
        #expect(!shown.message.contains(directory.path) && shown.data == nil)
    }

    @Test("a service's own 'unavailable' and other answers reach the device as the service said them; 'internal' says only where to look")
    func servicesOwnAnswers() {
        let busy = RPCError(.unavailable, "the store is closing for maintenance; try again in a minute")
        #expect(!busy.isConnectionFailure)
        #expect(ServiceRelay.presentable(busy, service: "store") == busy)
        let conflict = RPCError(.conflict, "record r changed meanwhile")
        #expect(ServiceRelay.presentable(conflict, service: "store") == conflict)
        let shown = ServiceRelay.presentable(RPCError(.internal, "SQLITE_CORRUPT at /var/lib/screentime/store.sqlite"), service: "store")
        #expect(shown.code == .internal && !shown.message.contains("/var/lib"))
    }
}
