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

@Suite("Frames and stream replies written in one buffer")
struct FrameWritingTests {
    @Test("a frame built in one buffer is what the length prepender writes in two")
    func frameMatchesPrepender() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addFrameCodec(maximumFrameSize: 1 << 20)
        for payload in [[UInt8](), Array(#"{"id":1,"result":{}}"#.utf8), [UInt8](repeating: 0x61, count: 70_000)] {
            try channel.writeAndFlush(ByteBuffer(bytes: payload)).wait()
            var prepended: [UInt8] = []
            while var part = try channel.readOutbound(as: ByteBuffer.self) { prepended += part.readBytes(length: part.readableBytes) ?? [] }
            var built = Frame.of(payload)
            #expect(built.readBytes(length: built.readableBytes) == prepended)
        }
        _ = try channel.finish()
    }

    @Test("a stream item written around its JSON is the reply resultBytes makes, for either kind of id")
    func streamItems() {
        let item = EncodedJSON(#"{"seq":3,"note":"a \"quoted\" word"}"#)
        for id in [RequestID.int(42), .string("listen-\"1\"")] {
            let items = ReplyEncoding.StreamItems(id: id)
            var buffer = ByteBuffer()
            items.write(item, to: &buffer)
            #expect(buffer.readableBytes == items.count(item))
            #expect(buffer.readBytes(length: buffer.readableBytes) == ReplyEncoding.resultBytes(id: id, encoded: item, continues: true))
        }
    }
}
