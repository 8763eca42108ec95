import NIOCore

/// When a WebSocket's peer last sent anything at all (a message, a pong, a TLS record):
/// the keep-alive's proof that the device is still there. Sits first in the pipeline,
/// under TLS, so every read counts; added when the socket opens.
final class PeerActivity: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private(set) var lastRead = NIODeadline.now()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.lastRead = .now()
        context.fireChannelRead(data)
    }
}

/// What a WebSocket's keep-alive timer knows between its ticks, one a ping interval.
struct KeepAlive: Sendable {
    enum Due: Sendable {
        case nothing
        case ping
        /// Nothing came from the peer since the last ping: it is gone.
        case close
    }

    var timer: RepeatedTask?
    var pingSent: NIODeadline?
    var deadPeer = false

    mutating func tick(lastRead: NIODeadline) -> Due {
        if let sent = self.pingSent, lastRead < sent {
            self.deadPeer = true
            return .close
        }
        self.pingSent = .now()
        return .ping
    }
}
