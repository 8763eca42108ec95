import Foundation
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
    /// writes whole frame payloads as `ByteBuffer`s. Without `prependingLengths`, it reads
    /// payloads and writes whole frames as they are (each made with ``Frame``).
    public func addFrameCodec(maximumFrameSize: Int, prependingLengths: Bool = true) throws {
        try self.addHandler(ByteToMessageHandler(BoundedFrameDecoder(maximumFrameSize: maximumFrameSize)))
        if prependingLengths {
            try self.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes, lengthFieldEndianness: .big))
        }
    }
}

/// One frame, length prefix and payload, in one buffer.
///
/// Why not `LengthFieldPrepender` on a busy connection: it writes each length as a buffer
/// of its own, so every reply cost a second allocation, a second pass down the pipeline and
/// a second `iovec`; a reply built here costs one of each.
public enum Frame {
    /// A frame holding `payload`.
    public static func of(_ payload: [UInt8]) -> ByteBuffer {
        self.build(capacity: payload.count) { $0.writeBytes(payload) }
    }

    public static func of(_ payload: Data) -> ByteBuffer {
        self.build(capacity: payload.count) { $0.writeBytes(payload) }
    }

    /// A frame whose payload `write` appends; its length is set once it is written.
    public static func build(capacity: Int, _ write: (inout ByteBuffer) throws -> Void) rethrows -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: capacity + 4)
        buffer.writeInteger(UInt32(0))
        try write(&buffer)
        buffer.setInteger(UInt32(buffer.readableBytes - 4), at: buffer.readerIndex)
        return buffer
    }
}
