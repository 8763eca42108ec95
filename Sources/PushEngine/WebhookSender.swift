import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceKit
import ServiceLifecycle

/// Posts what the outbox holds to the devices' webhooks: a few at a time, each with a
/// timeout; a failure is retried with exponential backoff (and the endpoint's
/// `Retry-After`), until the notification expires or the attempts run out; an endpoint
/// that answers 404 or 410 is marked gone.
struct WebhookSender: Service {
    struct Settings: Sendable {
        var timeout: Duration
        var attempts: Int
        var firstRetry: Duration
        /// `screentime-pushd/<version>`.
        var userAgent: String
        var longestRetry: Duration = .seconds(15 * 60)
        var concurrency: Int = 8
    }

    let database: PushDatabase
    let registry: DeviceRegistry
    let wakeup: Wakeup
    let settings: Settings
    var metrics = PushMetrics.none
    let logger: Logger

    func run() async throws {
        var configuration = HTTPClient.Configuration()
        // A redirect could send the request, with its Authorization header, somewhere the
        // device never named.
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(Int64(self.settings.timeout.seconds.rounded(.up))))
        let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration, backgroundActivityLogger: self.logger)
        await OutboundDelivery.run(concurrency: self.settings.concurrency, wakeup: self.wakeup, logger: self.logger, what: "webhook outbox",
                           due: { limit in try await self.database.dueDeliveries(now: Date(), limit: limit) },
                           nextDue: { try await self.database.nextDue() }, send: { delivery -> Void? in await self.post(delivery, http) })
        try? await http.shutdown()
    }

    private func post(_ delivery: PushDatabase.Delivery, _ http: HTTPClient) async {
        let now = Date()
        var metadata: Logger.Metadata = [
            "family": "\(delivery.family)", "device_id": "\(delivery.deviceId)", "seq": "\(delivery.seq)",
            "format": "\(delivery.webhook.format.rawValue)", "attempt": "\(delivery.attempts + 1)",
        ]
        do {
            guard let request = WebhookRequest.make(delivery, now: now, userAgent: self.settings.userAgent) else {
                // Not for this format (a silent hint to an ntfy topic).
                try await self.database.delivered(delivery, at: nil)
                return
            }
            let outcome: Outcome
            do {
                let response = try await http.execute(request, timeout: .init(self.settings.timeout))
                metadata["status"] = "\(response.status.code)"
                outcome = Self.outcome(response.status, retryAfter: response.headers.first(name: "Retry-After"), host: Self.host(delivery))
            } catch {
                outcome = .retry(reason: "\(Self.describe(error)) (\(Self.host(delivery)))", after: nil)
            }
            self.metrics.webhooks(outcome.label).increment()
            switch outcome {
            case .delivered:
                try await self.database.delivered(delivery, at: now)
                self.logger.debug("webhook delivered", metadata: metadata)
            case .gone(let reason):
                try await self.database.webhookGone(delivery, error: reason)
                self.registry.remove(Hub.DeviceKey(family: delivery.family, deviceId: delivery.deviceId))
                self.logger.warning("webhook endpoint is gone; nothing more is posted until the device sets a webhook again",
                                    metadata: metadata.merging(["error": "\(reason)"]) { _, new in new })
            case .drop(let reason):
                try await self.database.abandon(delivery, error: reason)
                self.logger.warning("webhook refused a notification; it stays queued for the device's next listen",
                                    metadata: metadata.merging(["error": "\(reason)"]) { _, new in new })
            case .retry(let reason, let after):
                let wait = after ?? self.backoff(afterAttempt: delivery.attempts + 1)
                let due = now.addingTimeInterval(wait.seconds)
                if delivery.attempts + 1 >= self.settings.attempts || due >= delivery.expiresAt {
                    try await self.database.abandon(delivery, error: reason)
                    self.logger.warning("webhook delivery abandoned after its last attempt; it stays queued for the device's next listen",
                                        metadata: metadata.merging(["error": "\(reason)"]) { _, new in new })
                } else {
                    try await self.database.retry(delivery, at: due, error: reason)
                    self.logger.info("webhook delivery failed; retrying", metadata: metadata.merging([
                        "error": "\(reason)", "retry_in_ms": "\(wait.microseconds / 1000)",
                    ]) { _, new in new })
                }
            }
        } catch {
            self.logger.error("webhook bookkeeping failed", metadata: metadata.merging(["error": "\(error)"]) { _, new in new })
        }
    }

    enum Outcome: Equatable {
        /// Its name in the metrics.
        var label: String {
            switch self {
            case .delivered: "delivered"
            case .gone: "gone"
            case .drop: "refused"
            case .retry: "failed"
            }
        }

        case delivered
        /// The endpoint no longer exists.
        case gone(String)
        /// This notification will never be accepted (too large, malformed, forbidden).
        case drop(String)
        case retry(reason: String, after: Duration?)
    }

    /// What an answer means, by the UnifiedPush and ntfy conventions.
    static func outcome(_ status: HTTPResponseStatus, retryAfter: String?, host: String) -> Outcome {
        let reason = "HTTP \(status.code) from \(host)"
        switch status.code {
        case 200..<300: return .delivered
        case 404, 410: return .gone(reason)
        case 408, 425, 429, 500..<600:
            return .retry(reason: reason, after: retryAfter.flatMap(Double.init).map { .milliseconds(Int64(min($0, 3600) * 1000)) })
        default: return .drop(reason)
        }
    }

    func backoff(afterAttempt attempt: Int) -> Duration {
        OutboundDelivery.backoff(afterAttempt: attempt, first: self.settings.firstRetry, longest: self.settings.longestRetry)
    }

    private static func host(_ delivery: PushDatabase.Delivery) -> String {
        URL(string: delivery.webhook.url)?.host ?? "the endpoint"
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "timed out"
            case .remoteConnectionClosed: return "the endpoint closed the connection"
            default: return "\(error)"
            }
        }
        return "\(error)"
    }
}
