import Foundation
import PushAPI
import RPCClient
import RPCCore
import StoreAPI

/// A device's live notifications: the subscriptions a real app would make, then its
/// `push.listen` stream, each notification acknowledged once shown.
extension Device {
    /// Subscribes (idempotently: fixed ids replace themselves) to what this kind of device
    /// watches. A parent: every child's daily summaries, balances and command results; a
    /// child: the commands addressed to it.
    func subscribeForWatching() async throws {
        var subscriptions: [SubscribeParams] = []
        switch self.profile.role {
        case .parent:
            subscriptions = [
                SubscribeParams(subscriptionId: "ctl-summaries", kind: .query, recordType: RecordTypes.dailySummary, firesOn: [.create, .update],
                                notification: NotificationSpec(includeKeys: DailySummary.names([.deviceID, .totalLearningSeconds, .totalRewardSeconds, .totalPointsEarned]))),
                SubscribeParams(subscriptionId: "ctl-balances", kind: .query, zone: StoreNames.defaultZone, recordType: RecordTypes.earnedTimeBalance,
                                notification: NotificationSpec(includeKeys: EarnedTimeBalance.names([.balanceSeconds, .pointsBalance, .shielded]))),
                SubscribeParams(subscriptionId: "ctl-commands", kind: .query, recordType: RecordTypes.configurationCommand, firesOn: [.update],
                                notification: NotificationSpec(includeKeys: ConfigurationCommand.names([.targetDeviceID, .commandType, .status]))),
            ]
        case .child:
            subscriptions = [
                SubscribeParams(subscriptionId: "ctl-commands", kind: .query, zone: self.zone, recordType: RecordTypes.configurationCommand,
                                // Pending ones, created or rewritten (the server's configuration is
                                // rewritten in place); this device's own "executed" does not match.
                                filters: [QueryFilter(ConfigurationCommand.Field.targetDeviceID, .equal, .string(self.profile.deviceId)),
                                          QueryFilter(ConfigurationCommand.Field.status, .equal, "pending")],
                                firesOn: [.create, .update],
                                notification: NotificationSpec(includeKeys: ConfigurationCommand.names([.commandType, .status]), priority: .high)),
            ]
        }
        for subscription in subscriptions { _ = try await self.push.call(PushMethods.subscribe, subscription) }
    }

    /// Listens, handing each notification to `shown` and acknowledging it, until `shown`
    /// returns false, the stream ends, or the task is cancelled.
    func watch(_ shown: (PushNotification) async throws -> Bool) async throws {
        let push = self.push
        for try await event in push.stream(PushMethods.listen, ListenParams()) {
            guard case .item(let notification) = event else { return }
            let more = try await shown(notification)
            _ = try await push.call(PushMethods.ack, AckParams(upTo: notification.seq))
            if !more { return }
        }
    }

    /// One line for a notification, as a terminal shows it.
    static func line(_ notification: PushNotification) -> String {
        var line = "#\(notification.seq) "
        if let alert = notification.alert {
            line += "ALERT \(alert.title)" + (alert.body.map { " — \($0)" } ?? "")
            return line
        }
        line += notification.reason.rawValue
        if let type = notification.recordType { line += " \(type)" }
        if let name = notification.recordName { line += " \(name)" }
        if let zone = notification.zone { line += " in \(zone)" }
        if let fields = notification.fields, !fields.isEmpty {
            line += ": " + fields.keys.sorted().map { key in "\(key)=\(Self.text(fields[key]!))" }.joined(separator: " ")
        }
        return line
    }

    static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): return text
        case .int(let number): return String(number)
        case .bool(let flag): return String(flag)
        default: return String(decoding: (try? RPCJSON.makeEncoder().encode(value)) ?? Data(), as: UTF8.self)
        }
    }
}
