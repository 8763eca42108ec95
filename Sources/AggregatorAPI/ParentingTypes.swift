import Foundation
import RPCCore

// Everyday parenting: a child asks for more time, parents answer, grant or take away time,
// and pause a child's reward apps. The aggregator owns the ledger and the shields, so every
// client (the CLI, ScreenTimeKit, the dashboard) gets the same behaviour.

/// Bounds every parenting method checks.
public enum ParentingLimits {
    /// A child's note, a parent's reply or reason, in characters.
    public static let textLength = 200
    /// Minutes one request, grant or approval may be for (a day).
    public static let minutes: ClosedRange<Int64> = 1...1440
    /// Points one grant may add or take away.
    public static let points: ClosedRange<Int64> = 1...100_000
    /// A pause's length in minutes (a week).
    public static let pauseMinutes: ClosedRange<Int64> = 1...10_080
    /// At most this many requests in one list.
    public static let listLength = 200
}

public enum TimeRequestStatus: String, StringEnum {
    case open, approved, denied, expired
}

/// `aggregator.askForTime` (a child's device): `minutes`, or `restOfDay`; for one reward
/// app or every one.
public struct AskForTimeParams: Codable, Sendable, Hashable {
    /// 1 to 1440.
    public var minutes: Int64?
    /// The rest of the family's day (instead of `minutes`).
    public var restOfDay: Bool?
    /// One reward app (its bundle or logical id); absent: every reward app.
    public var app: String?
    /// The app's name as the child's device shows it.
    public var appName: String?
    /// For the parents, at most 200 characters.
    public var note: String?

    public init(minutes: Int64? = nil, restOfDay: Bool? = nil, app: String? = nil, appName: String? = nil, note: String? = nil) {
        self.minutes = minutes
        self.restOfDay = restOfDay
        self.app = app
        self.appName = appName
        self.note = note
    }
}

/// A request for more time, as parents and the child see it.
public struct TimeRequestInfo: Codable, Sendable, Hashable {
    /// `request-<id>`: the TimeRequest record's name, and what an answer names.
    public var id: String
    /// The child's id (`emma`) and name.
    public var child: String
    public var childName: String
    public var deviceId: String
    public var deviceName: String?
    /// Minutes asked for (for `restOfDay`, what was left of the day when asked).
    public var minutes: Int64
    public var restOfDay: Bool
    public var app: String?
    public var appName: String?
    public var note: String?
    public var status: TimeRequestStatus
    public var createdAt: Date
    /// When an open request expires unanswered.
    public var expiresAt: Date
    /// Asked while a parent's pause was on (an approval adds time; the pause still holds).
    public var whilePaused: Bool
    public var answeredAt: Date?
    /// The parent who answered, by name, and its device.
    public var answeredBy: String?
    public var answeredByDeviceId: String?
    public var grantedMinutes: Int64?
    public var reply: String?

    public init(id: String, child: String, childName: String, deviceId: String, deviceName: String?, minutes: Int64, restOfDay: Bool,
                app: String?, appName: String?, note: String?, status: TimeRequestStatus, createdAt: Date, expiresAt: Date, whilePaused: Bool,
                answeredAt: Date? = nil, answeredBy: String? = nil, answeredByDeviceId: String? = nil, grantedMinutes: Int64? = nil, reply: String? = nil) {
        self.id = id
        self.child = child
        self.childName = childName
        self.deviceId = deviceId
        self.deviceName = deviceName
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
        self.answeredBy = answeredBy
        self.answeredByDeviceId = answeredByDeviceId
        self.grantedMinutes = grantedMinutes
        self.reply = reply
    }

    /// What was asked, in words: "30 min of YouTube", "the rest of the day".
    public var asked: String {
        let amount = self.restOfDay ? "the rest of the day" : Self.minutesWords(self.minutes)
        return self.appName.map { "\(amount) of \($0)" } ?? (self.app.map { "\(amount) of \($0)" } ?? amount)
    }

    /// The request in a sentence for parents: "Emma asks for 30 min of YouTube: “homework done”".
    public var sentence: String {
        let note = self.note.map { ": “\($0)”" } ?? ""
        switch self.status {
        case .open: return "\(self.childName) asks for \(self.asked)\(note)"
        case .approved:
            let granted = self.grantedMinutes.map(Self.minutesWords) ?? self.asked
            return "\(self.answeredBy ?? "A parent") approved \(granted) for \(self.childName)\(self.reply.map { ": “\($0)”" } ?? "")"
        case .denied: return "\(self.answeredBy ?? "A parent") said no to \(self.childName)'s \(self.asked)\(self.reply.map { ": “\($0)”" } ?? "")"
        case .expired: return "\(self.childName)'s request for \(self.asked) expired unanswered"
        }
    }

