import Foundation
import NIOCore
import RPCCore

/// The write side of one connection. Replies of many requests are written concurrently;
/// NIO's async writer serialises them and applies back-pressure.
struct Outbound: Sendable {
    let writer: NIOAsyncChannelOutboundWriter<ByteBuffer>

    func send(_ payload: Data) async throws {
        try await self.writer.write(ByteBuffer(bytes: payload))
    }

    func send(bytes payload: [UInt8]) async throws {
        try await self.writer.write(ByteBuffer(bytes: payload))
    }

    /// Sends, ignoring a peer that has gone: there is nobody left to tell.
    func sendOrDrop(_ payload: Data) async {
        try? await self.send(payload)
    }

    /// Sends a request's last reply even when its task has been cancelled (by `rpc.cancel`
    /// or shutdown): NIO's writer refuses writes from a cancelled task, and the client must
    /// still learn how its request ended. A fresh task does not inherit the cancellation.
    func sendFinal(_ payload: Data) async {
        await Task { await self.sendOrDrop(payload) }.value
    }
}
