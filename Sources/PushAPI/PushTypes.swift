import Foundation
import RPCCore
import StoreAPI

public enum SubscriptionKind: String, StringEnum {
    /// Records of one type matching filters (CloudKit's query subscription).
    case query
    /// Any record change in one zone (CloudKit's record zone subscription).
    case zone
    /// Any change in any zone of the family the device may read (CloudKit's database subscription).
    case family
}

public enum FireOn: String, StringEnum {
    case create, update, delete
}

public enum PushPriority: String, StringEnum {
    case low, normal, high
}

public struct Alert: Codable, Sendable, Hashable {
    public var title: String
    public var body: String?
    public init(title: String, body: String? = nil) {
        self.title = title
        self.body = body
    }
}

/// What a notification carries. Without `alert` it is silent: a "fetch changes" hint.
public struct NotificationSpec: Codable, Sendable, Hashable {
    public var alert: Alert?
    /// Fields of the record to include in the notification (query subscriptions).
    public var includeKeys: [String]?
    /// A newer notification with the same key replaces a pending older one. Zone and
    /// family subscriptions default to one key per subscription.
    public var collapseKey: String?
    public var priority: PushPriority?
    /// How long an undelivered notification stays queued: 1 s to 30 days; default the
    /// service's `--default-ttl` (7 days).
    public var ttlSeconds: Double?

    public init(alert: Alert? = nil, includeKeys: [String]? = nil, collapseKey: String? = nil, priority: PushPriority? = nil, ttlSeconds: Double? = nil) {
        self.alert = alert
        self.includeKeys = includeKeys
        self.collapseKey = collapseKey
        self.priority = priority
        self.ttlSeconds = ttlSeconds
    }
}

/// `push.subscribe`.
public struct SubscribeParams: Codable, Sendable, Hashable {
    /// The device's own name for it (letters, digits, `-`, `_`, `.`); default a new id.
    /// Subscribing again with the same id replaces the subscription.
    public var subscriptionId: String?
    public var kind: SubscriptionKind
    /// Required for `zone`; for `query`, absent means every zone the device may read.
    public var zone: String?
    /// Required for `query`.
    public var recordType: String?
    /// For `query`: all must hold (fields of `recordType`, the store's operators).
    public var filters: [QueryFilter]?
    /// For `query`: default all three.
    public var firesOn: [FireOn]?
    /// Remove the subscription once it has fired.
    public var firesOnce: Bool?
    public var notification: NotificationSpec?

    public init(
        subscriptionId: String? = nil, kind: SubscriptionKind, zone: String? = nil, recordType: String? = nil, filters: [QueryFilter]? = nil,
        firesOn: [FireOn]? = nil, firesOnce: Bool? = nil, notification: NotificationSpec? = nil
    ) {
        self.subscriptionId = subscriptionId
        self.kind = kind
        self.zone = zone
        self.recordType = recordType
        self.filters = filters
        self.firesOn = firesOn
        self.firesOnce = firesOnce
        self.notification = notification
    }
}

public struct Subscription: Codable, Sendable, Hashable {
    /// What zone and family subscriptions fire on (every change), and a query
    /// subscription's default: `create`, `delete`, `update`.
    public static let firesOnEverything: [FireOn] = FireOn.allCases.sorted { $0.rawValue < $1.rawValue }

    public var subscriptionId: String
    public var family: String
    public var deviceId: String
    public var kind: SubscriptionKind
    public var zone: String?
    public var recordType: String?
    public var filters: [QueryFilter]
    public var firesOn: [FireOn]
    public var firesOnce: Bool
    public var notification: NotificationSpec
    public var createdAt: Date

    public init(
        subscriptionId: String, family: String, deviceId: String, kind: SubscriptionKind, zone: String?, recordType: String?,
        filters: [QueryFilter], firesOn: [FireOn], firesOnce: Bool, notification: NotificationSpec, createdAt: Date
    ) {
        self.subscriptionId = subscriptionId
        self.family = family
        self.deviceId = deviceId
        self.kind = kind
        self.zone = zone
        self.recordType = recordType
        self.filters = filters
        self.firesOn = firesOn
        self.firesOnce = firesOnce
        self.notification = notification
        self.createdAt = createdAt
    }
}

