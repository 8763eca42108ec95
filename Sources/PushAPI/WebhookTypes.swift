import Foundation
import RPCCore

/// How a device's notifications are posted to its HTTP endpoint.
public enum WebhookFormat: String, StringEnum {
    /// UnifiedPush: the notification's JSON is the body, posted to the endpoint the
    /// device's distributor gave it (an ntfy server's `…/upXXXX?up=1`, for one). Every
    /// notification goes, silent ones too: the app wakes and fetches.
    case unifiedpush
    /// ntfy: posted to a topic URL (`https://ntfy.sh/mytopic`), with `Title` and
    /// `Priority` headers and the alert's body as the message. Only notifications with an
    /// alert go: ntfy shows everything it gets, and a "fetch changes" hint is no message.
    case ntfy
}

/// `push.setWebhook`.
public struct SetWebhookParams: Codable, Sendable, Hashable {
    /// `https://…` or `http://…`, at most 2048 bytes, no user name or password in it.
    public var url: String
    public var format: WebhookFormat
    /// Sent as the `Authorization` header (an ntfy access token: `Bearer tk_…`). Stored,
    /// never shown again.
    public var authorization: String?

    public init(url: String, format: WebhookFormat, authorization: String? = nil) {
        self.url = url
        self.format = format
        self.authorization = authorization
    }
}

public enum WebhookStatus: String, StringEnum {
    /// Deliveries go out.
    case active
    /// The endpoint answered 404 or 410: it no longer exists. Nothing more is sent until the
    /// device sets a webhook again.
    case gone
}

/// A device's webhook, as `push.setWebhook` and `push.getWebhook` show it.
public struct WebhookInfo: Codable, Sendable, Hashable {
    public var url: String
    public var format: WebhookFormat
    public var hasAuthorization: Bool
    public var status: WebhookStatus
    public var createdAt: Date
    /// The last delivery the endpoint accepted.
    public var deliveredAt: Date?
    /// The last failure, as a sentence (`HTTP 503 from ntfy.example.org`, `timed out`).
    public var lastError: String?
    /// Notifications waiting to be posted (a retry included).
    public var pending: Int

    public init(url: String, format: WebhookFormat, hasAuthorization: Bool, status: WebhookStatus, createdAt: Date,
                deliveredAt: Date?, lastError: String?, pending: Int) {
        self.url = url
        self.format = format
        self.hasAuthorization = hasAuthorization
        self.status = status
        self.createdAt = createdAt
        self.deliveredAt = deliveredAt
        self.lastError = lastError
        self.pending = pending
    }
}

public struct RemoveWebhookResult: Codable, Sendable, Hashable {
    /// False when the device had none.
    public var removed: Bool
    public init(removed: Bool) { self.removed = removed }
}