    /// "15 min", "1 h", "1 h 30 min".
    public static func minutesWords(_ minutes: Int64) -> String {
        if minutes < 60 { return "\(minutes) min" }
        return minutes % 60 == 0 ? "\(minutes / 60) h" : "\(minutes / 60) h \(minutes % 60) min"
    }
}

/// `aggregator.answerRequest` (a parent's device).
public struct AnswerRequestParams: Codable, Sendable, Hashable {
    /// The request's `id`.
    public var request: String
    /// Approve (true) or deny (false).
    public var approve: Bool
    /// Minutes to approve, when not what was asked (1 to 1440).
    public var minutes: Int64?
    /// To the child, at most 200 characters.
    public var reply: String?

    public init(request: String, approve: Bool, minutes: Int64? = nil, reply: String? = nil) {
        self.request = request
        self.approve = approve
        self.minutes = minutes
        self.reply = reply
    }
}

/// `aggregator.listRequests`: a parent, its family's (or one child's); a child's device,
/// its child's.
public struct ListRequestsParams: Codable, Sendable, Hashable {
    /// A parent: one child (`emma`).
    public var child: String?
    /// Only requests in this state.
    public var status: TimeRequestStatus?
    /// At most this many (default and most 200).
    public var limit: Int?

    public init(child: String? = nil, status: TimeRequestStatus? = nil, limit: Int? = nil) {
        self.child = child
        self.status = status
        self.limit = limit
    }
}

/// Open requests on top, then the others; newest first in each.
public struct TimeRequestList: Codable, Sendable, Hashable {
    public var requests: [TimeRequestInfo]
    public init(requests: [TimeRequestInfo]) { self.requests = requests }
}

/// `aggregator.grant` (a parent's device): points or minutes, added (positive) or taken
/// away (negative), with a reason.
public struct GrantParams: Codable, Sendable, Hashable {
    /// The child's id (`emma`).
    public var child: String
    /// Points to add (positive) or take away (negative); or
    public var points: Int64?
    /// minutes of reward time, converted at the family's rate (rounded up to whole points).
    public var minutes: Int64?
    /// Why, for the child and the family's log, at most 200 characters.
    public var reason: String?

    public init(child: String, points: Int64? = nil, minutes: Int64? = nil, reason: String? = nil) {
        self.child = child
        self.points = points
        self.minutes = minutes
        self.reason = reason
    }
}

/// A child's earned time and shield, as the aggregator has just computed it.
public struct ChildTime: Codable, Sendable, Hashable {
    public var child: String
    public var childName: String
    public var pointsBalance: Int64
    public var balanceSeconds: Int64
    public var shielded: Bool
    /// `balance`, `paused`, `downtime` or `dailyCap` when shielded.
    public var shieldReason: String?
    /// A parent's pause: since, until (absent: until resumed), and who.
    public var pausedSince: Date?
    public var pausedUntil: Date?
    public var pausedBy: String?
    /// When the downtime shielding the child ends.
    public var downtimeUntil: Date?

    public init(child: String, childName: String, pointsBalance: Int64, balanceSeconds: Int64, shielded: Bool, shieldReason: String? = nil,
                pausedSince: Date? = nil, pausedUntil: Date? = nil, pausedBy: String? = nil, downtimeUntil: Date? = nil) {
        self.downtimeUntil = downtimeUntil
        self.child = child
        self.childName = childName
        self.pointsBalance = pointsBalance
        self.balanceSeconds = balanceSeconds
        self.shielded = shielded
        self.shieldReason = shieldReason
        self.pausedSince = pausedSince
        self.pausedUntil = pausedUntil
        self.pausedBy = pausedBy
    }
}

/// `aggregator.grant`'s result: the entry made and the balance after it.
public struct GrantResult: Codable, Sendable, Hashable {
    /// Points entered in the ledger: positive added, negative taken away (a removal stops at
    /// a zero balance, so it may be less than asked; 0: there was nothing to take).
    public var points: Int64
    /// What was asked, in points.
    public var askedPoints: Int64
    /// The ledger entry's name (absent when nothing was entered).
    public var entry: String?
    public var time: ChildTime

    public init(points: Int64, askedPoints: Int64, entry: String?, time: ChildTime) {
        self.points = points
        self.askedPoints = askedPoints
        self.entry = entry
        self.time = time
    }
}

/// `aggregator.pause` (a parent's device): shield a child's reward apps now, whatever the balance.
public struct PauseParams: Codable, Sendable, Hashable {
    public var child: String
    /// For this long (1 to 10080); absent: until a parent resumes.
    public var minutes: Int64?
    /// For the child and the family's log, at most 200 characters.
    public var reason: String?

    public init(child: String, minutes: Int64? = nil, reason: String? = nil) {
        self.child = child
        self.minutes = minutes
        self.reason = reason
    }
}

/// `aggregator.resume` (a parent's device): end a child's pause now.
public struct ResumeParams: Codable, Sendable, Hashable {
    public var child: String
    public init(child: String) { self.child = child }
}
