import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TestSupport

/// A local HTTP server standing in for an ntfy server or a UnifiedPush distributor: it
/// records every request and answers with the statuses it is told, in order (then 200);
/// status 0 is no answer at all (an endpoint that hangs).
final class WebhookEndpoint: Sendable {
    struct Request: Sendable {
        var method: String
        var path: String
        /// Lowercased names.
        var headers: [String: String]
        var body: String
    }

    private let requests = Arrivals<Request>()
    private let statuses: Mutex<[Int]>
    private let channel: any Channel

    private init(channel: any Channel, statuses: [Int]) {
        self.channel = channel
        self.statuses = Mutex(statuses)
    }

    static func start(answering statuses: [Int] = []) async throws -> WebhookEndpoint {
        let recorder = Recorder()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(recorder: recorder))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let endpoint = WebhookEndpoint(channel: channel, statuses: statuses)
        recorder.endpoint.withLock { $0 = endpoint }
        return endpoint
    }

    var base: String { "http://127.0.0.1:\(self.channel.localAddress?.port ?? 0)" }
    var received: [Request] { self.requests.all }

    /// What to answer next (the following requests).
    func answer(_ statuses: [Int]) { self.statuses.withLock { $0 = statuses } }

    func wait(for count: Int, timeout: Duration = .seconds(10)) async throws -> [Request] {
        try await self.requests.wait(for: count, timeout: timeout, "webhook requests") { "\($0.map(\.body))" }
    }

    func stop() { _ = self.channel.close() }

    fileprivate func record(_ request: Request) -> Int {
        self.requests.append(request)
        return self.statuses.withLock { $0.isEmpty ? 200 : $0.removeFirst() }
    }

    private final class Recorder: Sendable {
        let endpoint = Mutex<WebhookEndpoint?>(nil)
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let recorder: Recorder
        var head: HTTPRequestHead?
        var body = ByteBuffer()

        init(recorder: Recorder) { self.recorder = recorder }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                self.body.clear()
            case .body(var chunk):
                self.body.writeBuffer(&chunk)
            case .end:
                guard let head = self.head, let endpoint = self.recorder.endpoint.withLock({ $0 }) else { return }
                let status = endpoint.record(Request(
                    method: head.method.rawValue, path: head.uri,
                    headers: Dictionary(head.headers.map { ($0.name.lowercased(), $0.value) }) { first, _ in first },
                    body: String(buffer: self.body)))
                guard status != 0 else { return }
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status), headers: headers))), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
