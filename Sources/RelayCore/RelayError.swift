/// Why the relay refuses a request: each with the HTTP status it answers with, a stable
/// code, and a sentence for the operator of the home server.
public enum RelayError: Error, Sendable, Equatable {
    case invalidRequest(String)
    /// The body is over the limit (bytes).
    case tooLarge(Int)
    case invalidHandle
    /// A handle past its lifetime, or sealed with a key the relay no longer holds: the
    /// device must seal its token again (the app does at its next launch).
    case handleExpired(String)
    case badSignature(String)
    case wrongServer
    case rateLimited(retryAfterSeconds: Int)
    /// APNs answered 429 for the device: it is pushed to too often.
    case deviceRateLimited(reason: String, retryAfterSeconds: Int)
    /// APNs says the token is no longer valid: drop the registration.
    case unregistered(reason: String)
    /// APNs could not be reached, or failed after retries.
    case apnsUnavailable(String)
    /// The relay has no room now for what the request needs (a full table of seen wakes or
    /// of limited addresses): refused rather than grown; try again after the seconds given.
    case busy(retryAfterSeconds: Int)

    public var status: Int {
        switch self {
        case .invalidRequest, .invalidHandle, .handleExpired: 400
        case .tooLarge: 413
        case .badSignature: 401
        case .wrongServer: 403
        case .unregistered: 410
        case .rateLimited, .deviceRateLimited: 429
        case .apnsUnavailable: 502
        case .busy: 503
        }
    }

    public var code: String {
        switch self {
        case .invalidRequest: "invalid_request"
        case .tooLarge: "too_large"
        case .invalidHandle, .handleExpired: "invalid_handle"
        case .badSignature: "bad_signature"
        case .wrongServer: "wrong_server"
        case .unregistered: "unregistered"
        case .rateLimited, .deviceRateLimited: "rate_limited"
        case .apnsUnavailable: "apns_unavailable"
        case .busy: "busy"
        }
    }

    public var message: String {
        switch self {
        case .invalidRequest(let why): why
        case .tooLarge(let limit): "the body is over \(limit) bytes; a seal or a wake is a few hundred"
        case .invalidHandle: "the handle was not sealed by this relay, or was changed: the device must register for wakes again"
        case .handleExpired(let why): "the handle \(why): the device must register for wakes again (the app does at its next launch)"
        case .badSignature(let why): "the wake is not signed as the relay requires: \(why)"
        case .wrongServer: "this handle belongs to another home server: a wake must be signed with the key the device paired with"
        case .rateLimited(let seconds): "too many requests from this server or address; try again in \(seconds) s"
        case .deviceRateLimited(let reason, let seconds): "APNs says this device is pushed to too often (\(reason)); try again in \(seconds) s"
        case .unregistered(let reason): "APNs no longer knows this device (\(reason)): drop the registration until the device registers again"
        case .apnsUnavailable(let why): "APNs did not take the push: \(why)"
        case .busy(let seconds): "the relay is busy and refuses rather than take on more; try again in \(seconds) s"
        }
    }
}
