import APNs
import Foundation
import WireJSON
import Logging
import PushAPI
import RelayCore

/// How push reaches APNs: through the app publisher's relay (``RelayClient``), or, for a
/// family that builds the app with its own developer account, straight to APNs with the
/// family's own key (``DirectAPNs``). The registration's `handle` is the relay's sealed
/// handle in the first case, the device's token, topic and environment in the second.
protocol WakeRoute: Sendable {
    /// For logs: the relay's host, or APNs.
    var host: String { get }
    func wake(handle: String, kind: WakeKind, ttlSeconds: Int, now: Date) async -> WakeAnswer
    func shutdown() async
}

/// What an answer means for the registration.
enum WakeAnswer: Equatable {
    case sent(apnsId: String?)
    /// APNs no longer knows the device, or the handle is not this server's or this relay's:
    /// the registration is no use any more.
    case gone(WakeOutcome, String)
    case retry(reason: String, after: Duration?)
    /// This wake will never be taken (malformed, refused): dropped.
    case drop(String)
}

/// Wakes sent straight to APNs with the family's own key.
struct DirectAPNs: WakeRoute {
    /// The `relay` a direct registration is stored with.
    static let marker = "apns:direct"

    let client: APNsClient

    var host: String { "APNs" }

    /// What a direct registration keeps as its handle.
    static func handle(_ registration: WakeRegistration) -> String {
        (try? RPCJSON.encodeText(registration)) ?? ""
    }

    func wake(handle: String, kind: WakeKind, ttlSeconds: Int, now: Date) async -> WakeAnswer {
        guard let registration = try? RPCJSON.decode(WakeRegistration.self, from: handle) else {
            return .gone(.refused, "the registration is not a direct one (it was made through a relay): the device must register again")
        }
        let outcome = await self.client.send(kind, to: registration, collapseId: "screentime-\(kind.rawValue)", ttlSeconds: ttlSeconds)
        switch outcome {
        case .delivered(let apnsId): return .sent(apnsId: apnsId)
        case .unregistered(let reason): return .gone(.unregistered, "APNs no longer knows this device (\(reason))")
        case .expiredProviderToken: return .retry(reason: "APNs refused the provider token twice: check --apns-key-id, --apns-team-id and the .p8 key", after: .seconds(300))
        case .retry(let status, let reason): return .retry(reason: status == 0 ? reason : "APNs answered HTTP \(status) \(reason)", after: nil)
        case .tooManyRequests(let reason): return .retry(reason: "APNs says this device is pushed to too often (\(reason))", after: .seconds(Self.backOffAfterTooManyRequests))
        case .refused(let status, let reason): return .drop("APNs refused the push: HTTP \(status) \(reason)")
        }
    }

    func shutdown() async { try? await self.client.http.shutdown() }

    /// Seconds to wait after APNs's 429 for a device (Apple gives no Retry-After).
    static let backOffAfterTooManyRequests: Int64 = 60
}
