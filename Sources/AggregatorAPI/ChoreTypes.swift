import Foundation
import RPCCore

// Chores: parents set them with points, the child marks one done, a parent approves (the
// points are a ledger entry naming the approver) or rejects it with a reason. Days are the
// family's, whatever a device's clock says.

/// Bounds the chore methods check.
public enum ChoreLimits {
    /// A chore's title, in characters.
    public static let titleLength = 80
    /// Points one chore is worth.
    public static let points: ClosedRange<Int64> = 1...10_000
    /// Chores a child has at once.
    public static let perChild = 50
}

/// How often a chore comes round.
public enum ChoreRepeat: String, StringEnum {
    /// Once: done (and approved) once, then it is over.
    case once
    /// Every day of the family's.
    case daily
    /// On the given weekdays.
    case weekly
}

/// A completion's state.
public enum ChoreStatus: String, StringEnum {
    case waiting, approved, rejected
}

/// `aggregator.setChore` (a parent's device): a new chore, or (with `id`) a change to one,
/// or (with `remove`) its end.
public struct SetChoreParams: Codable, Sendable, Hashable {
    /// A chore to change (`chore-…`); absent: a new one.
    public var id: String?
    /// The child's id (`emma`); a new chore needs it.
    public var child: String?
    /// "Tidy your room": 1 to 80 characters.
    public var title: String?
    /// 1 to 10000.
    public var points: Int64?
    public var `repeat`: ChoreRepeat?
    /// For `weekly`: the days it is for.
    public var days: [Weekday]?
    /// Ends the chore (its completions stay in the history).
    public var remove: Bool?

    public init(id: String? = nil, child: String? = nil, title: String? = nil, points: Int64? = nil, repeat: ChoreRepeat? = nil, days: [Weekday]? = nil,
                remove: Bool? = nil) {
        self.id = id
        self.child = child
        self.title = title
        self.points = points
        self.repeat = `repeat`
        self.days = days
        self.remove = remove
    }
}

/// A chore as parents and the child see it, with where today's occurrence is.
public struct ChoreInfo: Codable, Sendable, Hashable {
    /// `chore-<id>`.
    public var id: String
    public var child: String
    public var childName: String
    public var title: String
    public var points: Int64
    public var `repeat`: ChoreRepeat
    public var days: [Weekday]
    /// Whether it can be done today: a weekly chore's day, a one-off not approved yet.
    public var dueToday: Bool
    /// Today's occurrence (the one-off's only one): its completion's state, absent when not done.
    public var todayStatus: ChoreStatus?
    /// Removed by a parent: listed only in a completion's history.
    public var removed: Bool
    public var createdBy: String?
    public var createdAt: Date

    public init(id: String, child: String, childName: String, title: String, points: Int64, repeat: ChoreRepeat, days: [Weekday], dueToday: Bool,
                todayStatus: ChoreStatus?, removed: Bool, createdBy: String?, createdAt: Date) {
        self.id = id
        self.child = child
        self.childName = childName
        self.title = title
        self.points = points
        self.repeat = `repeat`
        self.days = days
        self.dueToday = dueToday
        self.todayStatus = todayStatus
        self.removed = removed
        self.createdBy = createdBy
        self.createdAt = createdAt
    }

    /// "Every day", "Mon, Thu", "Once".
    public var when: String {
        switch self.repeat {
        case .once: "Once"
        case .daily: "Every day"
        case .weekly: DowntimeWindow.words(days: self.days)
        }
    }
}

/// `aggregator.listChores`: a parent, its family's (or one child's); a child's device, its own.
public struct ListChoresParams: Codable, Sendable, Hashable {
    public var child: String?
    public init(child: String? = nil) { self.child = child }
}

public struct ChoreList: Codable, Sendable, Hashable {
    /// The chores in force, by child then title.
    public var chores: [ChoreInfo]
    /// Completions: those waiting for a parent on top, then the last answered, newest first (at most 50).
    public var completions: [ChoreCompletion]

    public init(chores: [ChoreInfo], completions: [ChoreCompletion]) {
        self.chores = chores
        self.completions = completions
    }
}

/// `aggregator.choreDone` (a child's device): this chore is done, today (or, for a one-off, at all).
public struct ChoreDoneParams: Codable, Sendable, Hashable {
    public var chore: String
    /// For the parents, at most 200 characters.
    public var note: String?

    public init(chore: String, note: String? = nil) {
        self.chore = chore
        self.note = note
    }
}

/// `aggregator.answerChore` (a parent's device): approve (the chore's points enter the
/// ledger) or reject with a reason.
public struct AnswerChoreParams: Codable, Sendable, Hashable {
    /// The completion's `id`.
    public var completion: String
    public var approve: Bool
    /// To the child, at most 200 characters.
    public var reason: String?

    public init(completion: String, approve: Bool, reason: String? = nil) {
        self.completion = completion
        self.approve = approve
        self.reason = reason
    }
}

/// A child's "done", and the parent's answer.
public struct ChoreCompletion: Codable, Sendable, Hashable {
    /// `done-<id>`: what an answer names.
    public var id: String
    public var chore: String
    public var title: String
    public var child: String
    public var childName: String
    public var points: Int64
    /// The family's day it was done for (`YYYY-MM-DD`), or `once`.
    public var occurrence: String
    public var note: String?
    public var status: ChoreStatus
    public var doneAt: Date
    public var deviceId: String
    public var answeredAt: Date?
    /// The parent who answered, by name.
    public var answeredBy: String?
    public var reason: String?

    public init(id: String, chore: String, title: String, child: String, childName: String, points: Int64, occurrence: String, note: String?,
                status: ChoreStatus, doneAt: Date, deviceId: String, answeredAt: Date? = nil, answeredBy: String? = nil, reason: String? = nil) {
        self.id = id
        self.chore = chore
        self.title = title
        self.child = child
        self.childName = childName
        self.points = points
        self.occurrence = occurrence
        self.note = note
        self.status = status
        self.doneAt = doneAt
        self.deviceId = deviceId
        self.answeredAt = answeredAt
        self.answeredBy = answeredBy
        self.reason = reason
    }

    /// "Emma did “Tidy your room” (10 points)", "Mum approved Emma's “Tidy your room”: +10 points".
    public var sentence: String {
        switch self.status {
        case .waiting: return "\(self.childName) did “\(self.title)” (\(self.points) point\(self.points == 1 ? "" : "s"))\(self.note.map { ": “\($0)”" } ?? "")"
        case .approved: return "\(self.answeredBy ?? "A parent") approved \(self.childName)'s “\(self.title)”: +\(self.points) point\(self.points == 1 ? "" : "s")"
        case .rejected: return "\(self.answeredBy ?? "A parent") sent back \(self.childName)'s “\(self.title)”\(self.reason.map { ": “\($0)”" } ?? "")"
        }
    }
}
