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

/// What a WebSocket's keep-alive timer knows between its ticks: it ticks every
/// min(ping interval, credential recheck), pings every `pingEvery` ticks and rechecks
/// every `recheckEvery`.
struct KeepAlive: Sendable {
    struct Due: OptionSet, Sendable {
        let rawValue: Int
        static let ping = Due(rawValue: 1)
        static let recheck = Due(rawValue: 2)
        /// Nothing came from the peer since the last ping: it is gone.
        static let close = Due(rawValue: 4)
        static let nothing: Due = []
    }

    var timer: RepeatedTask?
    /// The credential to check again; nil until the socket is authenticated.
    var token: String?
    var ticks = 0
    var pingSent: NIODeadline?
    /// A recheck is running: the next waits for it.
    var checking = false
    var deadPeer = false

    mutating func tick(lastRead: NIODeadline, pingEvery: Int, recheckEvery: Int) -> Due {
        self.ticks += 1
        var due = Due.nothing
        if self.ticks % pingEvery == 0 {
            if let sent = self.pingSent, lastRead < sent {
                self.deadPeer = true
                return .close
            }
            self.pingSent = .now()
            due.insert(.ping)
        }
        if self.token != nil, !self.checking, self.ticks % recheckEvery == 0 {
            self.checking = true
            due.insert(.recheck)
        }
        return due
    }
}
