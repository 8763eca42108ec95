import Foundation
import RPCCore

// What a child device used, and the server's daily and weekly roll-ups of it.

/// One session of one app on one child device.
public struct UsageRecord: RecordFields {
    public static let recordType = "UsageRecord"
    public static let indexedFields: Set<CodingKeys> = [.logicalID, .sessionStart, .deviceID]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case recordID, logicalID, bundleId, displayName, sessionStart, sessionEnd, totalSeconds, earnedPoints, category, deviceID, clockOffsetSeconds
    }

    public var recordID: String?
    public var logicalID: String
    public var bundleId: String?
    public var displayName: String?
    public var sessionStart: Date
    public var sessionEnd: Date
    public var totalSeconds: Int64
    public var earnedPoints: Int64?
    /// `learning` or `reward`.
    public var category: String?
    public var deviceID: String
    /// Written by the server: how far this device's clock was ahead of the server's when it
    /// sent the session (seconds, negative behind; nil when right). The session counts at
    /// its times less this.
    public var clockOffsetSeconds: Int64?

    public init(recordID: String? = nil, logicalID: String, bundleId: String? = nil, displayName: String? = nil, sessionStart: Date, sessionEnd: Date,
                totalSeconds: Int64, earnedPoints: Int64? = nil, category: String? = nil, deviceID: String) {
        self.recordID = recordID
        self.logicalID = logicalID
        self.bundleId = bundleId
        self.displayName = displayName
        self.sessionStart = sessionStart
        self.sessionEnd = sessionEnd
        self.totalSeconds = totalSeconds
        self.earnedPoints = earnedPoints
        self.category = category
        self.deviceID = deviceID
    }
}

/// A device's day, written by the aggregator: `<deviceID>_<YYYY-MM-DD>` in its zone.
public struct DailySummary: RecordFields {
    public static let recordType = "DailySummary"
    public static let indexedFields: Set<CodingKeys> = [.summaryID, .date, .deviceID, .childRef]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case summaryID, date, deviceID, childRef, totalLearningSeconds, totalRewardSeconds, totalPointsEarned, appsUsedJSON, lastUpdated
    }

    public var summaryID: String?
    public var date: Date
    public var deviceID: String
    public var childRef: RecordReference?
    public var totalLearningSeconds: Int64?
    public var totalRewardSeconds: Int64?
    public var totalPointsEarned: Int64?
    /// JSON text: `[{app, category, seconds, points}]`.
    public var appsUsedJSON: String?
    public var lastUpdated: Date?

    /// One app's use in a day (and, summed, in a report's period).
    public struct AppUsage: Codable, Sendable, Hashable {
        public var app: String
        /// `learning`, `reward`, or absent (counted in neither).
        public var category: String?
        public var seconds: Int64
        public var points: Int64

        public init(app: String, category: String?, seconds: Int64, points: Int64) {
            self.app = app
            self.category = category
            self.seconds = seconds
            self.points = points
        }
    }

    /// `appsUsedJSON` decoded.
    public var appsUsed: [AppUsage] {
        guard let text = self.appsUsedJSON else { return [] }
        return (try? RPCJSON.decode([AppUsage].self, from: text)) ?? []
    }

    public init(summaryID: String? = nil, date: Date, deviceID: String, childRef: RecordReference? = nil, totalLearningSeconds: Int64? = nil,
                totalRewardSeconds: Int64? = nil, totalPointsEarned: Int64? = nil, appsUsedJSON: String? = nil, lastUpdated: Date? = nil) {
        self.summaryID = summaryID
        self.date = date
        self.deviceID = deviceID
        self.childRef = childRef
        self.totalLearningSeconds = totalLearningSeconds
        self.totalRewardSeconds = totalRewardSeconds
        self.totalPointsEarned = totalPointsEarned
        self.appsUsedJSON = appsUsedJSON
        self.lastUpdated = lastUpdated
    }
}

/// A child's week rolled up by retention: `week-<childRecordName>-<Monday>` in `default`.
public struct WeeklySummary: RecordFields {
    public static let recordType = "WeeklySummary"
    public static let indexedFields: Set<CodingKeys> = [.childRef, .weekStart]
    public static let uniqueFields: [[CodingKeys]] = [[.childRef, .weekStart]]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case childRef, weekStart, totalLearningSeconds, totalRewardSeconds, pointsAccrued, pointsRedeemed, pointsAdjusted, usageRecordsPruned, ledgerEntriesPruned, appsUsedJSON, lastUpdated
    }

    public var childRef: RecordReference
    public var weekStart: Date
    public var totalLearningSeconds: Int64?
    public var totalRewardSeconds: Int64?
    public var pointsAccrued: Int64?
    public var pointsRedeemed: Int64?
    public var pointsAdjusted: Int64?
    public var usageRecordsPruned: Int64?
    public var ledgerEntriesPruned: Int64?
    public var appsUsedJSON: String?
    public var lastUpdated: Date?

    public init(childRef: RecordReference, weekStart: Date, totalLearningSeconds: Int64? = nil, totalRewardSeconds: Int64? = nil,
                pointsAccrued: Int64? = nil, pointsRedeemed: Int64? = nil, pointsAdjusted: Int64? = nil, usageRecordsPruned: Int64? = nil,
                ledgerEntriesPruned: Int64? = nil, appsUsedJSON: String? = nil, lastUpdated: Date? = nil) {
        self.childRef = childRef
        self.weekStart = weekStart
        self.totalLearningSeconds = totalLearningSeconds
        self.totalRewardSeconds = totalRewardSeconds
        self.pointsAccrued = pointsAccrued
        self.pointsRedeemed = pointsRedeemed
        self.pointsAdjusted = pointsAdjusted
        self.usageRecordsPruned = usageRecordsPruned
        self.ledgerEntriesPruned = ledgerEntriesPruned
        self.appsUsedJSON = appsUsedJSON
        self.lastUpdated = lastUpdated
    }
}
