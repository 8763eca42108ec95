import Foundation
import RPCCore

/// A child-device invitation or a parent enrollment code, in the family's `_pairing` zone:
/// the pairing service's own (no device reads or writes it). Only the secret's hash is kept.
public struct PairingInvitation: RecordFields {
    public static let recordType = "PairingInvitation"
    public static let indexedFields: Set<CodingKeys> = [.kind, .status, .expiresAt, .deviceID]
    /// The fields' names: the wire's keys.
    public enum CodingKeys: String, CodingKey, CaseIterable, Sendable {
        case kind, secretSHA256, role, status, expiresAt, failedAttempts, createdBy, zone, childOpaqueId, childName, deviceID, deviceName, acceptedAt
    }
    /// `child` (an invitation for a child device) or `parent` (an enrollment code).
    public var kind: String
    /// SHA-256 of the secret, hex.
    public var secretSHA256: String
    /// For an enrollment code: `admin` or `co_parent`.
    public var role: String?
    /// `open`, `accepted`, `confirmed`, `rejected`, `locked`, `used`.
    public var status: String
    public var expiresAt: Date
    public var failedAttempts: Int64?
    /// The parent device that made it.
    public var createdBy: String?
    /// For an invitation: the child device's zone.
    public var zone: String?
    public var childOpaqueId: String?
    public var childName: String?
    /// The device that accepted it.
    public var deviceID: String?
    public var deviceName: String?
    public var acceptedAt: Date?

    public init(kind: String, secretSHA256: String, role: String? = nil, status: String, expiresAt: Date, failedAttempts: Int64? = nil,
                createdBy: String? = nil, zone: String? = nil, childOpaqueId: String? = nil, childName: String? = nil,
                deviceID: String? = nil, deviceName: String? = nil, acceptedAt: Date? = nil) {
        self.kind = kind
        self.secretSHA256 = secretSHA256
        self.role = role
        self.status = status
        self.expiresAt = expiresAt
        self.failedAttempts = failedAttempts
        self.createdBy = createdBy
        self.zone = zone
        self.childOpaqueId = childOpaqueId
        self.childName = childName
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.acceptedAt = acceptedAt
    }
}
