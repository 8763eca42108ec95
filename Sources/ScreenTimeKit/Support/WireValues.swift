import Foundation
import RPCClient
import RPCCore

/// Codable values to and from the wire's JSON, with the wire's dates (RFC 3339, UTC,
/// milliseconds).
enum WireValues {
    static func encode<T: Encodable>(_ value: T) throws(RPCError) -> JSONValue {
        do {
            let data = try RPCJSON.makeEncoder().encode(value)
            return try JSONParser.parse(bytes: [UInt8](data))
        } catch {
            throw RPCError(.invalidParams, "\(T.self) could not be encoded: \(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue, what: @autoclosure () -> String = "") throws(RPCError) -> T {
        do {
            return try JSONValueDecoding.decode(T.self, from: value)
        } catch {
            let subject = what()
            throw RPCError(.invalidJSON, "\(subject.isEmpty ? "a reply" : subject) is not a \(T.self): \(error)")
        }
    }
}

/// The device's side of a session: the transport, and the credential it calls with (none
/// before pairing). Shared by every part of the kit.
final class Session: Sendable {
    let transport: any Transport
    private let credentialBox: Mutex<DeviceIdentity?>

    init(transport: any Transport, identity: DeviceIdentity?) {
        self.transport = transport
        self.credentialBox = Mutex(identity)
    }

    var identity: DeviceIdentity? { self.credentialBox.withLock { $0 } }

    func setIdentity(_ identity: DeviceIdentity?) { self.credentialBox.withLock { $0 = identity } }

    /// The identity, or `unauthorized` when the device is not paired yet.
    func requireIdentity() throws(RPCError) -> DeviceIdentity {
        guard let identity = self.identity else {
            throw RPCError(.unauthorized, "this device has no credential yet: pair it first (a child accepts an invitation, a parent enrolls)")
        }
        return identity
    }

    /// Calls a declared method as this device (or, with `anonymous`, with no credential).
    func call<P, R>(_ spec: MethodSpec<P, R>, _ params: P, anonymous: Bool = false, timeout: Duration? = nil) async throws(RPCError) -> R {
        try await self.transport.call(spec, params, auth: anonymous ? nil : self.identity.map { Auth(token: $0.token) }, timeout: timeout)
    }

    /// Opens a declared stream as this device.
    func stream<P, I, E>(_ spec: StreamSpec<P, I, E>, _ params: P) throws(RPCError) -> AsyncThrowingStream<StreamEvent<JSONValue, JSONValue>, any Error> {
        let auth = self.identity.map { Auth(token: $0.token) }
        return self.transport.stream(TransportRequest(method: spec.name, params: try WireValues.encode(params), auth: auth))
    }
}

import Synchronization

/// A value behind a lock, shareable with escaping closures (NIO callbacks, handlers).
final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func get() -> Value { self.value.withLock { $0 } }
    func set(_ newValue: Value) { self.value.withLock { $0 = newValue } }
}
