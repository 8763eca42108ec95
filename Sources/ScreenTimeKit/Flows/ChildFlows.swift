import AggregatorAPI
import Foundation
import RPCCore
import StoreAPI

/// One app session to upload: what the child device measured (UsageRecord).
public struct UsageSession: Sendable, Hashable {
    /// The app's stable id on the device (`logicalID`).
    public var logicalID: String
    public var bundleId: String?
    public var displayName: String?
    /// `learning` or `reward`, as the device knows it (the parents' rules win on the server).
    public var category: String?
    public var start: Date
    public var end: Date

    public init(logicalID: String, bundleId: String? = nil, displayName: String? = nil, category: String? = nil, start: Date, end: Date) {
        self.logicalID = logicalID
        self.bundleId = bundleId
        self.displayName = displayName
        self.category = category
        self.start = start
        self.end = end
    }

    /// Deterministic, so uploading a session twice (a retry, a second sync) writes one record.
    func recordName(deviceId: String) -> String {
        "usage-\(deviceId)-\(self.logicalID)-\(Int64((self.start.timeIntervalSince1970 * 1000).rounded()))"
    }
}

/// What ``ChildFlows/applyPendingCommands(_:)`` did.
public struct AppliedCommands: Sendable {
    /// Commands applied and marked executed.
    public var executed: [TypedRecord<ConfigurationCommand>]
    /// Commands the handler refused, marked failed with its message.
    public var failed: [(command: TypedRecord<ConfigurationCommand>, message: String)]
    /// The request ids of the status updates in the offline queue.
    public var statusUpdates: [String]
}

/// The child device's flows, one call each.
public struct ChildFlows: Sendable {
    let session: Session
    let records: RecordDatabase
    let queue: SyncQueue

    private func me() throws(RPCError) -> (identity: DeviceIdentity, zone: String) {
        let identity = try self.session.requireIdentity()
        guard identity.role == .child, let zone = identity.zone else {
            throw RPCError(.forbidden, "only a paired child device has usage to upload and commands to apply")
        }
        return (identity, zone)
    }

    /// Uploads usage sessions through the offline queue (works offline; sent once, in
    /// order, when the server is reachable). Returns the request ids of the batches.
    @discardableResult
    public func uploadUsage(_ sessions: [UsageSession]) throws(RPCError) -> [String] {
        let (identity, zone) = try self.me()
        var batches: [ModifyParams] = []
        var start = 0
        while start < sessions.count {
            let slice = sessions[start..<min(start + ModifyParams.maximumItems, sessions.count)]
            var saves: [RecordSave] = []
            for usage in slice {
                let name = usage.recordName(deviceId: identity.deviceId)
                let record = UsageRecord(
                    recordID: name, logicalID: usage.logicalID, bundleId: usage.bundleId, displayName: usage.displayName,
                    sessionStart: usage.start, sessionEnd: usage.end, totalSeconds: Int64(max(0, usage.end.timeIntervalSince(usage.start))),
                    category: usage.category, deviceID: identity.deviceId)
                saves.append(try TypedRecord(record, recordName: name, zone: zone).save())
            }
            // allKeys: the same session sent again writes the same record, never a conflict.
            batches.append(ModifyParams(family: identity.family, zone: zone, saves: saves, savePolicy: .allKeys, atomic: true))
            start += ModifyParams.maximumItems
        }
        return try self.queue.enqueue(batches, label: "usage")
    }

    /// Tells the parents which version of the app this device runs (its RegisteredDevice's
    /// `appVersion`, `device-<deviceId>` in its zone), through the offline queue. Call it at
    /// start with the app's version; the same version again changes nothing.
    @discardableResult
    public func reportAppVersion(_ version: String) throws(RPCError) -> String {
        let (identity, zone) = try self.me()
        let save = RecordSave(recordType: RegisteredDevice.recordType, recordName: "device-\(identity.deviceId)", fields: [
            "deviceID": .string(identity.deviceId), "appVersion": .string(version),
        ])
        return try self.queue.enqueue(ModifyParams(family: identity.family, zone: zone, saves: [save], savePolicy: .changedKeys, atomic: true), label: "app-version")
    }

