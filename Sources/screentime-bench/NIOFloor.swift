import ArgumentParser
import Foundation
import NIOCore
import NIOExtras
import NIOPosix

/// The SwiftNIO floor: the same length-prefixed request/reply as the C floor server, on
/// SwiftNIO's channel pipeline (NIOExtras' length-field decoder, one event loop) with
/// nothing else: no JSON, no tasks. What the services' framework costs before any of
/// their own work; the C client measures it as it measures the services.
struct NIOFloorServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nio-floor-server",
        abstract: "Serve the SwiftNIO request/reply floor (used by the store benchmark).",
        shouldDisplay: false
    )

    @Argument(help: "Socket path to listen on.")
    var socket: String

    @Argument(help: "Bytes in every reply frame.")
    var replyBytes: Int

    func validate() throws {
        guard (0...Int(UInt32.max)).contains(self.replyBytes) else { throw ValidationError("reply-bytes must be between 0 and \(UInt32.max)") }
    }

    func run() async throws {
        var reply = ByteBuffer()
        reply.writeInteger(UInt32(self.replyBytes))
        reply.writeRepeatingByte(UInt8(ascii: "x"), count: self.replyBytes)
        let frame = reply
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .thirtyTwoBits)))
                    try channel.pipeline.syncOperations.addHandler(Replier(reply: frame))
                }
            }
            .bind(unixDomainSocketPath: self.socket, cleanupExistingSocketFile: true)
            .get()
        say("ready")
        try await channel.closeFuture.get()
    }

    /// Answers every frame with the same reply frame.
    private final class Replier: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let reply: ByteBuffer

        init(reply: ByteBuffer) { self.reply = reply }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(self.wrapOutboundOut(self.reply), promise: nil)
        }
    }
}

/// What a connection costs the bare SwiftNIO server (``NIOFloorServer``): its resident
/// memory added by `connections` connections, each after one request and reply. The
/// comparison for the push service's memory per idle listener.
enum NIOFloorMemory {
    static func perConnectionKiB(workDirectory: String, connections: Int) throws -> Double {
        let socket = workDirectory + "/nio-floor.sock"
        return try FloorServer.with([Locations.thisExecutable, "nio-floor-server", socket, "16"]) { server in
            var open: [Int32] = []
            defer { for fd in open { close(fd) } }
            func connect(_ count: Int) throws {
                for _ in 0..<count {
                    let fd = try BlockingFrames.connect(socket)
                    open.append(fd)
                    try BlockingFrames.send(fd, Array("ping".utf8))
                    _ = try BlockingFrames.receive(fd)
                }
            }
            // The first connections also grow the allocator's arenas: not theirs to pay.
            try connect(200)
            Thread.sleep(forTimeInterval: 0.5)
            let before = try ProcessMemory.residentBytes(pid: server.processIdentifier)
            try connect(connections)
            Thread.sleep(forTimeInterval: 1)
            let after = try ProcessMemory.residentBytes(pid: server.processIdentifier)
            return Double(after - before) / Double(connections) / 1024
        }
    }
}
