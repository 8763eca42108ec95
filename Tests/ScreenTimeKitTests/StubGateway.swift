import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import RPCClient
import RPCCore
import ScreenTimeKit
import Synchronization
import TestSupport

/// A stand-in for `screentime-gatewayd`'s `GET /v1/ws`, until the gateway is merged: TLS
/// with a certificate shaped as the gateway's, the WebSocket upgrade with `Authorization:
/// Bearer`, each text message one envelope relayed to the real services' sockets with that
/// token, replies (and `push.listen`'s items, `"continues": true`) sent back as they come,
/// `rpc.cancel`, pings answered. Nothing of the gateway's security: a test double of its wire.
final class StubGateway: @unchecked Sendable {
    let port: Int
    let pin: KeyPin
    private let server: any Channel
    private let tasks = Mutex<[Task<Void, Never>]>([])
    private let sockets = Mutex<[any Channel]>([])

    enum Upgrade: Sendable {
        case websocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, token: String?)
        case refused
    }

    private init(port: Int, pin: KeyPin, server: any Channel) {
        self.port = port
        self.pin = pin
        self.server = server
    }

    var url: String { "https://127.0.0.1:\(self.port)" }

    /// Starts on `port` (0: any) with the certificate `identity` (the same key across a restart).
    static func start(runtimeDirectory: String, port: Int = 0, identity: (NIOSSLCertificate, NIOSSLPrivateKey)) async throws -> StubGateway {
        let tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(identity.0)], privateKey: .privateKey(identity.1))
        let context = try NIOSSLContext(configuration: tls)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    let upgrader = NIOTypedWebSocketServerUpgrader<Upgrade>(
                        maxFrameSize: 1 << 24,
                        shouldUpgrade: { channel, head in channel.eventLoop.makeSucceededFuture(head.uri == "/v1/ws" ? HTTPHeaders() : nil) },
                        upgradePipelineHandler: { channel, head in
                            channel.eventLoop.makeCompletedFuture {
                                let bearer = head.headers["authorization"].first.flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
                                return Upgrade.websocket(try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(wrappingChannelSynchronously: channel), token: bearer)
                            }
                        })
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: .init(
                        upgradeConfiguration: .init(upgraders: [upgrader], notUpgradingCompletionHandler: { channel in
                            channel.close(promise: nil)
                            return channel.eventLoop.makeSucceededFuture(Upgrade.refused)
                        })))
                }
            }
        let gateway = StubGateway(port: server.channel.localAddress!.port!, pin: try KeyPin(certificate: identity.0), server: server.channel)
        let accepting = Task<Void, Never> {
            _ = try? await server.executeThenClose { inbound in
                for try await upgrade in inbound {
                    let task = Task {
                        guard case .websocket(let socket, let token)? = try? await upgrade.get() else { return }
                        gateway.sockets.withLock { $0.append(socket.channel) }
                        await Relay(runtimeDirectory: runtimeDirectory, token: token).serve(socket)
                    }
                    gateway.tasks.withLock { $0.append(task) }
                }
            }
        }
        gateway.tasks.withLock { $0.append(accepting) }
        return gateway
    }

    /// Stops listening and drops every WebSocket (as a gateway that goes away does).
    func stop() async {
        try? await self.server.close()
        for socket in self.sockets.withLock({ $0 }) { try? await socket.close() }
        for task in self.tasks.withLock({ $0 }) {
            task.cancel()
            await task.value
        }
    }
}

/// One device's WebSocket, relayed to the services with its token.
private final class Relay: Sendable {
    let runtimeDirectory: String
    let token: String?
    private let clients = Mutex<[String: RPCClient]>([:])
    private let streams = Mutex<[String: Task<Void, Never>]>([:])

    init(runtimeDirectory: String, token: String?) {
        self.runtimeDirectory = runtimeDirectory
        self.token = token
    }

    func serve(_ socket: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>) async {
        try? await socket.executeThenClose { inbound, outbound in
            await withTaskGroup(of: Void.self) { group in
                do {
                    for try await frame in inbound {
                        switch frame.opcode {
                        case .text:
                            let text = String(buffer: frame.unmaskedData)
                            group.addTask { await self.handle(text, outbound) }
                        case .ping:
                            try await outbound.write(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
                        case .connectionClose:
                            try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData))
                            group.cancelAll()
                            return
                        default:
                            break
                        }
                    }
                } catch {}
                group.cancelAll()
            }
        }
        for stream in self.streams.withLock({ Array($0.values) }) { stream.cancel() }
        for client in self.clients.withLock({ Array($0.values) }) { await client.close() }
    }

    private func client(_ service: String) -> RPCClient {
        self.clients.withLock { clients in
            if let client = clients[service] { return client }
            let client = RPCClient(configuration: ClientConfiguration(
                socketPath: (self.runtimeDirectory as NSString).appendingPathComponent("\(service).sock"),
                auth: self.token.map(Auth.init(token:))))
            clients[service] = client
            return client
        }
    }

    private func handle(_ text: String, _ outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>) async {
        guard case .object(let envelope)? = try? JSONParser.parse(text), let method = envelope["method"]?.stringValue else { return }
        let id = envelope["id"].flatMap { try? JSONValueDecoding.decode(RequestID.self, from: $0) }
        let params = envelope["params"] ?? [:]
        func send(_ bytes: Data) async {
            try? await outbound.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: bytes)))
        }
        if method == "rpc.cancel" {
            if let target = params["id"] { self.streams.withLock { $0.removeValue(forKey: "\(target)") }?.cancel() }
            return
        }
        guard let id else { return }
        let client = self.client(String(method.split(separator: ".").first ?? ""))
        if method == "push.listen" {
            let task = Task {
                do {
                    for try await event in client.stream(method, params: params) {
                        switch event {
                        case .item(let item): await send((try? ReplyEncoding.result(id: id, item, continues: true)) ?? Data())
                        case .end(let end): await send((try? ReplyEncoding.result(id: id, end)) ?? Data())
                        }
                    }
                } catch let error as RPCError {
                    await send(ReplyEncoding.error(id: id, error))
                } catch {
                    await send(ReplyEncoding.error(id: id, RPCError(.cancelled, "\(error)")))
                }
            }
            self.streams.withLock { $0["\(Self.json(id))"] = task }
            await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
            return
        }
        do {
            let result = try await client.call(method, params: params)
            await send((try? ReplyEncoding.result(id: id, result)) ?? Data())
        } catch {
            await send(ReplyEncoding.error(id: id, error))
        }
    }

    private static func json(_ id: RequestID) -> JSONValue {
        switch id {
        case .int(let value): .int(value)
        case .string(let value): .string(value)
        }
    }
}
