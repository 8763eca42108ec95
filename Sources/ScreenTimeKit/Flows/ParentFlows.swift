import AggregatorAPI
import Foundation
import PairingAPI
import RPCCore
import StoreAPI

/// A rule for one app, as a parent sets it and as a child device gets it in the family's
/// configuration: the same type.
public typealias AppRuleChange = ConfigurationSnapshot.Rule

/// What ``ParentFlows/setAppRule(_:)`` queued.
public struct AppRuleUpdate: Sendable {
    /// The AppRule's record name in `default` (`app-<bundleId>` for a new one).
    public var ruleName: String
    /// The request id of the rule's batch in the offline queue.
    public var requestIds: [String]
}

/// The parent device's flows, one call each.
public struct ParentFlows: Sendable {
    let session: Session
    let records: RecordDatabase
    let queue: SyncQueue

    private func me() throws(RPCError) -> DeviceIdentity {
        let identity = try self.session.requireIdentity()
        guard identity.role.isParent else { throw RPCError(.forbidden, "only a parent device sets rules and reads reports") }
        return identity
    }

    /// The child's paired devices (not revoked; `includingRevoked`: those removed from the
    /// family too, whose usage still counts): their ids and zones.
    public func devices(of childId: String, includingRevoked: Bool = false) async throws(RPCError) -> [DeviceInfo] {
        let devices = try await self.session.call(PairingMethods.listDevices, Empty()).devices
        return devices.filter { $0.childId == childId && (includingRevoked || $0.status != .revoked) && $0.zone != nil }
    }

    /// Sets an app's rule for the family: the AppRule, queued and sent exactly once (it
    /// survives going offline). The server then sends every child device of the family its
    /// new configuration (docs/protocol.md, "Configuration"): the parent's app tells no
    /// device itself.
    public func setAppRule(_ rule: AppRuleChange) async throws(RPCError) -> AppRuleUpdate {
        let identity = try self.me()
        // One rule per app and family (the store's uniqueness): the one there is, whatever
        // client named it (an older kit wrote `rule-<bundleId>`); when the server cannot be
        // asked now, the name every client gives.
        let existing = try? await self.records.queryAll(AppRule.self, in: "default", where: [QueryFilter("bundleId", .equal, .string(rule.bundleId))])
        let ruleName = existing?.first?.recordName ?? Self.ruleName(rule.bundleId)
        let appRule = AppRule(
            familyRef: RecordReference(identity.family, zone: "default"), bundleId: rule.bundleId, classification: rule.classification,
            source: "override", pointsPerMinute: rule.pointsPerMinute, isEnabled: rule.isEnabled, blockingEnabled: rule.blockingEnabled,
            displayName: rule.displayName)
        let batch = ModifyParams(family: identity.family, zone: "default", saves: [try TypedRecord(appRule, recordName: ruleName, zone: "default").save()],
                                 savePolicy: .allKeys, atomic: true)
        let ids = try self.queue.enqueue([batch], label: "app-rule")
        return AppRuleUpdate(ruleName: ruleName, requestIds: ids)
    }

    /// Saves one child's own rule for an app (queued, as ``setAppRule(_:)``): that child's
    /// devices get it in place of the family's rule; ``resetChildAppRule(for:bundleId:)``
    /// gives them the family's back.
    public func setChildAppRule(for childId: String, _ rule: AppRuleChange) async throws(RPCError) -> AppRuleUpdate {
        let identity = try self.me()
        let name = ChildAppRule.recordName(child: childId, bundleId: rule.bundleId)
        let own = ChildAppRule(familyRef: RecordReference(identity.family, zone: "default"), childRef: RecordReference("child-\(childId)", zone: "default"),
                               bundleId: rule.bundleId, classification: rule.classification, pointsPerMinute: rule.pointsPerMinute,
                               isEnabled: rule.isEnabled, blockingEnabled: rule.blockingEnabled)
        let batch = ModifyParams(family: identity.family, zone: "default", saves: [try TypedRecord(own, recordName: name, zone: "default").save()],
                                 savePolicy: .allKeys, atomic: true)
        return AppRuleUpdate(ruleName: name, requestIds: try self.queue.enqueue([batch], label: "child-app-rule"))
    }

    /// Removes one child's own rule for an app (queued): the family's applies to it again.
    public func resetChildAppRule(for childId: String, bundleId: String) throws(RPCError) -> [String] {
        let identity = try self.me()
        let batch = ModifyParams(family: identity.family, zone: "default", deletes: [RecordDelete(recordName: ChildAppRule.recordName(child: childId, bundleId: bundleId))])
        return try self.queue.enqueue([batch], label: "child-app-rule")
    }

    /// An app's rule's record name: one per app and family, the same from every client.
    public static func ruleName(_ bundleId: String) -> String { "app-\(bundleId)" }

