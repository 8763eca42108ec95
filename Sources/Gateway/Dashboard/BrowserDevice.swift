import Foundation
import RPCCore

/// The signed-in browser as the parent device it is: every call goes through the same
/// allowlist and relay as a parent's phone on `/v1/rpc`, with the browser's own credential,
/// so the services check it again and a page can do nothing a parent's device cannot.
struct BrowserDevice: Sendable {
    let identity: DeviceIdentity
    let gateway: GatewayContext

    var family: String { self.identity.family }
    var deviceId: String { self.identity.deviceId }

    func call<P: Encodable & Sendable, R: Decodable & Sendable>(_ spec: MethodSpec<P, R>, _ params: P) async throws(RPCError) -> R {
        try await Self.call(spec, params, identity: self.identity, from: nil, gateway: self.gateway)
    }

    /// A call as `identity` (nil: the unauthenticated pairing steps, such as signing in,
    /// which pairing counts by the browser's address, `from`).
    static func call<P: Encodable & Sendable, R: Decodable & Sendable>(_ spec: MethodSpec<P, R>, _ params: P, identity: DeviceIdentity?, from: String?,
                                                                      gateway: GatewayContext) async throws(RPCError) -> R {
        let method = try gateway.relay.admit(spec.name, as: identity?.caller)
        let result = try await gateway.relay.call(method, params: GatewayContext.json(params), identity: identity, from: from)
        do {
            return try JSONValueDecoding.decode(R.self, from: try JSONParser.parse(bytes: result.bytes))
        } catch {
            throw RPCError(.internal, "the reply of \(spec.name) could not be read: \(error)")
        }
    }
}