public struct SubscriptionParams: Codable, Sendable, Hashable {
    public var subscriptionId: String
    public init(subscriptionId: String) { self.subscriptionId = subscriptionId }
}

public struct UnsubscribeResult: Codable, Sendable, Hashable {
    public var subscriptionId: String
    public init(subscriptionId: String) { self.subscriptionId = subscriptionId }
}

public struct ListSubscriptionsParams: Codable, Sendable, Hashable {
    /// Local services only: the family whose subscriptions to list.
    public var family: String?
    public init(family: String? = nil) { self.family = family }
}

/// `push.listening`.
public struct ListeningParams: Codable, Sendable, Hashable {
    /// Local services only: the family whose devices to list.
    public var family: String?
    public init(family: String? = nil) { self.family = family }
}

public struct ListeningResult: Codable, Sendable, Hashable {
    /// The devices with at least one `push.listen` stream open, sorted.
    public var deviceIds: [String]
    public init(deviceIds: [String]) { self.deviceIds = deviceIds }
}

public struct ListSubscriptionsResult: Codable, Sendable, Hashable {
    public var subscriptions: [Subscription]
    public init(subscriptions: [Subscription]) { self.subscriptions = subscriptions }
}

/// Why a notification was sent.
public enum NotificationReason: String, StringEnum {
    case recordCreated, recordUpdated, recordDeleted
    /// A zone or family subscription: something in the zone changed; fetch its changes.
    case zoneChanged
    /// Sent with `push.notify`.
    case message
}

/// One notification, as a device receives it.
public struct PushNotification: Codable, Sendable, Hashable {
    /// The device's sequence number: increases by one per notification queued for it.
    public var seq: Int64
    public var family: String
    public var reason: NotificationReason
    public var subscriptionId: String?
    public var zone: String?
    public var recordType: String?
    public var recordName: String?
    /// The store's change sequence number behind it.
    public var changeSeq: Int64?
    public var alert: Alert?
    /// The record's `includeKeys`, or `push.notify`'s data.
    public var fields: [String: JSONValue]?
    public var collapseKey: String?
    public var priority: PushPriority
    public var createdAt: Date
    public var expiresAt: Date

    public init(
        seq: Int64, family: String, reason: NotificationReason, subscriptionId: String? = nil, zone: String? = nil, recordType: String? = nil,
        recordName: String? = nil, changeSeq: Int64? = nil, alert: Alert? = nil, fields: [String: JSONValue]? = nil, collapseKey: String? = nil,
        priority: PushPriority = .normal, createdAt: Date, expiresAt: Date
    ) {
        self.seq = seq
        self.family = family
        self.reason = reason
        self.subscriptionId = subscriptionId
        self.zone = zone
        self.recordType = recordType
        self.recordName = recordName
        self.changeSeq = changeSeq
        self.alert = alert
        self.fields = fields
        self.collapseKey = collapseKey
        self.priority = priority
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    private enum CodingKeys: String, CodingKey {
        case seq, family, reason, subscriptionId, zone, recordType, recordName, changeSeq, alert, fields, collapseKey, priority, createdAt, expiresAt
    }

    /// As synthesised, except that `seq` 0 (not numbered yet) is left out: the push service
    /// encodes a notification once for every device it goes to and puts each device's
    /// number in front (``numbered(_:)``).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if self.seq != 0 { try container.encode(self.seq, forKey: .seq) }
        try container.encode(self.family, forKey: .family)
        try container.encode(self.reason, forKey: .reason)
        try container.encodeIfPresent(self.subscriptionId, forKey: .subscriptionId)
        try container.encodeIfPresent(self.zone, forKey: .zone)
        try container.encodeIfPresent(self.recordType, forKey: .recordType)
        try container.encodeIfPresent(self.recordName, forKey: .recordName)
        try container.encodeIfPresent(self.changeSeq, forKey: .changeSeq)
        try container.encodeIfPresent(self.alert, forKey: .alert)
        try container.encodeIfPresent(self.fields, forKey: .fields)
        try container.encodeIfPresent(self.collapseKey, forKey: .collapseKey)
        try container.encode(self.priority, forKey: .priority)
        try container.encode(self.createdAt, forKey: .createdAt)
        try container.encode(self.expiresAt, forKey: .expiresAt)
    }

