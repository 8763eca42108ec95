import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PushAPI
import RPCCore

/// The HTTP request that posts a queued notification to a device's webhook, in the
/// webhook's format; nil when the format does not carry this kind of notification.
enum WebhookRequest {
    /// UnifiedPush distributors take at most 4096 bytes of message.
    static let unifiedPushLimit = 4096

    static func make(_ delivery: PushDatabase.Delivery, now: Date, userAgent: String) -> HTTPClientRequest? {
        var request = HTTPClientRequest(url: delivery.webhook.url)
        request.method = .POST
        request.headers.add(name: "User-Agent", value: userAgent)
        if let authorization = delivery.webhook.authorization { request.headers.add(name: "Authorization", value: authorization) }
        let summary = try? Coding.decode(Summary.self, delivery.body)
        switch delivery.webhook.format {
        case .unifiedpush:
            // The notification itself; if too large, without its record fields (the app
            // fetches the record anyway).
            var body = PushNotification.numbered(delivery.seq, unnumbered: EncodedJSON(delivery.body)).bytes
            if body.count > Self.unifiedPushLimit, var trimmed = try? Coding.decode(JSONValue.self, Self.withSeq(delivery)).objectValue {
                trimmed["fields"] = nil
                trimmed["truncated"] = true
                body = Array(((try? Coding.encode(JSONValue.object(trimmed))) ?? "{}").utf8)
            }
            request.headers.add(name: "Content-Type", value: "application/json")
            // Web Push's headers, which UnifiedPush distributors honour.
            request.headers.add(name: "TTL", value: String(max(0, Int(delivery.expiresAt.timeIntervalSince(now)))))
            request.headers.add(name: "Urgency", value: (summary?.priority ?? .normal).rawValue)
            request.body = .bytes(ByteBuffer(bytes: body))
        case .ntfy:
            guard let alert = summary?.alert else { return nil }
            request.headers.add(name: "Title", value: Self.headerValue(alert.title))
            request.headers.add(name: "Priority", value: Self.ntfyPriority(summary?.priority ?? .normal))
            request.headers.add(name: "Tags", value: "screentime")
            request.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            request.body = .bytes(ByteBuffer(string: alert.body ?? alert.title))
        }
        return request
    }

    /// What the formats need from a notification.
    private struct Summary: Decodable {
        var alert: Alert?
        var priority: PushPriority?
    }

    private static func withSeq(_ delivery: PushDatabase.Delivery) -> String {
        PushNotification.numbered(delivery.seq, unnumbered: EncodedJSON(delivery.body)).text
    }

    /// ntfy's priorities run from 1 (min) to 5 (max); 3 is its default.
    static func ntfyPriority(_ priority: PushPriority) -> String {
        switch priority {
        case .low: "2"
        case .normal: "3"
        case .high: "4"
        }
    }

    /// Header values are ASCII: anything else goes as an RFC 2047 encoded word, which ntfy
    /// decodes.
    static func headerValue(_ text: String) -> String {
        let printable = text.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 && $0.value != 0x7F }
        return printable ? text : "=?UTF-8?B?\(Data(text.utf8).base64EncodedString())?="
    }
}
