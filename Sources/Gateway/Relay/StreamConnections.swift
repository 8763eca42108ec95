import NIOCore
import RPCClient
import Synchronization

/// The connections that carry devices' streams to one service. A few streams share each
/// connection: a service bounds what one connection may carry (the push service, 64
/// `push.listen` streams, `--max-listeners-per-connection`, and 4 MiB of notifications
/// behind, `--connection-buffer-bytes`), and a thousand listening devices must not share
/// one such budget, nor each hold a connection of their own. Each
/// connection is on the event loop of the WebSockets it serves, so a notification goes
/// from the service's connection to the device's socket without changing threads. A
/// connection is closed once its last stream has ended.
final class StreamConnections: Sendable {
    /// One stream's place on a connection; give it back with ``release(_:)``.
    struct Lease: Sendable {
        let client: RPCClient
        fileprivate let loop: ObjectIdentifier
    }

    private struct Shared {
        let client: RPCClient
        var streams: Int
    }

    let streamsPerConnection: Int
    private let connect: @Sendable (any EventLoop) -> RPCClient
    /// By event loop.
    private let connections = Mutex<[ObjectIdentifier: [Shared]]>([:])

    init(streamsPerConnection: Int, connect: @escaping @Sendable (any EventLoop) -> RPCClient) {
        self.streamsPerConnection = streamsPerConnection
        self.connect = connect
    }

    /// A place for one more stream on a connection of `loop` (a new connection when
    /// those there are full).
    func acquire(on loop: any EventLoop) -> Lease {
        let key = ObjectIdentifier(loop)
        return self.connections.withLock { connections in
            if let index = connections[key]?.firstIndex(where: { $0.streams < self.streamsPerConnection }) {
                connections[key]![index].streams += 1
                return Lease(client: connections[key]![index].client, loop: key)
            }
            let client = self.connect(loop)
            connections[key, default: []].append(Shared(client: client, streams: 1))
            return Lease(client: client, loop: key)
        }
    }

    /// The stream has ended (its service was told to stop, if it had not ended itself).
    func release(_ lease: Lease) async {
        let idle: RPCClient? = self.connections.withLock { connections in
            guard let index = connections[lease.loop]?.firstIndex(where: { $0.client === lease.client }) else { return nil }
            connections[lease.loop]![index].streams -= 1
            guard connections[lease.loop]![index].streams == 0 else { return nil }
            connections[lease.loop]!.remove(at: index)
            return lease.client
        }
        await idle?.close()
    }

    func closeAll() async {
        let clients = self.connections.withLock { connections in
            defer { connections = [:] }
            return connections.values.flatMap { $0.map(\.client) }
        }
        for client in clients { await client.close() }
    }
}