    /// The JSON of an unnumbered notification (encoded with `seq` 0) as notification `seq`.
    public static func numbered(_ seq: Int64, unnumbered json: EncodedJSON) -> EncodedJSON {
        var bytes = Array("{\"seq\":\(seq)".utf8)
        bytes.reserveCapacity(json.bytes.count + bytes.count + 1)
        // Every notification has other keys (family, reason, …): a comma always follows.
        bytes.append(UInt8(ascii: ","))
        bytes.append(contentsOf: json.bytes.dropFirst())
        return EncodedJSON(bytes)
    }
}

/// `push.listen`.
public struct ListenParams: Codable, Sendable, Hashable {
    /// Start after this sequence number; default after the device's last acknowledgement.
    /// Notifications at or below the last acknowledgement are gone either way.
    public var after: Int64?
    /// True: send what is queued, then end the stream (what an app woken in the background
    /// does in the seconds it has); default: go on with live notifications.
    public var backlogOnly: Bool?
    public init(after: Int64? = nil, backlogOnly: Bool? = nil) {
        self.after = after
        self.backlogOnly = backlogOnly
    }
}

public struct ListenEnd: Codable, Sendable, Hashable {
    /// The last sequence number sent.
    public var lastSeq: Int64
    public init(lastSeq: Int64) { self.lastSeq = lastSeq }
}

public struct AckParams: Codable, Sendable, Hashable {
    /// Every notification up to and including this number is done with.
    public var upTo: Int64
    public init(upTo: Int64) { self.upTo = upTo }
}

public struct AckResult: Codable, Sendable, Hashable {
    /// The device's acknowledged position now.
    public var acked: Int64
    /// Notifications still queued for the device.
    public var pending: Int
    public init(acked: Int64, pending: Int) {
        self.acked = acked
        self.pending = pending
    }
}

/// `push.notify`: one of `deviceId` and `parents`.
public struct NotifyParams: Codable, Sendable, Hashable {
    public var family: String
    public var deviceId: String?
    /// Every active parent device of the family.
    public var parents: Bool?
    public var alert: Alert?
    public var data: [String: JSONValue]?
    public var collapseKey: String?
    public var priority: PushPriority?
    public var ttlSeconds: Double?
    /// The caller's name for this notification: the same request sent again (a retry after
    /// the caller restarted, not knowing whether the first went out) queues nothing more
    /// and gets the first answer.
    public var requestId: String?

    public init(
        family: String, deviceId: String? = nil, parents: Bool? = nil, alert: Alert? = nil, data: [String: JSONValue]? = nil,
        collapseKey: String? = nil, priority: PushPriority? = nil, ttlSeconds: Double? = nil, requestId: String? = nil
    ) {
        self.requestId = requestId
        self.family = family
        self.deviceId = deviceId
        self.parents = parents
        self.alert = alert
        self.data = data
        self.collapseKey = collapseKey
        self.priority = priority
        self.ttlSeconds = ttlSeconds
    }
}

public struct QueuedNotification: Codable, Sendable, Hashable {
    public var deviceId: String
    public var seq: Int64
    public init(deviceId: String, seq: Int64) {
        self.deviceId = deviceId
        self.seq = seq
    }
}

public struct NotifyResult: Codable, Sendable, Hashable {
    public var queued: [QueuedNotification]
    public init(queued: [QueuedNotification]) { self.queued = queued }
}
