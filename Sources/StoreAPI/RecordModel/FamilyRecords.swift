import Foundation
import RPCCore

// The family, its people and devices.

/// The family itself: one per family, in `default`, named by the family id.
public struct Family: RecordFields {
    public static let recordType = "Family"
    public static let indexedFields: Set<CodingKeys> = []
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case code, settingsVersion, displayName, timeZone, rewardSecondsPerPoint, alertRewardMinutesPerDay, alertOnBalanceExhausted, alertNoDataHours
        case requestExpiryMinutes, maxOpenRequests, digestEnabled, digestDay, digestTime
    }

    public var code: String?
    public var settingsVersion: Int64?
    public var displayName: String?
    /// IANA name; local days are counted in it.
    public var timeZone: String?
    public var rewardSecondsPerPoint: Int64?
    public var alertRewardMinutesPerDay: Int64?
    public var alertOnBalanceExhausted: Bool?
    public var alertNoDataHours: Int64?
    /// How long a child's request for more time waits for an answer (schema v9; default 120).
    public var requestExpiryMinutes: Int64?
    /// How many unanswered requests a child may have at once (schema v9; default 3).
    public var maxOpenRequests: Int64?
    /// The weekly digest (schema v11): sent (default true), on which day (`mon` … `sun`,
    /// default `sun`) and at what time of the family's (`HH:MM`, default `18:00`).
    public var digestEnabled: Bool?
    public var digestDay: String?
    public var digestTime: String?

    public init(code: String? = nil, settingsVersion: Int64? = nil, displayName: String? = nil, timeZone: String? = nil,
                rewardSecondsPerPoint: Int64? = nil, alertRewardMinutesPerDay: Int64? = nil, alertOnBalanceExhausted: Bool? = nil,
                alertNoDataHours: Int64? = nil, requestExpiryMinutes: Int64? = nil, maxOpenRequests: Int64? = nil, digestEnabled: Bool? = nil,
                digestDay: String? = nil, digestTime: String? = nil) {
        self.digestEnabled = digestEnabled
        self.digestDay = digestDay
        self.digestTime = digestTime
        self.requestExpiryMinutes = requestExpiryMinutes
        self.maxOpenRequests = maxOpenRequests
        self.code = code
        self.settingsVersion = settingsVersion
        self.displayName = displayName
        self.timeZone = timeZone
        self.rewardSecondsPerPoint = rewardSecondsPerPoint
        self.alertRewardMinutesPerDay = alertRewardMinutesPerDay
        self.alertOnBalanceExhausted = alertOnBalanceExhausted
        self.alertNoDataHours = alertNoDataHours
    }
}

/// A parent: `parent-<deviceId>` in `default`.
public struct ParentProfile: RecordFields {
    public static let recordType = "ParentProfile"
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .role, .deviceIds]
    public static let setFields: Set<CodingKeys> = [.deviceIds]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, role, deviceIds, displayName
    }

    public var familyRef: RecordReference
    /// `admin` or `co_parent`.
    public var role: String
    public var deviceIds: [String]?
    public var displayName: String?

    public init(familyRef: RecordReference, role: String, deviceIds: [String]? = nil, displayName: String? = nil) {
        self.familyRef = familyRef
        self.role = role
        self.deviceIds = deviceIds
        self.displayName = displayName
    }
}

/// A child, by an opaque id: `child-<childId>` in `default`.
public struct ChildContext: RecordFields {
    public static let recordType = "ChildContext"
    public static let indexedFields: Set<CodingKeys> = [.familyRef, .childOpaqueId, .pairedDeviceIds]
    public static let uniqueFields: [[CodingKeys]] = [[.familyRef, .childOpaqueId]]
    public static let setFields: Set<CodingKeys> = [.pairedDeviceIds]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case familyRef, childOpaqueId, displayName, pairedDeviceIds, dailyRewardCapMinutes, weeklyExpiry
    }

    public var familyRef: RecordReference
    public var childOpaqueId: String
    public var displayName: String?
    public var pairedDeviceIds: [String]?
    /// At most this much reward time in one of the family's days, whatever the balance
    /// (schema v9; absent: no cap).
    public var dailyRewardCapMinutes: Int64?
    /// Earned time not spent by the end of the family's week expires (schema v9; default false).
    public var weeklyExpiry: Bool?

    public init(familyRef: RecordReference, childOpaqueId: String, displayName: String? = nil, pairedDeviceIds: [String]? = nil,
                dailyRewardCapMinutes: Int64? = nil, weeklyExpiry: Bool? = nil) {
        self.dailyRewardCapMinutes = dailyRewardCapMinutes
        self.weeklyExpiry = weeklyExpiry
        self.familyRef = familyRef
        self.childOpaqueId = childOpaqueId
        self.displayName = displayName
        self.pairedDeviceIds = pairedDeviceIds
    }
}

/// The root record of a child device's zone: `session`.
public struct MonitoringSession: RecordFields {
    public static let recordType = "MonitoringSession"
    public static let indexedFields: Set<CodingKeys> = [.childRef, .deviceID, .parentDeviceID, .status]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case childRef, deviceID, parentDeviceID, status, title
    }

    public var childRef: RecordReference?
    public var deviceID: String?
    public var parentDeviceID: String?
    /// `pending`, `active`, `revoked`.
    public var status: String?
    public var title: String?

    public init(childRef: RecordReference? = nil, deviceID: String? = nil, parentDeviceID: String? = nil, status: String? = nil, title: String? = nil) {
        self.childRef = childRef
        self.deviceID = deviceID
        self.parentDeviceID = parentDeviceID
        self.status = status
        self.title = title
    }
}

/// A device, parent or child: `device-<deviceId>`.
public struct RegisteredDevice: RecordFields {
    public static let recordType = "RegisteredDevice"
    public static let indexedFields: Set<CodingKeys> = [.deviceID, .deviceType, .parentDeviceID, .childRef, .lastSyncDate]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case deviceID, deviceName, deviceType, childName, parentDeviceID, childRef, registrationDate, lastSyncDate, isActive, appVersion
    }

    public var deviceID: String
    public var deviceName: String
    /// `parent` or `child`.
    public var deviceType: String
    public var childName: String?
    public var parentDeviceID: String?
    public var childRef: RecordReference?
    public var registrationDate: Date?
    public var lastSyncDate: Date?
    public var isActive: Bool?
    /// The app's version, as the device says (schema v7): shown to the parents.
    public var appVersion: String?

    public init(deviceID: String, deviceName: String, deviceType: String, childName: String? = nil, parentDeviceID: String? = nil,
                childRef: RecordReference? = nil, registrationDate: Date? = nil, lastSyncDate: Date? = nil, isActive: Bool? = nil,
                appVersion: String? = nil) {
        self.appVersion = appVersion
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.deviceType = deviceType
        self.childName = childName
        self.parentDeviceID = parentDeviceID
        self.childRef = childRef
        self.registrationDate = registrationDate
        self.lastSyncDate = lastSyncDate
        self.isActive = isActive
    }
}
