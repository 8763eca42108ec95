import AggregatorAPI
import Foundation
import RPCCore
import StoreAPI

/// What the Overview's requests and a child's page show, and what their forms do: the
/// aggregator's parenting methods, called as the browser's parent device (as a parent's
/// phone calls them).
extension BrowserDevice {
    /// Open requests for more time, each with what the Approve and Deny forms need.
    func openRequests(_ clock: FamilyClock, child: String? = nil) async throws(RPCError) -> [[String: Any]] {
        try await self.call(AggregatorMethods.listRequests, ListRequestsParams(child: child, status: .open)).requests.map { Self.requestRow($0, clock) }
    }

    /// A child's requests, open ones first, then the last answered.
    func requests(of child: String, _ clock: FamilyClock) async throws(RPCError) -> [[String: Any]] {
        try await self.call(AggregatorMethods.listRequests, ListRequestsParams(child: child, limit: 10)).requests.map { Self.requestRow($0, clock) }
    }

    static func requestRow(_ request: TimeRequestInfo, _ clock: FamilyClock) -> [String: Any] {
        var row: [String: Any] = [
            "id": request.id, "sentence": request.sentence, "child": request.child, "childName": request.childName,
            "open": request.status == .open, "minutes": request.minutes, "ago": clock.ago(request.createdAt), "when": clock.time(request.createdAt),
            "expires": clock.time(request.expiresAt), "status": request.status.rawValue, "whilePaused": request.whilePaused,
        ]
        if let device = request.deviceName { row["device"] = device }
        return row
    }

    /// The child's shield in words: "Open", "Paused by Mum until 24 Nov 2026, 18:30".
    static func shieldWords(_ balance: EarnedTimeBalance?, _ clock: FamilyClock) -> String {
        guard let balance, balance.shielded == true else { return "Open" }
        switch balance.shieldReason {
        case "paused":
            return "Paused by \(balance.pausedBy ?? "a parent") " + (balance.pausedUntil.map { "until \(clock.time($0))" } ?? "until resumed")
        case "dailyCap": return "Shielded: today's limit is reached (open again at midnight)"
        case "downtime": return "Downtime" + (balance.downtimeUntil.map { " until \(clock.weekdayTime($0))" } ?? "")
        default: return "Shielded: no earned time left"
        }
    }