    /// Today's DailySummary of each of the child's devices, removed ones included (today in
    /// the family's time zone); a device with no usage today has none.
    public func todaySummary(for childId: String, now: Date = Date()) async throws(RPCError) -> [TypedRecord<DailySummary>] {
        let identity = try self.me()
        let family = try await self.records.fetch(Family.self, identity.family, in: "default")
        let day = Self.localDay(now, timeZone: family?.fields.timeZone)
        var summaries: [TypedRecord<DailySummary>] = []
        // A child's day is what happened on any of its devices, removed ones too.
        for device in try await self.devices(of: childId, includingRevoked: true) {
            guard let zone = device.zone else { continue }
            if let summary = try await self.records.fetch(DailySummary.self, "\(device.deviceId)_\(day)", in: zone) { summaries.append(summary) }
        }
        return summaries
    }

    /// The child's earned-time balance (`balance-child-<childId>`), nil before any usage.
    public func balance(for childId: String) async throws(RPCError) -> TypedRecord<EarnedTimeBalance>? {
        _ = try self.me()
        return try await self.records.fetch(EarnedTimeBalance.self, "balance-child-\(childId)", in: "default")
    }

    /// The child's report over local days `from`…`to` (`YYYY-MM-DD`), by day or week.
    public func report(for childId: String, from: String, to: String, by: ReportPeriod? = nil) async throws(RPCError) -> Report {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.report, ReportParams(child: childId, from: from, to: to, by: by))
    }

    // MARK: Everyday parenting (the server decides: docs/protocol.md, "Everyday parenting")

    /// The family's requests for more time (or one child's): open ones first.
    public func requests(for childId: String? = nil, status: TimeRequestStatus? = nil) async throws(RPCError) -> [TimeRequestInfo] {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.listRequests, ListRequestsParams(child: childId, status: status)).requests
    }

    /// Approves a request (its minutes, or `minutes`), or denies it, with a reply to the
    /// child. Another parent's earlier answer makes this `conflict`: its message says who
    /// answered and how, its `data` is the request as answered.
    public func answer(_ requestId: String, approve: Bool, minutes: Int64? = nil, reply: String? = nil) async throws(RPCError) -> TimeRequestInfo {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.answerRequest, AnswerRequestParams(request: requestId, approve: approve, minutes: minutes, reply: reply))
    }

    /// Adds (positive) or takes away (negative) points or minutes; a removal stops at zero.
    public func grant(to childId: String, points: Int64? = nil, minutes: Int64? = nil, reason: String? = nil) async throws(RPCError) -> GrantResult {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.grant, GrantParams(child: childId, points: points, minutes: minutes, reason: reason))
    }

    /// Shields the child's reward apps now, for `minutes` or until ``resume(_:)``.
    public func pause(_ childId: String, minutes: Int64? = nil, reason: String? = nil) async throws(RPCError) -> ChildTime {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.pause, PauseParams(child: childId, minutes: minutes, reason: reason))
    }

    /// Ends the child's pause now.
    public func resume(_ childId: String) async throws(RPCError) -> ChildTime {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.resume, ResumeParams(child: childId))
    }

    /// Each child's downtime schedule (or one child's), and whether it is on now.
    public func schedules(for childId: String? = nil) async throws(RPCError) -> [DowntimeSchedule] {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.listSchedules, ListSchedulesParams(child: childId)).schedules
    }

    /// Replaces the child's weekly downtime (no windows: none). Windows are read on the
    /// family's clocks; overlapping or empty windows are refused (`invalid_params`).
    public func setSchedule(_ childId: String, windows: [DowntimeWindow], alwaysAllowed: [String]? = nil,
                            liftOnApproval: Bool? = nil) async throws(RPCError) -> DowntimeSchedule {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.setSchedule, SetScheduleParams(
            child: childId, windows: windows, alwaysAllowed: alwaysAllowed, liftOnApproval: liftOnApproval))
    }

    /// The week's digest: each child's seven days beside the seven before (what the weekly
    /// notification, `event` `weeklyDigest`, says); `through` the week's last day, default
    /// the family's next digest day.
    public func digest(through: String? = nil) async throws(RPCError) -> WeeklyDigest {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.digest, DigestParams(through: through))
    }

    /// The family's chores (or one child's), with those done and waiting for a parent.
    public func chores(for childId: String? = nil) async throws(RPCError) -> ChoreList {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.listChores, ListChoresParams(child: childId))
    }

    /// Adds a chore (no `id`), changes one (`id`), or removes one (`id`, `remove`).
    public func setChore(_ params: SetChoreParams) async throws(RPCError) -> ChoreInfo {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.setChore, params)
    }

    /// Approves a chore done (its points are added, once) or sends it back with a reason.
    /// Another parent's earlier answer makes this `conflict`, saying who and how.
    public func answerChore(_ completionId: String, approve: Bool, reason: String? = nil) async throws(RPCError) -> ChoreCompletion {
        _ = try self.me()
        return try await self.session.call(AggregatorMethods.answerChore, AnswerChoreParams(completion: completionId, approve: approve, reason: reason))
    }

    static func localDay(_ date: Date, timeZone: String?) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}
