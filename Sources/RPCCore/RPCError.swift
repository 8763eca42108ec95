/// A stable, snake_case error code: the part of an error a program matches on.
///
/// The list below is the contract documented in `docs/protocol.md`; services may add
/// their own codes (the record store adds `pairing_unconfirmed`, the pairing service
/// `invitation_invalid`), always snake_case.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.rawValue)
    }

    /// The frame is not a valid frame (empty, or cut short before its declared length).
    public static let invalidFrame = ErrorCode("invalid_frame")
    /// The frame's declared length is over the service's maximum frame size.
    public static let frameTooLarge = ErrorCode("frame_too_large")
    /// The payload is not UTF-8 JSON.
    public static let invalidJSON = ErrorCode("invalid_json")
    /// The JSON is not a request object: missing or mistyped `id`, `method`, `params`, `auth`.
    public static let invalidRequest = ErrorCode("invalid_request")
    /// No method of that name on this service.
    public static let methodNotFound = ErrorCode("method_not_found")
    /// A parameter is missing, mistyped or out of range; `data.parameter` names it.
    public static let invalidParams = ErrorCode("invalid_params")
    /// The call needs credentials and had none, or they are not valid.
    public static let unauthorized = ErrorCode("unauthorized")
    /// The device's credential was revoked: a parent removed the device from the family
    /// (or replaced it). Nothing it sends is taken again; pairing it again gives it a new
    /// credential. A client stops trying (it is not a connection problem) and says so.
    public static let deviceRevoked = ErrorCode("device_revoked")
    /// The credentials are valid but do not allow this.
    public static let forbidden = ErrorCode("forbidden")
    /// The thing named does not exist.
    public static let notFound = ErrorCode("not_found")
    /// The request conflicts with the current state (changed since read, already exists).
    public static let conflict = ErrorCode("conflict")
    /// A limit was reached: connections, requests in flight, sizes, counts.
    public static let limitExceeded = ErrorCode("limit_exceeded")
    /// Too many requests in too short a time; retry later.
    public static let rateLimited = ErrorCode("rate_limited")
    /// The service cannot serve this now (shutting down, a dependency is down); retry later.
    public static let unavailable = ErrorCode("unavailable")
    /// The request was cancelled (`rpc.cancel`) before it finished.
    public static let cancelled = ErrorCode("cancelled")
    /// The call did not finish within its deadline (reported by the client).
    public static let timeout = ErrorCode("timeout")
    /// A bug or an unexpected failure in the service; its journal has the details.
    public static let `internal` = ErrorCode("internal")

    /// Every code of the base protocol, in documentation order.
    public static let protocolCodes: [ErrorCode] = [
        .invalidFrame, .frameTooLarge, .invalidJSON, .invalidRequest, .methodNotFound, .invalidParams,
        .unauthorized, .deviceRevoked, .forbidden, .notFound, .conflict, .limitExceeded, .rateLimited, .unavailable,
        .cancelled, .timeout, .internal,
    ]
}

/// An error as it travels on the wire: a stable code, a sentence a person can act on,
/// and optional structured data.
public struct RPCError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var data: JSONValue?

    public init(_ code: ErrorCode, _ message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var description: String { "\(self.code): \(self.message)" }

    /// `device_revoked` for `deviceId`, with the sentence every service and client says.
    public static func deviceRevoked(_ deviceId: String) -> RPCError {
        RPCError(.deviceRevoked, "this device (\(deviceId)) was removed from the family: its credential was revoked; to use it again, pair it again with a new invitation from a parent",
                 data: ["deviceId": .string(deviceId)])
    }

    /// `unavailable` raised by a client about its own connection to a service (it could not
    /// connect, send, or the connection closed), not a service's answer: its data says
    /// `"connection": "failed"`, which ``isConnectionFailure`` reads.
    /// A socket this user may not open says `"cause": "permission_denied"`
    /// (``isPermissionDenied``): waiting does not help, a group membership does.
    public static func connectionFailed(_ message: String, socket: String? = nil, permissionDenied: Bool = false) -> RPCError {
        var data: [String: JSONValue] = ["connection": "failed"]
        if let socket { data["socket"] = .string(socket) }
        if permissionDenied { data["cause"] = "permission_denied" }
        return RPCError(.unavailable, message, data: .object(data))
    }

    /// Whether a client could not connect because it may not open the socket (EACCES).
    public var isPermissionDenied: Bool {
        self.isConnectionFailure && self.data?["cause"] == "permission_denied"
    }

    /// Whether this is a client's own connection failure (``connectionFailed(_:socket:)``).
    public var isConnectionFailure: Bool {
        self.code == .unavailable && self.data?["connection"] == "failed"
    }

    /// `invalid_params` naming the parameter (a dotted path such as `params.zone.name`) and why.
    public static func invalidParams(_ parameter: String, _ reason: String) -> RPCError {
        RPCError(
            .invalidParams,
            "\(parameter) \(reason)",
            data: ["parameter": .string(parameter), "reason": .string(reason)]
        )
    }
}
