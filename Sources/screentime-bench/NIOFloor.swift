import ArgumentParser
import Foundation
import NIOCore
import NIOExtras
import NIOPosix

/// The SwiftNIO floor: the same length-prefixed request/reply as the C floor server, on
/// SwiftNIO's channel pipeline (NIOExtras' length-field decoder, one event loop) with
/// nothing else: no JSON, no tasks. What the services' framework costs before any of
/// their own work; the C client measures it as it measures the services.
///
/// With `--database`, the service floor for durable saves: on that same loop, with no
/// thread hop, one SQLite transaction of what the store writes for a usage record (the
/// store's schema and durability: ``StoreSchemaFloor``) for the requests one turn of the
/// loop read, then the reply to each. No JSON, no checks, no change feed: what a save
/// service in a process of its own reaches at most, one client or many (one transaction a
/// turn is group commit with no queue).
struct NIOFloorServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nio-floor-server",
        abstract: "Serve the SwiftNIO request/reply floor, or with --database the durable-save service floor (used by the store and postgres benchmarks).",
        shouldDisplay: false
    )

    @Argument(help: "Socket path to listen on.")
    var socket: String

    @Argument(help: "Bytes in every reply frame.")
    var replyBytes: Int

    @Option(help: "Save each request into this database, made anew with the schema of --schema-from.")
    var database: String?

    @Option(help: "The store's database, whose schema the service floor copies.")
    var schemaFrom: String?

    func validate() throws {
        guard (0...Int(UInt32.max)).contains(self.replyBytes) else { throw ValidationError("reply-bytes must be between 0 and \(UInt32.max)") }
        guard (self.database == nil) == (self.schemaFrom == nil) else { throw ValidationError("--database and --schema-from go together") }
    }

    func run() async throws {
        let frame = Self.replyFrame(bytes: self.replyBytes)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        guard let database = self.database, let schemaFrom = self.schemaFrom else {
            try await Self.serve(socket: self.socket, group: group) { Replier(reply: frame) }
            return
        }
        let floor = try StoreSchemaFloor.database(schemaFrom: schemaFrom, path: database)
        let loop = group.next()
        let batches = try await loop.submit { NIOLoopBound(Batches(floor: floor, reply: frame, loop: loop), eventLoop: loop) }.get()
        // One loop: every connection's handler shares its batches.
        try await Self.serve(socket: self.socket, group: group) { Replier(reply: frame, batches: batches.value) }
    }

    /// Answers every frame with the same reply frame: at once, or once `batches` saved it.
    private final class Replier: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let reply: ByteBuffer
        let batches: Batches?

        init(reply: ByteBuffer, batches: Batches? = nil) {
            self.reply = reply
            self.batches = batches
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if let batches { return batches.add(context) }
            context.writeAndFlush(self.wrapOutboundOut(self.reply), promise: nil)
        }
    }

    /// The requests read in this turn of the loop, saved together when the turn's reads are
    /// done (a task the loop runs after them).
    private final class Batches {
        let floor: StoreSchemaFloor.Floor
        let reply: ByteBuffer
        let loop: any EventLoop
        var pending: [ChannelHandlerContext] = []
        var saved = 0

        init(floor: StoreSchemaFloor.Floor, reply: ByteBuffer, loop: any EventLoop) {
            self.floor = floor
            self.reply = reply
            self.loop = loop
        }

        func add(_ context: ChannelHandlerContext) {
            self.pending.append(context)
            if self.pending.count == 1 { self.loop.assumeIsolated().execute { self.commit() } }
        }

        private func commit() {
            let batch = self.pending
            self.pending = []
            do {
                try self.floor.write(self.saved..<self.saved + batch.count)
            } catch {
                fatalError("the service floor's transaction failed: \(error)")
            }
            self.saved += batch.count
            for context in batch { context.writeAndFlush(NIOAny(self.reply), promise: nil) }
        }
    }
}

/// SwiftNIO's length-prefixed frames on a Unix socket.
extension NIOFloorServer {
    /// A frame of `bytes` bytes (each an "x") with its length.
    private static func replyFrame(bytes: Int) -> ByteBuffer {
        var reply = ByteBuffer()
        reply.writeInteger(UInt32(bytes))
        reply.writeRepeatingByte(UInt8(ascii: "x"), count: bytes)
        return reply
    }

    /// Serves `socket` on `group`: each connection's frames go through NIOExtras'
    /// length-field decoder to a handler `handler` makes for it, on the connection's loop.
    /// Prints "ready" once listening; returns when the listener closes.
    private static func serve(socket: String, group: any EventLoopGroup,
                              handler: @escaping @Sendable () -> any ChannelInboundHandler) async throws {
        let channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .thirtyTwoBits)))
                    try channel.pipeline.syncOperations.addHandler(handler())
                }
            }
            .bind(unixDomainSocketPath: socket, cleanupExistingSocketFile: true)
            .get()
        say("ready")
        try await channel.closeFuture.get()
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
