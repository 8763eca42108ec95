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
        let devices = try await self.devices().filter { $0.role == .child && $0.childId == id && $0.status != .revoked }
        let paused = balance?.shieldReason == "paused"
        return [
            "id": id, "name": context.displayName ?? id,
            "points": balance?.pointsBalance ?? 0, "balance": FamilyClock.duration(balance?.balanceSeconds ?? 0),
            "usedToday": FamilyClock.duration(balance?.rewardSecondsToday ?? 0),
            "shield": Self.shieldWords(balance, clock), "shielded": balance?.shielded ?? false, "paused": paused,
            "requests": try await self.requests(of: id, clock),
            "ledger": ledger.prefix(20).map { entry -> [String: Any] in
                let fields = entry.fields
                let debit = PointsLedgerEntry.debitTypes.contains(fields.type)
                return ["when": clock.time(fields.timestamp), "what": Self.ledgerWords(fields.type), "points": (debit ? "−" : "+") + "\(fields.amount)",
                        "reason": fields.reason ?? "", "debit": debit]
            },
            "hasLedger": !ledger.isEmpty,
            "devices": devices.map { ["name": $0.deviceName ?? "A device", "state": $0.status.rawValue] },
            "cap": context.dailyRewardCapMinutes.map { "\($0)" } ?? "", "weeklyExpiry": context.weeklyExpiry ?? false,
        ]
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
}
