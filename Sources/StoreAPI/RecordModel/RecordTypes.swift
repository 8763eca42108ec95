/// The record types of the store's schema (docs/data-model.md), by name: what services and
/// clients write in `recordType` and filter on. Each name is its typed record's.
public enum RecordTypes {
    public static let family = Family.recordType
    public static let parentProfile = ParentProfile.recordType
    public static let childContext = ChildContext.recordType
    public static let registeredDevice = RegisteredDevice.recordType
    public static let monitoringSession = MonitoringSession.recordType
    public static let appRule = AppRule.recordType
    public static let appConfiguration = AppConfiguration.recordType
    public static let shieldPolicy = ShieldPolicy.recordType
    public static let configurationCommand = ConfigurationCommand.recordType
    public static let usageRecord = UsageRecord.recordType
    public static let dailySummary = DailySummary.recordType
    public static let weeklySummary = WeeklySummary.recordType
    public static let pointsLedgerEntry = PointsLedgerEntry.recordType
    public static let earnedTimeBalance = EarnedTimeBalance.recordType
    public static let auditEntry = AuditEntry.recordType
    public static let pairingInvitation = PairingInvitation.recordType
    public static let timeRequest = TimeRequest.recordType
    public static let childAppRule = ChildAppRule.recordType

    /// Every typed record type, in the schema's order.
    public static let types: [any RecordFields.Type] = [
        Family.self, ParentProfile.self, ChildContext.self, MonitoringSession.self, RegisteredDevice.self, AppRule.self, AppConfiguration.self,
        ShieldPolicy.self, ConfigurationCommand.self, UsageRecord.self, DailySummary.self, PointsLedgerEntry.self, EarnedTimeBalance.self,
        AuditEntry.self, PairingInvitation.self, WeeklySummary.self, TimeRequest.self, ChildAppRule.self,
    ]

    /// Every record type's name.
    public static let all = types.map { $0.recordType }
}
