import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import RPCCore

/// Stands between SwiftNIO's HTTP/1 decoder and everything above it, for every request of
/// a connection: what the decoder cannot parse, and what it parses but no server should
/// take, is answered at once with its status (``Refusal``) and the connection is closed,
/// reading no more of it. Also puts HSTS on every response that lacks it, and ends an
/// HTTP/1.0 exchange with a close.
///
/// It is the connection's first reader of request heads, before the WebSocket upgrade: a
/// malformed first request is answered here like any other (the upgrade handler would
/// only wait for a head that never comes). On an upgrade it takes itself out of the
/// pipeline as the `101` goes by, before the HTTP decoder is removed and WebSocket
/// frames flow.
final class RequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    struct Limits {
        /// Request line and headers together, in bytes (`--max-header-size`).
        var headerSize: Int
        /// A request body, in bytes (`--max-body-size`): a larger `Content-Length` is
        /// refused before any of the body is read.
        var bodySize: Int
    }

    private let limits: Limits
    private let logger: Logger
    /// Refused: nothing more is read or answered; the connection is closing.
    private var refused = false
    /// A response has begun and not yet ended.
    private var responding = false
    /// The response under way (or the next) is the connection's last.
    private var closeAfterResponse = false
    /// A WebSocket upgrade was asked for and passed the checks: what comes in from now on
    /// goes by unread (the upgrade handler takes it; once the HTTP decoder is gone it is
    /// the WebSocket's bytes).
    private var upgrading = false
    /// The `101` has been written: this guard leaves the pipeline once it is flushed.
    private var leaving = false

    /// Whether the bytes before the decoder held a bare LF (what tells a request line that
    /// ended in LF from one with a version the gateway does not speak).
    private let lineEnds: LineEndWatch

    init(limits: Limits, logger: Logger, lineEnds: LineEndWatch = LineEndWatch()) {
        self.limits = limits
        self.logger = logger
        self.lineEnds = lineEnds
    }

    /// Puts a guard right after the HTTP decoder of `channel`, and a watch of its line ends
    /// right before it. Called on its event loop.
    static func install(on channel: any Channel, limits: Limits, logger: Logger) throws {
        let operations = channel.pipeline.syncOperations
        let decoder = try operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        let lineEnds = LineEndWatch()
        try operations.addHandler(lineEnds, position: .before(decoder))
        try operations.addHandler(RequestGuard(limits: limits, logger: logger, lineEnds: lineEnds), position: .after(decoder))
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.refused else { return }
        guard !self.upgrading else { return context.fireChannelRead(data) }
        if case .head(let head) = Self.unwrapInboundIn(data) {
            if let refusal = Refusal.check(head, limits: self.limits) {
                return self.refuse(context: context, refusal, head: head)
            }
            // HTTP/1.0 has no persistent connections unless both sides negotiate them; we
            // never do.
            if head.version.minor == 0 { self.closeAfterResponse = true }
            if Refusal.asksForWebSocket(head) { self.upgrading = true }
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guard !self.refused else { return }
        // llhttp reads a request line that ends in a bare LF as an invalid version: a bad
        // request (400), not a version the gateway does not speak (505).
        let refusal = parserError == .invalidVersion && self.lineEnds.sawBareLineFeed
            ? Refusal(.badRequest, .invalidRequest, "each line of a request ends in CRLF, not a bare LF", reason: "bare LF")
            : Refusal(parserError)
        self.refuse(context: context, refusal, head: nil)
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case .head(var head):
            if !head.headers.contains(name: "strict-transport-security") {
                head.headers.add(name: "Strict-Transport-Security", value: JSONResponse.strictTransportSecurity)
            }
            if head.status == .switchingProtocols {
                // The WebSocket takes over the connection: no HTTP passes here any more.
                self.leaving = true
                context.write(Self.wrapOutboundOut(.head(head)), promise: promise)
                return
            }
            if self.closeAfterResponse { head.headers.replaceOrAdd(name: "Connection", value: "close") }
            self.responding = true
            context.write(Self.wrapOutboundOut(.head(head)), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            self.responding = false
            guard self.closeAfterResponse else { return context.write(data, promise: promise) }
            let written = promise ?? context.eventLoop.makePromise()
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            context.write(data, promise: written)
        }
    }

    func flush(context: ChannelHandlerContext) {
        context.flush()
        // Out of the pipeline before the upgrade handler adds the WebSocket's handlers
        // (which it does once the `101` is written), not inside `write`: a handler that
        // leaves there would not pass on the flush of the same `writeAndFlush`.
        if self.leaving {
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            // The WebSocket's bytes are not HTTP lines.
            if let watch = try? context.pipeline.syncOperations.context(handler: self.lineEnds) {
                context.pipeline.syncOperations.removeHandler(context: watch, promise: nil)
            }
        }
    }

    // MARK: Refusing

    /// Answers with the refusal's status and closes; reads nothing more. A response
    /// already under way is finished first, and the connection closed after it.
    private func refuse(context: ChannelHandlerContext, _ refusal: Refusal, head: HTTPRequestHead?) {
        self.refused = true
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        var metadata: Logger.Metadata = [
            "remote_address": "\(context.channel.remoteAddress?.ipAddress ?? "unknown")",
            "http_status": "\(refusal.status.code)", "reason": "\(refusal.reason)",
        ]
        if let head {
            metadata["http_method"] = "\(head.method.rawValue)"
            metadata["path"] = "\(head.uri.prefix(200))"
        }
        self.logger.notice("malformed request refused", metadata: metadata)
        guard !self.responding else {
            self.closeAfterResponse = true
            return
        }
        // The gateway's JSON error response (its headers, HSTS among them), written here
        // below Hummingbird, so in SwiftNIO's HTTP/1 types.
        var extra: HTTPFields = [.connection: "close"]
        if let header = refusal.header, let name = HTTPField.Name(header.name) { extra[name] = header.value }
        let response = JSONResponse.error(refusal.error, extra: extra)
        let body = ByteBuffer(bytes: ReplyEncoding.error(id: nil, refusal.error))
        let head = HTTPResponseHead(version: .http1_1, status: refusal.status, headers: HTTPHeaders(response.headers))
        context.write(Self.wrapOutboundOut(.head(head)), promise: nil)
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Why a request is refused before anything serves it: its HTTP status, the wire's error
/// code and a sentence (docs/operations.md, "Gateway limits").
struct Refusal {
    var status: HTTPResponseStatus
    var error: RPCError
    /// A header the status calls for (`Sec-WebSocket-Version` on a 426).
    var header: (name: String, value: String)?
    /// What the log line says.
    var reason: String

    init(_ status: HTTPResponseStatus, _ code: ErrorCode, _ message: String, reason: String, header: (name: String, value: String)? = nil) {
        self.status = status
        self.error = RPCError(code, message)
        self.reason = reason
        self.header = header
    }

    /// What SwiftNIO's decoder (llhttp) could not parse.
    init(_ error: HTTPParserError) {
        switch error {
        case .headerOverflow:
            self.init(.requestHeaderFieldsTooLarge, .frameTooLarge, "the request line or headers are over the gateway's limit", reason: "headers too large")
        case .invalidMethod:
            self.init(.notImplemented, .invalidRequest, "the gateway knows GET, HEAD and POST only", reason: "unknown method")
        case .paused:
            // llhttp pauses on `PRI * HTTP/2.0`, the HTTP/2 connection preface.
            self.init(.httpVersionNotSupported, .invalidRequest, "the gateway speaks HTTP/1.1 (and 1.0), not HTTP/2", reason: "HTTP/2 preface")
        case .invalidVersion:
            self.init(.httpVersionNotSupported, .invalidRequest, "the gateway speaks HTTP/1.1 (and 1.0)", reason: "unsupported HTTP version")
        case .invalidContentLength, .unexpectedContentLength:
            self.init(.badRequest, .invalidRequest, "the request's length is ambiguous: one Content-Length of digits, or Transfer-Encoding: chunked, not both", reason: "ambiguous length")
        default:
            self.init(.badRequest, .invalidRequest, "the request is not valid HTTP/1.1", reason: "malformed (\(error))")
        }
    }

    /// What a request head parsed by the decoder may still not be.
    static func check(_ head: HTTPRequestHead, limits: RequestGuard.Limits) -> Refusal? {
        guard head.version.major == 1, head.version.minor <= 1 else {
            return Refusal(.httpVersionNotSupported, .invalidRequest, "the gateway speaks HTTP/1.1 (and 1.0)", reason: "unsupported HTTP version \(head.version)")
        }
        guard head.uri.utf8.count <= limits.headerSize else {
            return Refusal(.uriTooLong, .frameTooLarge, "the request's target is over the gateway's limit of \(limits.headerSize) bytes", reason: "target too long")
        }
        // RFC 9112, 3.2: exactly one Host in HTTP/1.1, at most one in 1.0.
        let hosts = head.headers["Host"]
        guard hosts.count <= 1, hosts.count == 1 || head.version.minor == 0 else {
            return Refusal(.badRequest, .invalidRequest, "a request needs exactly one Host header", reason: hosts.isEmpty ? "no Host" : "several Host headers")
        }
        let codings = head.headers["Transfer-Encoding"]
        let lengths = head.headers["Content-Length"]
        if !codings.isEmpty {
            guard lengths.isEmpty else {
                return Refusal(.badRequest, .invalidRequest, "the request's length is ambiguous: Content-Length or Transfer-Encoding, not both", reason: "ambiguous length")
            }
            let named = codings.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard named == ["chunked"] else {
                return Refusal(.notImplemented, .invalidRequest, "the gateway takes no transfer coding but chunked", reason: "transfer coding \(codings.joined(separator: ","))")
            }
        }
        if let length = lengths.first {
            guard lengths.allSatisfy({ $0 == length }), !length.isEmpty, length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return Refusal(.badRequest, .invalidRequest, "the request's Content-Length is not one number", reason: "bad Content-Length")
            }
            // More digits than any limit has: too large whatever the number.
            guard length.count <= 18, let bytes = Int(length), bytes <= limits.bodySize else {
                return Refusal(.payloadTooLarge, .frameTooLarge, "the request body is over the gateway's limit of \(limits.bodySize) bytes", reason: "body too large")
            }
        }
        if Self.asksForWebSocket(head) {
            guard head.version.minor == 1 else {
                return Refusal(.badRequest, .invalidRequest, "a WebSocket is opened with HTTP/1.1", reason: "WebSocket upgrade over HTTP/1.0")
            }
            guard head.headers["Sec-WebSocket-Version"] == ["13"] else {
                return Refusal(.upgradeRequired, .invalidRequest, "the gateway speaks WebSocket version 13", reason: "WebSocket version",
                               header: ("Sec-WebSocket-Version", "13"))
            }
            let keys = head.headers["Sec-WebSocket-Key"]
            guard keys.count == 1, let key = Data(base64Encoded: keys[0].trimmingCharacters(in: .whitespaces)), key.count == 16 else {
                return Refusal(.badRequest, .invalidRequest, "Sec-WebSocket-Key must be 16 bytes in base64", reason: "bad Sec-WebSocket-Key")
            }
        }
        return nil
    }

    /// `Upgrade: websocket` (what SwiftNIO's upgrade handler would act on).
    static func asksForWebSocket(_ head: HTTPRequestHead) -> Bool {
        head.headers["Upgrade"].contains { $0.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "websocket" } }
    }
}

/// Watches the bytes on their way to the HTTP decoder for a line feed with no carriage
/// return before it. It changes nothing; it only remembers.
final class LineEndWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private(set) var sawBareLineFeed = false
    private var last: UInt8 = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !self.sawBareLineFeed {
            let bytes = Self.unwrapInboundIn(data).readableBytesView
            for byte in bytes {
                if byte == UInt8(ascii: "\n"), self.last != UInt8(ascii: "\r") {
                    self.sawBareLineFeed = true
                    break
                }
                self.last = byte
            }
        }
        context.fireChannelRead(data)
    }
}
