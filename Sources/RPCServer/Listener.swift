import Glibc
import NIOCore
import NIOPosix
import RPCCore
import SystemdKit

/// Why a service could not start listening; the message says what to do.
public struct ListenError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// Preparing a socket path for `bind` when the service is started by hand.
enum SocketPath {
    /// Removes a stale socket left by a process that died; refuses to touch a live one or
    /// anything that is not a socket.
    static func clear(_ path: String) throws(ListenError) {
        var info = stat()
        if lstat(path, &info) != 0 {
            if errno == ENOENT { return }
            throw ListenError(description: "cannot inspect \(path): \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw ListenError(description: "\(path) exists and is not a socket; remove it or choose another --socket path")
        }
        if self.isLive(path) {
            throw ListenError(description: "another process is listening on \(path); stop it first (or use another --runtime-dir)")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw ListenError(description: "cannot remove the stale socket \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// A sibling name to bind under before the socket is moved to `path`.
    static func staging(for path: String) -> String {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        return "\(directory)/.bind-\(getpid())"
    }

    /// Whether a process accepts connections on `path` (a connect succeeds).
    static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }
}

/// Counts connections as the kernel hands them over, before their pipeline is set up on
/// their own event loop, so idle exit and shutdown can tell whether one is on its way.
final class AcceptCounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = any Channel
    let state: ServerState

    init(state: ServerState) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.state.noteAccepted()
        context.fireChannelRead(data)
    }
}

/// One bound or inherited listening socket.
struct Listener: Sendable {
    var channel: any Channel
    /// Shown in logs and `STATUS=`: the path, or `fd 3 (store)`.
    var label: String
    /// The path to unlink at exit when this process bound it itself.
    var ownedPath: String?
    /// The descriptor systemd passed, when inherited.
    var inheritedFD: Int32? = nil

    /// A connection is queued in the kernel and not yet accepted (inherited sockets only).
    var hasPendingConnection: Bool {
        self.inheritedFD.map(SocketActivation.hasPendingConnection) ?? false
    }

    static func open(
        _ endpoint: Endpoint,
        group: any EventLoopGroup,
        state: ServerState,
        childChannelInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> [Listener] {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptCounter(state: state))
                }
            }
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            // Each connection keeps its receive buffer between reads: most requests are a
            // few hundred bytes, and ten thousand idle listeners would each hold NIO's
            // default 2 KiB. The buffer still grows for larger frames.
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536))
            .childChannelInitializer(childChannelInitializer)
        switch endpoint {
        case .inherited(let fds):
            guard !fds.isEmpty else { throw ListenError(description: "socket activation passed no sockets") }
            var listeners: [Listener] = []
            for fd in fds {
                guard SocketActivation.isListeningUnixStream(fd.fd) else {
                    throw ListenError(description: "fd \(fd.fd) (\(fd.name)) is not a listening AF_UNIX stream socket; check the .socket unit's ListenStream=")
                }
                let channel = try await bootstrap.withBoundSocket(fd.fd).get()
                listeners.append(Listener(channel: channel, label: "fd \(fd.fd) (\(fd.name))", ownedPath: nil, inheritedFD: fd.fd))
            }
            return listeners
        case .path(let path, let mode):
            try SocketPath.clear(path)
            // The mode decides who may connect (the screentime group), so the socket must
            // never be reachable with another: bind under a private name, set the mode, then
            // rename it into place (atomic), rather than trusting the umask.
            let staging = SocketPath.staging(for: path)
            unlink(staging)
            let channel = try await bootstrap.bind(unixDomainSocketPath: staging).get()
            if chmod(staging, mode_t(mode)) != 0 || rename(staging, path) != 0 {
                let reason = String(cString: strerror(errno))
                try? await channel.close()
                unlink(staging)
                throw ListenError(description: "cannot put a socket with mode \(String(mode, radix: 8)) at \(path): \(reason)")
            }
            return [Listener(channel: channel, label: path, ownedPath: path)]
        }
    }
}
