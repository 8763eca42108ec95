import NIOCore
import NIOExtras

/// Splits a byte stream into frames, refusing a frame as soon as its length prefix says
/// it is too large (before any of its payload is buffered).
///
/// ```
/// +---------------------+----------------------------------+
/// | length N: UInt32 BE | N bytes: one UTF-8 JSON object   |
/// +---------------------+----------------------------------+
/// ```
///
/// The framing itself is NIOExtras' `LengthFieldBasedFrameDecoder`; this adds only the
/// size limit, which that decoder does not have.
public struct BoundedFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = ByteBuffer

    public let maximumFrameSize: Int
    private let frames = LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes, lengthFieldEndianness: .big)
    /// The inner decoder has consumed a length prefix and waits for the rest of its payload;
    /// the buffer then starts with payload bytes, not a prefix to check.
    private var awaitingPayload = false

    public init(maximumFrameSize: Int) {
        self.maximumFrameSize = maximumFrameSize
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if !self.awaitingPayload,
            let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self),
            UInt64(length) > UInt64(self.maximumFrameSize)
        {
            throw FrameTooLargeError(declaredLength: UInt64(length), maximumFrameSize: self.maximumFrameSize)
        }
        let start = buffer.readerIndex
        let state = try self.frames.decode(context: context, buffer: &buffer)
        switch state {
        case .continue: self.awaitingPayload = false
        case .needMoreData: if buffer.readerIndex != start { self.awaitingPayload = true }
        }
        return state
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try self.frames.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}

/// A frame's length prefix is over the limit; the connection cannot be resynchronised.
public struct FrameTooLargeError: Error, Sendable, Hashable {
    public var declaredLength: UInt64
    public var maximumFrameSize: Int

    public init(declaredLength: UInt64, maximumFrameSize: Int) {
        self.declaredLength = declaredLength
        self.maximumFrameSize = maximumFrameSize
    }

    public var rpcError: RPCError {
        RPCError(
            .frameTooLarge,
            "the frame declares \(self.declaredLength) bytes; this service accepts at most \(self.maximumFrameSize)",
            data: ["declaredLength": .int(Int64(clamping: self.declaredLength)), "maximumFrameSize": .int(Int64(self.maximumFrameSize))]
        )
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// Adds the frame decoder and the length prepender: after this the channel reads and
    /// writes whole frame payloads as `ByteBuffer`s.
    public func addFrameCodec(maximumFrameSize: Int) throws {
        try self.addHandler(ByteToMessageHandler(BoundedFrameDecoder(maximumFrameSize: maximumFrameSize)))
        try self.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes, lengthFieldEndianness: .big))
    }
}
