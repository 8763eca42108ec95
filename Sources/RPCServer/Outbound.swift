import Foundation
import NIOCore
import RPCCore

/// What a request's handler writes its replies through.
struct Outbound: Sendable {
    let writer: ConnectionWriter

    /// Sends one reply and waits while the peer is slow to read (back-pressure).
    func send(_ payload: Data) async throws {
        try await self.writer.write(Frame.of(payload), waitForRoom: true)
    }

    func send(bytes payload: [UInt8]) async throws {
        try await self.writer.write(Frame.of(payload), waitForRoom: true)
    }

    /// Sends, ignoring a peer that has gone: there is nobody left to tell.
    func sendOrDrop(_ payload: Data) async {
        try? await self.send(payload)
    }

    /// Sends a request's last reply without waiting for room, so it goes out even when the
    /// request has been cancelled (by `rpc.cancel` or shutdown): the client must still learn
    /// how its request ended.
    func sendFinal(_ payload: Data) async {
        try? await self.writer.write(Frame.of(payload), waitForRoom: false)
    }

    /// Sends from the event loop, without waiting (the connection's own error replies).
    func sendNow(_ payload: Data) {
        try? self.writer.writeNow(Frame.of(payload))
    }

    func sendNow(bytes payload: [UInt8]) {
        try? self.writer.writeNow(Frame.of(payload))
    }
}
