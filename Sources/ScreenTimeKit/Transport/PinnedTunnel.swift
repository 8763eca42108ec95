import NIOCore
import NIOPosix
import RPCCore

/// The near end of a pinned TLS connection, for the WebSocket client to speak plain
/// WebSocket into: a listener on 127.0.0.1 that accepts one connection, closes, and relays
/// that connection's bytes to and from the pinned channel until either side ends.
///
/// Why: swift-websocket's `WebSocketClient` builds its own TLS handler from a
/// `TLSConfiguration`, which has no place for NIOSSL's custom verification callback, and
/// trusting the pinned certificate as a root instead does not work with the gateway's
/// certificate (not a CA: BoringSSL will not anchor a chain on it; tested). So the TLS
/// connection is the kit's own, its key checked in the handshake, and the WebSocket runs
/// through it. The listener is loopback-only and one-shot; whoever reached it would get a
/// connection to the gateway and nothing else (the device's token travels only in the
/// kit's own WebSocket upgrade).
enum PinnedTunnel {
    /// Starts the relay; returns the port to connect to and the relay's task, which ends
    /// (closing both sides) when either side closes.
    static func open(
        to remote: NIOAsyncChannel<ByteBuffer, ByteBuffer>, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> (port: Int, relay: Task<Void, Never>) {
        let listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
        do {
            listener = try await ServerBootstrap(group: group)
            .bind(host: "127.0.0.1", port: 0) { child in
                child.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: child) }
            }
        } catch {
            await PinnedHandshake.discard(remote)
            throw error
        }
        guard let port = listener.channel.localAddress?.port else {
            try? await listener.executeThenClose { _ in }
            await PinnedHandshake.discard(remote)
            throw RPCError(.internal, "the local end of the TLS tunnel has no port")
        }
        let relay = Task {
            // One connection only: the listener closes once it has it (or is cancelled).
            let local = try? await listener.executeThenClose { inbound in
                var accepted = inbound.makeAsyncIterator()
                return try await accepted.next()
            }
            if let local = local ?? nil {
                try? await Self.relay(local, remote)
            } else {
                await PinnedHandshake.discard(remote)
            }
        }
        return (port, relay)
    }

    private static func relay(_ local: NIOAsyncChannel<ByteBuffer, ByteBuffer>, _ remote: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async throws {
        try await local.executeThenClose { localIn, localOut in
            try await remote.executeThenClose { remoteIn, remoteOut in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { for try await bytes in localIn { try await remoteOut.write(bytes) } }
                    group.addTask { for try await bytes in remoteIn { try await localOut.write(bytes) } }
                    // Either side ended: the other goes too.
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
        }
    }
}
