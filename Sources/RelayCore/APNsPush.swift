import Foundation
import WireJSON

/// One push as APNs takes it: `POST /3/device/<token>` on HTTP/2 with these headers and
/// payload (see Apple's "Sending notification requests to APNs").
public struct APNsPush: Sendable {
    public var token: String
    public var headers: [(String, String)]
    public var payload: [UInt8]

    public var path: String { "/3/device/\(self.token)" }

    /// The push for a wake: `background` is silent (`content-available`, priority 5, as
    /// Apple requires for background pushes); `alert` is a visible, content-free "New
    /// activity" with `mutable-content`, priority 10, that the app's notification service
    /// extension replaces after fetching from the home server.
    public static func wake(_ kind: WakeRequest.Kind, registration: WakeRegistration, providerToken: String, collapseId: String?,
                            ttlSeconds: Int?, now: Date = Date()) -> APNsPush {
        var headers = Self.headers(registration: registration, providerToken: providerToken, background: kind == .background,
                                   expiration: ttlSeconds.map { Int64(now.timeIntervalSince1970) + Int64($0) } ?? 0)
        if let collapseId { headers.append(("apns-collapse-id", collapseId)) }
        let payload = kind == .background
            ? #"{"aps":{"content-available":1}}"#
            : #"{"aps":{"alert":{"title":"New activity"},"mutable-content":1,"sound":"default"}}"#
        return APNsPush(token: registration.token, headers: headers, payload: Array(payload.utf8))
    }

    /// The key under which a handle delivery carries the handle, beside `aps`.
    public static let handleKey = "wakeHandle"

    /// The push that hands a device its handle: silent, with the handle and nothing else,
    /// so that only the app holding the token ever sees it. APNs keeps it five minutes for
    /// a device that is briefly offline.
    public static func handleDelivery(_ handle: String, registration: WakeRegistration, providerToken: String, now: Date = Date()) -> APNsPush {
        let headers = Self.headers(registration: registration, providerToken: providerToken, background: true,
                                   expiration: Int64(now.timeIntervalSince1970) + 300)
        let payload = #"{"aps":{"content-available":1},"\#(Self.handleKey)":"\#(handle)"}"#
        return APNsPush(token: registration.token, headers: headers, payload: Array(payload.utf8))
    }

    private static func headers(registration: WakeRegistration, providerToken: String, background: Bool, expiration: Int64) -> [(String, String)] {
        [
            ("authorization", "bearer \(providerToken)"),
            ("apns-topic", registration.topic),
            ("apns-push-type", background ? "background" : "alert"),
            ("apns-priority", background ? "5" : "10"),
            ("apns-expiration", String(expiration)),
        ]
    }

    /// The handle in a push's payload (as the app's `userInfo` holds it), if it is a handle
    /// delivery.
    public static func handle(inPayload payload: [String: Any]) -> String? {
        guard let handle = payload[Self.handleKey] as? String, HandleSealer.isWellFormed(handle) else { return nil }
        return handle
    }

    /// APNs's hosts.
    public static func host(_ environment: WakeRegistration.Environment) -> String {
        environment == .production ? "https://api.push.apple.com" : "https://api.sandbox.push.apple.com"
    }
}

/// What APNs answered, as the relay acts on it.
public enum APNsOutcome: Sendable, Equatable {
    case delivered(apnsId: String?)
    /// 410, or 400 `BadDeviceToken` / `DeviceTokenNotForTopic`: the token is gone.
    case unregistered(reason: String)
    /// 403 `ExpiredProviderToken`: renew the provider token and send again (once).
    case expiredProviderToken
    /// 429: this device is pushed to too often. Not retried: a retry soon makes it worse;
    /// the caller backs off.
    case tooManyRequests(reason: String)
    /// 5xx: try again later.
    case retry(status: Int, reason: String)
    /// Anything else: the request itself is wrong (a bug, or a misconfigured relay).
    case refused(status: Int, reason: String)

    public static func of(status: Int, apnsId: String?, body: [UInt8]) -> APNsOutcome {
        let reason = (try? RPCJSON.decode([String: String].self, from: body))?["reason"] ?? ""
        switch status {
        case 200: return .delivered(apnsId: apnsId)
        case 410: return .unregistered(reason: reason.isEmpty ? "Unregistered" : reason)
        case 400 where ["BadDeviceToken", "DeviceTokenNotForTopic"].contains(reason): return .unregistered(reason: reason)
        case 403 where reason == "ExpiredProviderToken": return .expiredProviderToken
        case 429: return .tooManyRequests(reason: reason.isEmpty ? "TooManyRequests" : reason)
        case 500...599: return .retry(status: status, reason: reason)
        default: return .refused(status: status, reason: reason)
        }
    }
}