    /// A child's page: its time, requests, ledger, devices and its own rules.
    func childPage(_ id: String, _ clock: FamilyClock) async throws(RPCError) -> [String: Any] {
        guard let context = try await self.fetch(ChildContext.self, "child-\(id)") else {
            throw RPCError(.notFound, "there is no child \(id) in this family")
        }
        let balance = try await self.fetch(EarnedTimeBalance.self, "balance-child-\(id)")
        let ledger = try await self.all(PointsLedgerEntry.self, zone: StoreNames.defaultZone,
                                        filters: [QueryFilter(PointsLedgerEntry.Field.childRef, .equal, .reference("child-\(id)", zone: StoreNames.defaultZone))],
                                        sort: QuerySort(PointsLedgerEntry.Field.timestamp, descending: true), limit: 20)
        let family = try await self.devices()
        let admin = family.first { $0.deviceId == self.deviceId }?.role == .admin
        let devices = family.filter { $0.role == .child && $0.childId == id && $0.status != .revoked }
        let paused = balance?.shieldReason == "paused"
        // Today, on every device of the child: learning, reward and the apps used most.
        var learning: Int64 = 0, reward: Int64 = 0
        var apps: [String: (seconds: Int64, category: String?)] = [:]
        for device in devices {
            guard let zone = device.zone, let summary = try await self.fetch(DailySummary.self, "\(device.deviceId)_\(clock.today)", zone: zone) else { continue }
            learning += summary.totalLearningSeconds ?? 0
            reward += summary.totalRewardSeconds ?? 0
            for app in summary.appsUsed {
                apps[app.app, default: (0, app.category)].seconds += app.seconds
            }
        }
        let names = try await self.appNames()
        let todayApps = apps.sorted { $0.value.seconds > $1.value.seconds }.prefix(5).map { app -> [String: Any] in
            ["name": names[app.key] ?? app.key, "time": FamilyClock.duration(app.value.seconds), "category": app.value.category ?? ""]
        }
        var page: [String: Any] = [
            "id": id, "name": context.displayName ?? id,
            "points": balance?.pointsBalance ?? 0, "balance": FamilyClock.duration(balance?.balanceSeconds ?? 0),
            "usedToday": FamilyClock.duration(reward),
            "shield": Self.shieldWords(balance, clock), "shielded": balance?.shielded ?? false, "paused": paused,
            "requests": try await self.requests(of: id, clock),
            "ledger": ledger.prefix(20).map { entry -> [String: Any] in
                let fields = entry.fields
                let debit = PointsLedgerEntry.debitTypes.contains(fields.type)
                return ["when": clock.time(fields.timestamp), "what": Self.ledgerWords(fields.type), "points": (debit ? "−" : "+") + "\(fields.amount)",
                        "reason": fields.reason ?? "", "debit": debit]
            },
            "hasLedger": !ledger.isEmpty,
            "redeemKey": UUID().uuidString.lowercased(), "admin": admin,
            "learningToday": FamilyClock.duration(learning), "rewardToday": FamilyClock.duration(reward),
            "todayApps": todayApps, "hasTodayApps": !todayApps.isEmpty,
            "devices": devices.map { ["name": $0.deviceName ?? "A device", "state": $0.status.rawValue, "deviceId": $0.deviceId, "active": $0.status == .active] },
            "removeWarning": "Remove \(context.displayName ?? id)? Their \(devices.count == 1 ? "device is" : "\(devices.count) devices are") cut off at once, "
                + "and everything recorded for them (usage, days, points, requests) is deleted from the server. This cannot be undone.",
            "cap": context.dailyRewardCapMinutes.map { "\($0)" } ?? "", "weeklyExpiry": context.weeklyExpiry ?? false,
        ]
        page.merge(try await self.downtimeCard(id, clock, appNames: names)) { kept, _ in kept }
        page.merge(try await self.choresCard(id, clock)) { kept, _ in kept }
        page.merge(try await self.childRulesCard(id, appNames: names)) { kept, _ in kept }
        return page
    }

    static func ledgerWords(_ type: String) -> String {
        switch type {
        case "accrual": "Learning"
        case "reversal": "Learning counted again"
        case "redemption": "Redeemed"
        case "adjustment": "Added by a parent"
        case "deduction": "Taken away by a parent"
        case "expiry": "Expired at the week's end"
        default: type
        }
    }

    /// Saves a child's daily cap (empty: none) and weekly expiry (its ChildContext's fields).
    func saveChildLimits(_ id: String, capMinutes: Int?, weeklyExpiry: Bool) async throws(RPCError) {
        let save: RecordSave = .changes(ChildContext.self, named: "child-\(id)", [
            .dailyRewardCapMinutes: capMinutes.map { .int(Int64($0)) } ?? .null, .weeklyExpiry: .bool(weeklyExpiry),
        ])
        _ = try await self.call(StoreMethods.modify, ModifyParams(family: self.family, zone: StoreNames.defaultZone, saves: [save], savePolicy: .changedKeys, atomic: true))
    }

    /// A redemption of the child's points (what a parent's app posts), named by the form's
    /// key: the same form sent again redeems once.
    func redeem(_ id: String, points: Int64, reason: String, key: String) async throws(RPCError) {
        let entry = PointsLedgerEntry(familyRef: .inDefaultZone(self.family), childRef: .inDefaultZone("child-\(id)"), type: "redemption", amount: points,
                                      timestamp: Date(), reason: reason, actorParentRef: .inDefaultZone("parent-\(self.deviceId)"), idempotencyKey: key)
        let result = try await self.call(StoreMethods.modify, ModifyParams(family: self.family, zone: StoreNames.defaultZone, saves: [try .record(entry, named: key)], atomic: true))
        // Already there (the same form sent again): redeemed once, as asked.
        if let error = result.saved.first?.error, error.code != .conflict { throw RPCError(error.code, error.message) }
    }
}
