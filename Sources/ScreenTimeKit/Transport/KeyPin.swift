import Crypto
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import RPCCore

/// The gateway's key pin, as the pairing URI carries it: the base64 SHA-256 of the
/// certificate's SubjectPublicKeyInfo (what `curl --pinnedpubkey sha256//<pin>` takes).
public struct KeyPin: Sendable, Hashable, CustomStringConvertible {
    public let sha256: [UInt8]

    /// Reads a pin (`sha256//` prefix allowed); nil unless it is base64 of 32 bytes.
    public init?(_ text: String) {
        let body = text.hasPrefix("sha256//") ? String(text.dropFirst("sha256//".count)) : text
        guard let data = Data(base64Encoded: body), data.count == 32 else { return nil }
        self.sha256 = Array(data)
    }

    public init(spki: [UInt8]) {
        self.sha256 = Array(SHA256.hash(data: spki))
    }

    public var description: String { Data(self.sha256).base64EncodedString() }

    /// The pin of a certificate's public key.
    public init(certificate: NIOSSLCertificate) throws {
        self.init(spki: try certificate.extractPublicKey().toSPKIBytes())
    }

    /// Whether `certificate`'s key is the pinned one.
    public func matches(_ certificate: NIOSSLCertificate) -> Bool {
        guard let pin = try? KeyPin(certificate: certificate) else { return false }
        return pin == self
    }
}

/// Checks a server's key against a pin in the TLS handshake itself (NIOSSL's custom
/// verification callback: the leaf's SubjectPublicKeyInfo SHA-256 must be the pin; no
/// chain, expiry or host name is looked at, the pin is the trust).
public enum PinnedHandshake {
    /// Connects to `host:port` and completes a TLS handshake that accepts only a leaf whose
    /// key matches `pin`; returns the open channel (bytes in and out, TLS below) and the
    /// leaf. Throws `pin_mismatch` when the key differs, `unavailable` when the server
    /// cannot be reached.
    public static func connect(
        host: String, port: Int, pin: KeyPin, timeout: Duration = .seconds(10),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(RPCError) -> (channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, certificate: NIOSSLCertificate) {
        let check = Check(host: host, port: port, pin: pin)
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            channel = try await check.connect(timeout: timeout, group: group) { channel in
                try channel.pipeline.syncOperations.addHandler(HandshakeWatcher())
                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        } catch {
            throw RPCError(.unavailable, ConnectionFailure.sentence(error, host: host, port: port))
        }
        do {
            // The handshake ends in a user event (success) or an error that closes the channel.
            try await HandshakeWatcher.wait(on: channel.channel, timeout: timeout)
        } catch {
            await Self.discard(channel)
            if let refusal = check.refusal { throw refusal }
            throw RPCError(.unavailable, "the TLS handshake with \(host):\(port) failed: \(error)")
        }
        if let refusal = check.refusal {
            await Self.discard(channel)
            throw refusal
        }
        guard let certificate = check.certificate else {
            await Self.discard(channel)
            throw RPCError(.unavailable, "the TLS handshake with \(host):\(port) did not complete")
        }
        return (channel, certificate)
    }

    /// The client's TLS settings: TLS 1.2 or later; the certificate is not verified by a
    /// chain (the pin is the trust, checked by ``Check``).
    static func context() throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .noHostnameVerification
        return try NIOSSLContext(configuration: tls)
    }

    /// One connection's pin check: the TLS handler whose verification callback accepts
    /// only a leaf with the pinned key, and what it saw.
    final class Check: Sendable {
        let host: String
        let port: Int
        let pin: KeyPin
        private let seen = Locked<NIOSSLCertificate?>(nil)
        private let mismatch = Locked<String?>(nil)

        init(host: String, port: Int, pin: KeyPin) {
            self.host = host
            self.port = port
            self.pin = pin
        }

        /// A TCP connection to the host and port within `timeout`, this check's TLS handler
        /// first in its pipeline, then what `rest` adds (on the channel's event loop).
        func connect<Output: Sendable>(timeout: Duration, group: any EventLoopGroup,
                                       _ rest: @escaping @Sendable (any Channel) throws -> Output) async throws -> Output {
            let context = try PinnedHandshake.context()
            return try await ClientBootstrap(group: group)
                .connectTimeout(TimeAmount(timeout))
                .connect(host: self.host, port: self.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(try self.handler(context: context))
                        return try rest(channel)
                    }
                }
        }

        /// The leaf whose key matched, once the handshake checked it.
        var certificate: NIOSSLCertificate? { self.seen.get() }

        /// `pin_mismatch` when the server showed another key (or none).
        var refusal: RPCError? {
            self.mismatch.get().map { RPCError(.pinMismatch, "refusing \(self.host):\(self.port): \($0); pair again if the server's key really changed") }
        }

        func handler(context: NIOSSLContext) throws -> NIOSSLClientHandler {
            let (pin, seen, mismatch) = (self.pin, self.seen, self.mismatch)
            return try NIOSSLClientHandler(context: context, serverHostname: PinnedHandshake.isAddress(self.host) ? nil : self.host) { certificates, promise in
                guard let leaf = certificates.first else {
                    mismatch.set("the server sent no certificate")
                    promise.succeed(.failed)
                    return
                }
                if pin.matches(leaf) {
                    seen.set(leaf)
                    promise.succeed(.certificateVerified)
                } else {
                    let actual = (try? KeyPin(certificate: leaf))?.description ?? "unreadable"
                    mismatch.set("the server's key is sha256//\(actual), the pairing pinned sha256//\(pin)")
                    promise.succeed(.failed)
                }
            }
        }
    }

    /// The pin check alone: connects, checks, closes, and returns the leaf.
    public static func fetchCertificate(host: String, port: Int, pin: KeyPin, timeout: Duration = .seconds(10)) async throws(RPCError) -> NIOSSLCertificate {
        let (channel, certificate) = try await self.connect(host: host, port: port, pin: pin, timeout: timeout)
        await Self.discard(channel)
        return certificate
    }

    /// Closes a channel nobody will use (an async channel must be finished, not dropped).
    static func discard<Inbound, Outbound>(_ channel: NIOAsyncChannel<Inbound, Outbound>) async {
        try? await channel.executeThenClose { _, _ in }
    }

    static func isAddress(_ host: String) -> Bool {
        host.contains(":") || host.split(separator: ".").allSatisfy { UInt8($0) != nil }
    }
}

/// Reports the end of the TLS handshake: `TLSUserEvent.handshakeCompleted`, or the error.
private final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = ByteBuffer
    private let done = Locked<EventLoopPromise<Void>?>(nil)

    func handlerAdded(context: ChannelHandlerContext) {
        self.done.set(context.eventLoop.makePromise())
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            self.done.get()?.succeed(())
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.done.get()?.fail(error)
        context.close(promise: nil)
    }

    /// Removed (the channel closed, connected or not): a promise never completed is failed,
    /// not leaked.
    func handlerRemoved(context: ChannelHandlerContext) {
        self.done.get()?.fail(ChannelError.ioOnClosedChannel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.done.get()?.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    static func wait(on channel: any Channel, timeout: Duration) async throws {
        let future: EventLoopFuture<Void> = try await channel.eventLoop.submit {
            let watcher = try channel.pipeline.syncOperations.handler(type: HandshakeWatcher.self)
            guard let promise = watcher.done.get() else { throw ChannelError.ioOnClosedChannel }
            let timer = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) { promise.fail(ChannelError.connectTimeout(TimeAmount(timeout))) }
            promise.futureResult.whenComplete { _ in timer.cancel() }
            return promise.futureResult
        }.get()
        try await future.get()
    }
}
