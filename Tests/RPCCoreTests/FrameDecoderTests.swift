import NIOCore
import NIOEmbedded
import RPCCore
import Testing

@Suite("Framing")
struct FrameDecoderTests {
    func channel(maximum: Int = 16) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addFrameCodec(maximumFrameSize: maximum)
        return channel
    }

    func frame(_ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
    }

    func readFrames(_ channel: EmbeddedChannel) throws -> [[UInt8]] {
        var frames: [[UInt8]] = []
        while let buffer = try channel.readInbound(as: ByteBuffer.self) { frames.append(Array(buffer.readableBytesView)) }
        return frames
    }

    @Test("a frame split across many reads comes out whole")
    func splitAcrossReads() throws {
        let channel = try self.channel()
        for byte in self.frame(Array("{\"a\":1}".utf8)) {
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
        }
        #expect(try self.readFrames(channel) == [Array("{\"a\":1}".utf8)])
    }

    @Test("several frames coalesced in one read come out one by one")
    func coalesced() throws {
        let channel = try self.channel()
        try channel.writeInbound(ByteBuffer(bytes: self.frame([1]) + self.frame([2, 2]) + self.frame([3, 3, 3])))
        #expect(try self.readFrames(channel) == [[1], [2, 2], [3, 3, 3]])
    }

    @Test("a zero-length frame is a frame (the envelope then rejects it)")
    func zeroLength() throws {
        let channel = try self.channel()
        try channel.writeInbound(ByteBuffer(bytes: self.frame([])))
        #expect(try self.readFrames(channel) == [[]])
    }

    @Test("exactly the maximum passes; one byte over fails on the prefix alone")
    func maximum() throws {
        let channel = try self.channel(maximum: 16)
        try channel.writeInbound(ByteBuffer(bytes: self.frame(Array(repeating: 7, count: 16))))
        #expect(try self.readFrames(channel).first?.count == 16)

        let over = try self.channel(maximum: 16)
        #expect(throws: FrameTooLargeError(declaredLength: 17, maximumFrameSize: 16)) {
            try over.writeInbound(ByteBuffer(bytes: [0, 0, 0, 17]))
        }
    }

    @Test("the prepender writes the 4-byte big-endian length")
    func prepender() throws {
        let channel = try self.channel()
        try channel.writeOutbound(ByteBuffer(bytes: Array("{}".utf8)))
        var written: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { written += Array(buffer.readableBytesView) }
        #expect(written == [0, 0, 0, 2] + Array("{}".utf8))
    }
}
