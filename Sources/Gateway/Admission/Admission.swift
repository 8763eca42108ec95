import GatewayAPI
import RPCCore

/// A device's request as it came, parsed once: its envelope's head and its params. Every
/// way a request is served (on the socket's event loop, by a task, over HTTP) starts from
/// this one parse.
struct DeviceRequest: Sendable {
    let head: RequestHead
    let params: JSONValue?

    /// The request in a message's bytes, or the error to answer it with.
    static func parse(_ bytes: [UInt8]) -> Result<DeviceRequest, RequestHead.Failure> {
        RequestHead.parseRequest(bytes: bytes).map { DeviceRequest(head: $0.head, params: $0.params) }
    }
}

/// What a device's request is, once admitted: decided once (``GatewayContext/admit(_:identity:transport:)``),
/// whichever way it is then served.
enum Admission: Sendable {
    /// `rpc.ping`: the gateway answers it itself.
    case ping
    /// `rpc.describe`: the methods a device may call.
    case describe(DescribeParams)
    /// `rpc.cancel` of a request of the same WebSocket.
    case cancel(CancelParams)
    /// `gateway.authenticate`: the credential for the rest of a WebSocket.
    case authenticate(AuthenticateParams)
    /// A method of one of the services that this device (its role, or none) may call.
    case relayed(DeviceMethod)
}

extension GatewayContext {
    /// How the request came: the WebSocket carries streams, `rpc.cancel` and
    /// `gateway.authenticate`; HTTP carries one unary call a request.
    enum Transport { case http, webSocket }

    /// Admits a device's request, once: the gateway's own methods by name, every other one
    /// through the allowlist for the device's role (``ServiceRelay/admit(_:as:)``), its params
    /// decoded where the gateway reads them. Refusals are the errors the device is told.
    func admit(_ request: DeviceRequest, identity: DeviceIdentity?, transport: Transport) throws(RPCError) -> Admission {
        let name = request.head.method
        switch name {
        case Builtin.ping.name:
            return .ping
        case Builtin.describe.name:
            return .describe(try ParamsDecoding.decode(DescribeParams.self, params: request.params))
        case Builtin.cancel.name, GatewayMethods.authenticate.name:
            guard transport == .webSocket else { throw RPCError(.invalidRequest, "\(name) is for a WebSocket at /v1/ws") }
            if name == Builtin.cancel.name { return .cancel(try ParamsDecoding.decode(CancelParams.self, params: request.params)) }
            return .authenticate(try ParamsDecoding.decode(AuthenticateParams.self, params: request.params))
        default:
            let method = try self.relay.admit(name, as: identity?.caller)
            if method.kind == .stream {
                guard transport == .webSocket else {
                    throw RPCError(.invalidRequest, "\(name) is a stream: call it on a WebSocket at /v1/ws, where its replies can follow one another")
                }
                guard request.head.id != nil else { throw RPCError(.invalidRequest, "\(name) is a stream; give the request an id") }
            }
            return .relayed(method)
        }
    }
}
