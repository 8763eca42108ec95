import Foundation
import RPCCore

// What a child asks of its parents, and how they answered.

/// A child's request for more reward time: `request-<id>` in `default`, written by the
/// aggregator only (`aggregator.askForTime`, `aggregator.answerRequest`, and its expiry).
public struct TimeRequest: RecordFields {
    public static let recordType = "TimeRequest"
    public static let indexedFields: Set<CodingKeys> = [.childRef, .deviceID, .status, .createdAt]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case childRef, deviceID, minutes, restOfDay, app, appName, note, status, createdAt, expiresAt, whilePaused
        case answeredAt, answeredByParentRef, answeredBy, grantedMinutes, reply
    }

    public var childRef: RecordReference
    /// The child's device that asked.
    public var deviceID: String
    /// How much was asked for (for `restOfDay`, what was left of the day when asked).
    public var minutes: Int64
    /// Asked for the rest of the family's day.
    public var restOfDay: Bool?
    /// One reward app (its bundle or logical id) and its name; absent: every reward app.
    public var app: String?
    public var appName: String?
    /// The child's note.
    public var note: String?
    /// `open`, `approved`, `denied`, `expired`.
    public var status: String
    public var createdAt: Date
    public var expiresAt: Date?
    /// Asked while a parent's pause was on.
    public var whilePaused: Bool?
    public var answeredAt: Date?
    /// The parent who answered: its ParentProfile, and its name as the family knows it.
    public var answeredByParentRef: RecordReference?
    public var answeredBy: String?
    /// The minutes approved (which may differ from what was asked).
    public var grantedMinutes: Int64?
    /// The parent's reply to the child.
    public var reply: String?

    public init(childRef: RecordReference, deviceID: String, minutes: Int64, restOfDay: Bool? = nil, app: String? = nil, appName: String? = nil,
                note: String? = nil, status: String, createdAt: Date, expiresAt: Date? = nil, whilePaused: Bool? = nil, answeredAt: Date? = nil,
                answeredByParentRef: RecordReference? = nil, answeredBy: String? = nil, grantedMinutes: Int64? = nil, reply: String? = nil) {
        self.childRef = childRef
        self.deviceID = deviceID
        self.minutes = minutes
        self.restOfDay = restOfDay
        self.app = app
        self.appName = appName
        self.note = note
        self.status = status
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.whilePaused = whilePaused
        self.answeredAt = answeredAt
        self.answeredByParentRef = answeredByParentRef
        self.answeredBy = answeredBy
        self.grantedMinutes = grantedMinutes
        self.reply = reply
    }

    /// Every status a request has; all of them are the server's to write.
    public static let statuses = ["open", "approved", "denied", "expired"]
}
