/// The record types of the store's schema (docs/protocol.md, "Record types"), by name: what
/// services and clients write in `recordType` and filter on, instead of string literals.
public enum RecordTypes {
    public static let family = "Family"
    public static let parentProfile = "ParentProfile"
    public static let childContext = "ChildContext"
    public static let registeredDevice = "RegisteredDevice"
    public static let monitoringSession = "MonitoringSession"
    public static let appRule = "AppRule"
    public static let appConfiguration = "AppConfiguration"
    public static let shieldPolicy = "ShieldPolicy"
    public static let configurationCommand = "ConfigurationCommand"
    public static let usageRecord = "UsageRecord"
    public static let dailySummary = "DailySummary"
    public static let weeklySummary = "WeeklySummary"
    public static let pointsLedgerEntry = "PointsLedgerEntry"
    public static let earnedTimeBalance = "EarnedTimeBalance"
    public static let auditEntry = "AuditEntry"
    /// Pairing's own: invitations and enrollment codes, in each family's `_pairing` zone.
    public static let pairingInvitation = "PairingInvitation"

    /// Every one of them.
    public static let all = [
        family, parentProfile, childContext, registeredDevice, monitoringSession, appRule, appConfiguration, shieldPolicy,
        configurationCommand, usageRecord, dailySummary, weeklySummary, pointsLedgerEntry, earnedTimeBalance, auditEntry, pairingInvitation,
    ]
}
