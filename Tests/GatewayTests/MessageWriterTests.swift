import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import Gateway

@Suite("Gateway: replies written as one buffer below the WebSocket encoder")
struct MessageWriterTests {
    /// A channel with NIO's frame encoder, as on a device's socket, and the writer attached.
    func socket() throws -> (EmbeddedChannel, MessageWriter) {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        let writer = MessageWriter(channel: channel)
        writer.attach()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8443)).wait()
        return (channel, writer)
    }

    /// The frames NIO's own decoder reads from the bytes written.
    func frames(_ buffers: [ByteBuffer]) throws -> [WebSocketFrame] {
        let reader = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        for buffer in buffers { try reader.writeInbound(buffer) }
        var frames: [WebSocketFrame] = []
        while let frame = try reader.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    @Test("each message, of every header length, is one buffer that NIO's decoder reads as one whole text frame", arguments: [0, 1, 125, 126, 65_535, 65_536, 200_000])
    func oneBufferPerMessage(size: Int) throws {
        let (channel, writer) = try self.socket()
        let message = (0..<size).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        let written = writer.write(message)
        var buffers: [ByteBuffer] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
        #expect(buffers.count == 1)
        let frames = try self.frames(buffers)
        #expect(frames.count == 1)
        #expect(frames.first?.fin == true && frames.first?.opcode == .text && frames.first?.maskKey == nil)
        #expect(frames.first.map { Array($0.unmaskedData.readableBytesView) } == message)
        try written.wait()
        _ = try channel.finish()
    }

    @Test("without the encoder in the pipeline, messages still go out as frames")
    func fallsBackToFrames() throws {
        let channel = EmbeddedChannel()
        let writer = MessageWriter(channel: channel)
        writer.attach()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8443)).wait()
        writer.write(Array("{\"id\":1,\"result\":{}}".utf8))
        let frame = try channel.readOutbound(as: WebSocketFrame.self)
        #expect(frame.map { String(buffer: $0.unmaskedData) } == "{\"id\":1,\"result\":{}}")
        _ = try channel.finish()
    }
}