    /// Asks the server for this device's configuration again (`aggregator.resync`): the
    /// family's rules and the shield come as a pending `applyConfiguration` command within
    /// a second, its notification with it. Returns the configuration version to expect.
    @discardableResult
    public func resync() async throws(RPCError) -> Int64 {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.resync, ResyncParams()).version
    }

    /// Asks the parents for more time: `minutes`, or the rest of the day (`minutes` nil),
    /// for one reward app or all, with a note. Every parent gets an alert at once; the
    /// answer comes as a notification (`event` `timeRequestAnswered`, or
    /// `timeRequestExpired`), and ``requests()`` lists it. `limit_exceeded` when the child
    /// has as many open requests as the family allows.
    public func askForTime(minutes: Int64?, app: String? = nil, appName: String? = nil, note: String? = nil) async throws(RPCError) -> TimeRequestInfo {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.askForTime, AskForTimeParams(
            minutes: minutes, restOfDay: minutes == nil ? true : nil, app: app, appName: appName, note: note))
    }

    /// This child's requests for more time, open ones first.
    public func requests() async throws(RPCError) -> [TimeRequestInfo] {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.listRequests, ListRequestsParams()).requests
    }

    /// This child's downtime: its windows, and whether it is on now and until when. The
    /// shield itself comes as commands (reason `downtime`).
    public func downtime() async throws(RPCError) -> DowntimeSchedule? {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.listSchedules, ListSchedulesParams()).schedules.first
    }

    /// This child's chores, where today's stands, and what it did lately.
    public func chores() async throws(RPCError) -> ChoreList {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.listChores, ListChoresParams())
    }

    /// Marks a chore done (once per day of the family's, or once for a one-off); every
    /// parent is alerted, and the answer comes as a notification (`event` `choreAnswered`).
    public func choreDone(_ choreId: String, note: String? = nil) async throws(RPCError) -> ChoreCompletion {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.choreDone, ChoreDoneParams(chore: choreId, note: note))
    }

    /// The commands waiting for this device, oldest first.
    public func pendingCommands() async throws(RPCError) -> [TypedRecord<ConfigurationCommand>] {
        let (identity, zone) = try self.me()
        return try await self.records.queryAll(ConfigurationCommand.self, in: zone, where: [
            QueryFilter(ConfigurationCommand.Field.targetDeviceID, .equal, .string(identity.deviceId)),
            QueryFilter(ConfigurationCommand.Field.status, .equal, "pending"),
        ], sort: QuerySort(ConfigurationCommand.Field.createdAt))
    }

    /// Fetches the pending commands, hands each to `apply` (which enforces it locally, e.g.
    /// with ManagedSettings), and marks it executed, or failed with the error's text when
    /// `apply` throws. The status updates go through the offline queue.
    public func applyPendingCommands(_ apply: (TypedRecord<ConfigurationCommand>) async throws -> Void) async throws(RPCError) -> AppliedCommands {
        let (identity, zone) = try self.me()
        var report = AppliedCommands(executed: [], failed: [], statusUpdates: [])
        var saves: [RecordSave] = []
        var guarded: [ModifyParams] = []
        for command in try await self.pendingCommands() {
            var fields: [ConfigurationCommand.Field: JSONValue] = [.executedAt: .date(Date())]
            do {
                try await apply(command)
                fields[.status] = "executed"
                report.executed.append(command)
            } catch {
                let message = String(describing: error)
                fields[.status] = "failed"
                fields[.errorMessage] = .string(String(message.prefix(500)))
                report.failed.append((command, message))
            }
            if command.fields.configuration != nil {
                // The server rewrites its configuration command in place: the status is for
                // the version applied only (its change tag), so a newer one that came
                // meanwhile stays pending (this update then fails with `conflict`).
                var save = try command.save()
                for (field, value) in fields { save.fields[field] = value }
                // A request id of its own: if it has to wait in the queue after all, a retry
                // of what the store did apply is answered as before, not refused.
                guarded.append(ModifyParams(family: identity.family, zone: zone, saves: [save], savePolicy: .ifServerRecordUnchanged, atomic: true,
                                            requestId: "status-\(UUID().uuidString.lowercased())"))
                continue
            }
            // changedKeys: a child may write only the status fields of its commands.
            saves.append(.changes(ConfigurationCommand.self, named: command.recordName, fields))
        }
        // The configuration's status goes at once: a `conflict` means a newer configuration
        // came meanwhile (it stays pending, and is applied next), which is no failure to keep.
        // Only when it cannot go now does it wait in the queue like the other statuses.
        var batches: [ModifyParams] = []
        for batch in guarded {
            do {
                _ = try await self.session.call(StoreMethods.modify, batch)
            } catch where error.code == .conflict {
                continue
            } catch {
                batches.append(batch)
            }
        }
        if !saves.isEmpty { batches.append(ModifyParams(family: identity.family, zone: zone, saves: saves, savePolicy: .changedKeys, atomic: true)) }
        if !batches.isEmpty { report.statusUpdates = try self.queue.enqueue(batches, label: "command-status") }
        return report
    }
}
