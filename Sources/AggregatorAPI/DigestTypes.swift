import Foundation
import RPCCore

// The weekly digest: each child's week in figures beside the week before, sent to every
// parent once a week at the family's chosen day and time (its time zone), and on demand.

/// `aggregator.digest`: a parent's family's week (local callers name the family).
public struct DigestParams: Codable, Sendable, Hashable {
    /// Local callers: the family.
    public var family: String?
    /// The week's last day (`YYYY-MM-DD`, the family's): the digest is of the seven days
    /// ending with it. Absent: the week the family's next (or today's) digest covers, so far.
    public var through: String?

    public init(family: String? = nil, through: String? = nil) {
        self.family = family
        self.through = through
    }
}

/// One figure of a week, beside the week before.
public struct DigestFigure: Codable, Sendable, Hashable {
    public var value: Int64
    public var previous: Int64

    public init(value: Int64, previous: Int64) {
        self.value = value
        self.previous = previous
    }

    public var change: Int64 { self.value - self.previous }
}

/// A child's week.
public struct ChildWeek: Codable, Sendable, Hashable {
    public var child: String
    public var childName: String
    public var learningSeconds: DigestFigure
    public var rewardSeconds: DigestFigure
    /// Points earned: by learning, and added by parents (grants, approvals, chores).
    public var pointsEarned: DigestFigure
    /// Points redeemed, taken away or expired.
    public var pointsSpent: DigestFigure
    public var requestsAsked: Int64
    public var requestsApproved: Int64
    public var requestsDenied: Int64
    /// Chores approved in the week.
    public var choresDone: Int64
    /// The apps used most, by name where the family's rules name them.
    public var topApps: [DigestApp]
    /// The week in one line for a parent.
    public var sentence: String

    public init(child: String, childName: String, learningSeconds: DigestFigure, rewardSeconds: DigestFigure, pointsEarned: DigestFigure,
                pointsSpent: DigestFigure, requestsAsked: Int64, requestsApproved: Int64, requestsDenied: Int64, choresDone: Int64,
                topApps: [DigestApp], sentence: String) {
        self.child = child
        self.childName = childName
        self.learningSeconds = learningSeconds
        self.rewardSeconds = rewardSeconds
        self.pointsEarned = pointsEarned
        self.pointsSpent = pointsSpent
        self.requestsAsked = requestsAsked
        self.requestsApproved = requestsApproved
        self.requestsDenied = requestsDenied
        self.choresDone = choresDone
        self.topApps = topApps
        self.sentence = sentence
    }
}

public struct DigestApp: Codable, Sendable, Hashable {
    public var app: String
    public var name: String
    public var category: String?
    public var seconds: Int64

    public init(app: String, name: String, category: String?, seconds: Int64) {
        self.app = app
        self.name = name
        self.category = category
        self.seconds = seconds
    }
}

/// `aggregator.digest`'s result, and what the weekly notification says.
public struct WeeklyDigest: Codable, Sendable, Hashable {
    public var family: String
    /// The seven days (`YYYY-MM-DD`, the family's), both included.
    public var from: String
    public var to: String
    public var timeZone: String
    public var children: [ChildWeek]
    /// The notification's title and body.
    public var title: String
    public var body: String

    public init(family: String, from: String, to: String, timeZone: String, children: [ChildWeek], title: String, body: String) {
        self.family = family
        self.from = from
        self.to = to
        self.timeZone = timeZone
        self.children = children
        self.title = title
        self.body = body
    }
}
