import Foundation
import RPCCore

// Points, earned time and what was done: the ledger and the audit log.

/// Points earned, redeemed or adjusted, in `default`.
public struct PointsLedgerEntry: RecordFields {
    public static let recordType = "PointsLedgerEntry"
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .childRef, .type, .timestamp, .idempotencyKey]
    public static let uniqueFields: [[CodingKeys]] = [[.familyRef, .idempotencyKey]]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, childRef, type, amount, timestamp, reason, actorParentRef, idempotencyKey
    }

    public var familyRef: RecordReference
    public var childRef: RecordReference
    /// `accrual`, `redemption`, `adjustment`, `reversal` (points counted, then taken back:
    /// the day's usage came to less), `deduction` (a parent took points away), `expiry`
    /// (a week's unspent points expired). Entries are never changed once written.
    public var type: String
    public var amount: Int64
    public var timestamp: Date
    public var reason: String?
    public var actorParentRef: RecordReference?
    public var idempotencyKey: String?

    public init(familyRef: RecordReference, childRef: RecordReference, type: String, amount: Int64, timestamp: Date, reason: String? = nil,
                actorParentRef: RecordReference? = nil, idempotencyKey: String? = nil) {
        self.familyRef = familyRef
        self.childRef = childRef
        self.type = type
        self.amount = amount
        self.timestamp = timestamp
        self.reason = reason
        self.actorParentRef = actorParentRef
        self.idempotencyKey = idempotencyKey
    }

    /// The types whose amount is taken off the balance; the others add to it.
    public static let debitTypes: Set<String> = ["redemption", "reversal", "deduction", "expiry"]
}

/// A child's earned reward time: `balance-child-<childId>` in `default`, one per child.
public struct EarnedTimeBalance: RecordFields {
    public static let recordType = "EarnedTimeBalance"
    public static let indexedFields: Set<CodingKeys> = [.childRef]
    public static let uniqueFields: [[CodingKeys]] = [[.childRef]]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case childRef, balanceSeconds, updatedAt, pointsBalance, rewardSecondsUsed, shielded
        case shieldReason, pausedSince, pausedUntil, pausedBy, rewardSecondsToday, downtimeUntil
    }

    public var childRef: RecordReference
    public var balanceSeconds: Int64
    public var updatedAt: Date?
    public var pointsBalance: Int64?
    public var rewardSecondsUsed: Int64?
    public var shielded: Bool?
    /// Why reward apps are shielded (schema v9): `balance` (no earned time left), `paused`
    /// (a parent paused them), `dailyCap` (the day's cap is reached), `downtime` (the
    /// child's schedule, schema v10); absent when not.
    public var shieldReason: String?
    /// A parent's pause (schema v9): since when, until when (absent: until resumed), and
    /// the parent's name.
    public var pausedSince: Date?
    public var pausedUntil: Date?
    public var pausedBy: String?
    /// Reward time used in the family's day so far (schema v9), against a daily cap.
    public var rewardSecondsToday: Int64?
    /// When the downtime shielding the child ends (schema v10).
    public var downtimeUntil: Date?

    public init(childRef: RecordReference, balanceSeconds: Int64, updatedAt: Date? = nil, pointsBalance: Int64? = nil,
                rewardSecondsUsed: Int64? = nil, shielded: Bool? = nil, shieldReason: String? = nil, pausedSince: Date? = nil,
                pausedUntil: Date? = nil, pausedBy: String? = nil, rewardSecondsToday: Int64? = nil, downtimeUntil: Date? = nil) {
        self.downtimeUntil = downtimeUntil
        self.shieldReason = shieldReason
        self.pausedSince = pausedSince
        self.pausedUntil = pausedUntil
        self.pausedBy = pausedBy
        self.rewardSecondsToday = rewardSecondsToday
        self.childRef = childRef
        self.balanceSeconds = balanceSeconds
        self.updatedAt = updatedAt
        self.pointsBalance = pointsBalance
        self.rewardSecondsUsed = rewardSecondsUsed
        self.shielded = shielded
    }
}

/// What a parent (or the server) did, for the family's audit log.
public struct AuditEntry: RecordFields {
    public static let recordType = "AuditEntry"
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .timestamp, .actor]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, actorParentRef, action, target, timestamp, metadata, actor
    }

    public var familyRef: RecordReference
    public var actorParentRef: RecordReference
    public var action: String
    public var target: String?
    public var timestamp: Date
    public var metadata: String?
    public var actor: String?

    public init(familyRef: RecordReference, actorParentRef: RecordReference, action: String, target: String? = nil, timestamp: Date,
                metadata: String? = nil, actor: String? = nil) {
        self.familyRef = familyRef
        self.actorParentRef = actorParentRef
        self.action = action
        self.target = target
        self.timestamp = timestamp
        self.metadata = metadata
        self.actor = actor
    }
}
